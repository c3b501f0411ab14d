// Converting an option's value for its row (launch_option_table.h), from the
// command line or from a config file, with messages that say what the row
// accepts: "--nproc expects an integer from 1 to 4096, got 'x'".
#pragma once
#include <string>

#include "engine/protocol/config_file.h"
#include "engine/protocol/launch_option_table.h"

namespace accel::options {

// The value of `text` given on the command line; throws LaunchOptionsError.
Value convert_argument(const OptionRow& row, const std::string& text);
// The value of a config file's entry at `path`; throws ConfigError naming
// the file, line and key.
Value convert_entry(const OptionRow& row, const ConfigEntry& entry, const std::string& path);
// The value of a switch given: on the command line, or picked by the file's distributed_type.
Value switched_on();

// Whether the space-separated `list` holds `word`.
bool contains_word(const char* list, const std::string& word);

// A value as messages quote it: cut after 80 bytes, so that a pasted
// megabyte is not printed back.
std::string quoted(const std::string& text);

}  // namespace accel::options
