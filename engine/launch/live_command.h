// `accel-run attach [RUN]` (a prompt on a running job: every line a chunk,
// run on every rank at its next step boundary) and `accel-run ctl [RUN]
// CHUNK` (one chunk; exit code 0 when it was applied, 1 when not), and
// `accel-run attach --list` (the live runs of this user). RUN is the id the
// launcher gave the run; without it, the one live run started from the
// current folder (live_run_folder.h). docs/live-runs.md.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

namespace accel {

int run_live_command(const std::string& verb, const std::vector<std::string>& args, std::istream& in,
                     std::ostream& out, std::ostream& err);

}  // namespace accel
