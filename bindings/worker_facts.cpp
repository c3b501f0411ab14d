// accel_worker_facts(): what `accel-run env` reports about the libraries a
// worker runs with. Exported from the worker library, which has LibTorch,
// LuaJIT and MPI linked in, because the launcher has none of them.
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <link.h>
#include <torch/csrc/api/include/torch/version.h>

#include <climits>
#include <cstdlib>
#include <sstream>
#include <string>

extern "C" {
#include <luajit.h>
}

#ifdef ACCEL_WITH_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

#include "engine/comm/communicator.h"
#include "engine/gpu.h"

namespace {

// The line of LibTorch's parallel summary that starts with `label`, without it.
std::string parallel_info(const std::string& label) {
  std::istringstream lines(at::get_parallel_info());
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(label, 0) == 0) return line.substr(label.size());
  }
  return "unknown";
}

// Which library libblas.so.3 resolved to in this process, and what it is.
std::string blas_facts() {
  void* blas = ::dlopen("libblas.so.3", RTLD_LAZY | RTLD_NOLOAD);
  if (!blas) return "libblas.so.3 is not loaded";
  link_map* map = nullptr;
  std::string path = "libblas.so.3";
  if (::dlinfo(blas, RTLD_DI_LINKMAP, &map) == 0 && map && map->l_name) {
    char resolved[PATH_MAX];
    path = ::realpath(map->l_name, resolved) ? resolved : map->l_name;
  }
  std::string text = "libblas.so.3 -> " + path;
  using Config = char* (*)();
  using Parallel = int (*)();
  if (auto config = reinterpret_cast<Config>(::dlsym(blas, "openblas_get_config"))) {
    std::string described = config();
    if (described.rfind("OpenBLAS", 0) != 0) described = "OpenBLAS " + described;
    text += " (" + described;
    if (auto parallel = reinterpret_cast<Parallel>(::dlsym(blas, "openblas_get_parallel"))) {
      const char* modes[] = {"sequential", "pthreads", "OpenMP"};
      int mode = parallel();
      text += std::string(", threading: ") + (mode >= 0 && mode <= 2 ? modes[mode] : "unknown");
    }
    text += ")";
  } else if (::dlsym(blas, "bli_info_get_version_str")) {
    text += " (BLIS)";
  } else if (::dlsym(blas, "mkl_get_version_string")) {
    text += " (MKL)";
  } else if (path.find("/blas/") != std::string::npos) {
    text += " (the reference BLAS)\nWARNING\tlibblas.so.3 is the slow reference BLAS (a small "
            "transformer trains about 18x slower): install libopenblas0-openmp and select it "
            "with update-alternatives --config libblas.so.3-x86_64-linux-gnu";
  }
  ::dlclose(blas);
  return text;
}

std::string mpi_facts() {
#ifdef ACCEL_WITH_MPI
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  // One of the few MPI calls allowed before MPI_Init.
  if (MPI_Get_library_version(version, &length) != MPI_SUCCESS) return "unknown";
  std::string text(version, static_cast<size_t>(length));
  size_t end = text.find_first_of("\n,");
  return text.substr(0, end);
#else
  return "not compiled in";
#endif
}

// The CUDA, NCCL and GPU lines: versions, then one line per device.
std::string gpu_facts() {
  if (!accel::gpu::compiled()) {
    return "CUDA\tnot compiled in (build with scripts/build-cuda.sh)\n"
           "NCCL\tnot compiled in (no CUDA in this build)\n";
  }
  std::ostringstream out;
  const std::string driver = accel::gpu::driver_version();
  out << "CUDA\truntime " << accel::gpu::runtime_version() << ", driver "
      << (driver.empty() ? "not found (no NVIDIA driver on this machine)" : driver) << '\n'
      << "NCCL\t" << accel::gpu::nccl_version() << '\n';
  const auto devices = accel::gpu::devices();
  if (devices.empty()) out << "GPUs\tnone visible\n";
  for (size_t i = 0; i < devices.size(); ++i) {
    const auto& d = devices[i];
    out << "GPU " << i << "\t" << d.name << ", " << (d.total_memory >> 20) << " MiB, compute capability "
        << d.major << "." << d.minor << '\n';
  }
  return out.str();
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const char* accel_worker_facts() {
  static const std::string facts = [] {
    std::ostringstream out;
    out << "LibTorch\t" << TORCH_VERSION << " (headers), parallel backend: "
        << parallel_info("ATen parallel backend: ") << '\n'
        << "LuaJIT\t" << LUAJIT_VERSION << '\n'
        << "MPI\t" << mpi_facts() << '\n'
        << gpu_facts()
        << "backends compiled in\t" << accel::compiled_backends() << '\n'
        << "BLAS\t" << blas_facts() << '\n';
    return out.str();
  }();
  return facts.c_str();
}
