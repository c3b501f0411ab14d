// `accel-run --backend mpi`: the ranks are started by OpenMPI's mpirun, which
// accel-run starts and supervises as its one child. Each rank writes its
// error file into a directory named by ACCEL_ERROR_DIR (rank-N.error), so
// after mpirun ends the launcher can still tell which rank failed first and
// why, with the same report as for its own workers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/launch/failure_report.h"
#include "engine/protocol/launch_options.h"
#include "engine/launch/supervisor.h"

namespace accel {

// The path of `program` found on $PATH (or as given when it holds a '/'),
// or "" when there is none.
std::string find_on_path(const std::string& program, const std::string& path_variable);

// mpirun -np N --oversubscribe -x VAR... ACCEL_RUN RECIPE -- ARGS: `exported`
// are the "NAME=value" settings the ranks need; they are added to `base_env`
// and named with -x. As root, OpenMPI's consent variables are added, since
// mpirun refuses to run as root without them.
WorkerCommand mpirun_command(const std::string& mpirun, const std::string& accel_run,
                             const LaunchOptions& options, const std::vector<std::string>& base_env,
                             const std::vector<std::string>& exported, bool as_root);

// How each of `nproc` ranks ended, as far as their error files in
// `error_dir` tell: a rank with a fatal record failed (exit code 1) at its
// time; the others count as stopped by mpirun at `ended_ns`.
std::vector<RankExit> mpi_rank_exits(const std::string& error_dir, int nproc, int64_t ended_ns);

}  // namespace accel
