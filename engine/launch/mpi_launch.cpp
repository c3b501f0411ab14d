#include "engine/launch/mpi_launch.h"

#include <signal.h>
#include <unistd.h>

#include <sstream>

#include "engine/protocol/error_file.h"

namespace accel {

std::string find_on_path(const std::string& program, const std::string& path_variable) {
  if (program.find('/') != std::string::npos) {
    return ::access(program.c_str(), X_OK) == 0 ? program : "";
  }
  std::istringstream dirs(path_variable);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

WorkerCommand mpirun_command(const std::string& mpirun, const std::string& accel_run,
                             const LaunchOptions& options, const std::vector<std::string>& base_env,
                             const std::vector<std::string>& exported, bool as_root) {
  WorkerCommand command;
  command.program = mpirun;
  command.argv = {mpirun, "-np", std::to_string(options.nproc), "--oversubscribe"};
  std::vector<std::string> settings = exported;
  if (as_root) {
    settings.push_back("OMPI_ALLOW_RUN_AS_ROOT=1");
    settings.push_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
  }
  for (const std::string& entry : base_env) {
    std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const std::string& setting : settings) replaced = replaced || setting.rfind(name + "=", 0) == 0;
    if (!replaced) command.env.push_back(entry);
  }
  for (const std::string& setting : settings) {
    command.env.push_back(setting);
    command.argv.push_back("-x");
    command.argv.push_back(setting.substr(0, setting.find('=')));
  }
  command.argv.push_back(accel_run);
  command.argv.push_back(options.recipe);
  command.argv.push_back("--");
  command.argv.insert(command.argv.end(), options.recipe_args.begin(), options.recipe_args.end());
  return command;
}

std::vector<RankExit> mpi_rank_exits(const std::string& error_dir, int nproc, int64_t ended_ns) {
  std::vector<RankExit> exits;
  for (int rank = 0; rank < nproc; ++rank) {
    RankExit exit;
    exit.rank = rank;
    exit.reaped_ns = ended_ns;
    std::vector<ErrorRecord> records =
        read_error_records(error_dir + "/rank-" + std::to_string(rank) + ".error");
    exit.fatal = last_record(records, kFatalRecord);
    exit.lost_peer = last_record(records, kPeerLostRecord).has_value();
    if (exit.fatal) {
      exit.exit_code = 1;
    } else {
      exit.signal = SIGTERM;  // mpirun ended it, or it never got far enough to say
    }
    exits.push_back(std::move(exit));
  }
  return exits;
}

}  // namespace accel
