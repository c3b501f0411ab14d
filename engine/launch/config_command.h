// `accel-run config`: asks the questions `accelerate config` asks that mean
// something here, one per line on `in` (an empty answer takes the default in
// brackets, end of input takes the defaults of the rest), checks each answer
// as the config file would be checked, and writes the file: to --config FILE,
// else to the default path (config_file.h). `--default` writes the defaults
// without asking.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

namespace accel {

// `args` are those after "config". Returns the exit code: 0 once written,
// 2 for a bad command line or a file that cannot be written.
int run_config_command(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
                       std::ostream& err);

}  // namespace accel
