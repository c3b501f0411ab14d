#include "engine/launch/env_command.h"

#include <dlfcn.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <ostream>
#include <sstream>
#include <stdexcept>

#include "engine/protocol/cpu_cores.h"
#include "engine/protocol/device_mesh.h"
#include "engine/protocol/launch_options.h"

namespace accel {
namespace {

// The worker library's exported function `name`, or nullptr and why not in `why`.
void* worker_function(const std::string& library, const char* name, std::string& why) {
  // RTLD_GLOBAL as in a worker, so LibTorch resolves its BLAS the same way.
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    why = std::string("cannot load the worker library: ") + ::dlerror();
    return nullptr;
  }
  void* function = ::dlsym(handle, name);
  if (!function) why = library + " has no " + name + ": it belongs to another accel version";
  return function;
}

// The worker library's "name\tvalue" lines, or the reason it gave none.
bool worker_facts(const std::string& library, std::string& facts) {
  using Facts = const char* (*)();
  auto get = reinterpret_cast<Facts>(worker_function(library, "accel_worker_facts", facts));
  if (!get) return false;
  facts = get();
  return true;
}

// The device mesh of the launch's sizes (1 where not given) over its
// processes: each dim's groups, by the mesh arithmetic the workers'
// Accelerator makes them with (engine/protocol/device_mesh.h), or why
// there is none.
void print_mesh(const LaunchOptions& options, std::ostream& out) {
  const int world = options.nproc * options.nnodes;
  const ParallelismSizes& p = options.parallelism;
  if (!p.given()) {
    out << "mesh: none (no parallelism_config sizes: plain data parallel over " << world << " rank(s))\n";
    return;
  }
  auto size = [](int given) { return given > 0 ? given : 1; };
  const ParallelDims sizes{size(p.dp_replicate), size(p.dp_shard), size(p.cp), size(p.tp), size(p.pp), size(p.ep)};
  out << "mesh over " << world << " rank(s): " << (sizes.pp > 1 ? "pp " + std::to_string(sizes.pp) + " x " : "")
      << "dp_replicate " << sizes.dp_replicate << " x dp_shard " << sizes.dp_shard << " x cp " << sizes.cp
      << " x tp " << sizes.tp << (sizes.ep > 1 ? " (ep " + std::to_string(sizes.ep) + " of dp_shard x cp)" : "")
      << '\n';
  if (sizes.pp > 1) {
    out << "  pipeline: " << (p.pp_schedule.empty() ? "1F1B" : p.pp_schedule) << ", "
        << (p.pp_microbatches > 0 ? p.pp_microbatches : sizes.pp) << " micro-batches, "
        << size(p.pp_virtual_stages) << " stage(s) per rank\n";
  }
  try {
    for (const auto& [name, groups] : mesh_group_rows(sizes, world)) out << "  " << name << " groups: " << groups << '\n';
  } catch (const std::invalid_argument& error) {
    out << "  " << error.what() << '\n';
  }
}

}  // namespace

int run_env_command(const std::vector<std::string>& args, const EnvContext& context,
                    std::ostream& out, std::ostream& err) {
  LaunchOptions options;
  try {
    options = resolve_launch_options(args, ConfigLookup::from_environment(), usable_cpu_cores(),
                                     RecipeRule::none);
  } catch (const LaunchOptionsError& error) {
    err << "accel-run: error: " << error.what() << '\n';
    return 2;
  }

  out << "accel: " << context.version << " (" << context.accel_run << ")\n";
  std::string facts;
  bool loaded = worker_facts(context.worker_library, facts);
  if (loaded) {
    std::istringstream lines(facts);
    for (std::string line; std::getline(lines, line);) {
      size_t tab = line.find('\t');
      if (tab == std::string::npos) continue;
      out << line.substr(0, tab) << ": " << line.substr(tab + 1) << '\n';
    }
  } else {
    out << "worker library: " << facts << '\n';
  }
  utsname system{};
  if (::uname(&system) == 0) {
    out << "system: " << system.sysname << ' ' << system.release << ' ' << system.machine << '\n';
  }
  out << "CPU: " << usable_cpu_cores() << " usable cores, "
      << ::sysconf(_SC_NPROCESSORS_ONLN) << " CPUs online\n";
  out << "ranks here: " << options.nproc << ", threads per rank: " << options.threads << '\n';
  std::string config_line = options.config_in_force.empty()
                                ? "none (the default path, " + ConfigLookup::from_environment().default_path +
                                      ", does not exist)"
                                : options.config_in_force;
  out << "config file: " << config_line << '\n';
  out << "config in force:\n";
  std::istringstream settings(describe_settings(options));
  for (std::string line; std::getline(settings, line);) out << "  " << line << '\n';
  print_mesh(options, out);
  return loaded ? 0 : 1;
}

}  // namespace accel
