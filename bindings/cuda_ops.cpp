// accel.cuda: the GPUs of this process (engine/gpu.h), as torch.cuda. Where
// there is none, is_available() is false and device_count() 0, and every
// other function raises an error saying why (no CUDA in this build, or no
// device visible). Devices are numbered from 0, as in "cuda:0".
#include "bindings/op_tables.h"
#include "engine/gpu.h"
#include "engine/nn/float8_linear.h"

namespace accel::lua {
namespace {

using Index = c10::optional<int64_t>;  // absent: the current device

int device(Index index) { return static_cast<int>(index.value_or(-1)); }

}  // namespace

std::vector<Binding> cuda_bindings() {
  return {
      bind("is_available", []() { return gpu::count() > 0; }),
      // Whether this build has CUDA at all (torch.backends.cuda.is_built).
      bind("is_built", []() { return gpu::compiled(); }),
      bind("device_count", []() { return static_cast<int64_t>(gpu::count()); }),
      bind("current_device", []() { return static_cast<int64_t>(gpu::checked_index(-1, "accel.cuda.current_device")); }),
      bind("set_device", [](int64_t index) { gpu::set_current(static_cast<int>(index)); }),
      bind("get_device_name", [](Index index) {
        return gpu::devices().at(static_cast<size_t>(gpu::checked_index(device(index), "accel.cuda.get_device_name"))).name;
      }),
      bind("synchronize", [](Index index) { gpu::synchronize(device(index)); }),
      bind("memory_allocated", [](Index index) { return gpu::memory_allocated(device(index)); }),
      bind("max_memory_allocated", [](Index index) { return gpu::max_memory_allocated(device(index)); }),
      bind("reset_peak_memory_stats", [](Index index) { gpu::reset_peak(device(index)); }),
      bind("empty_cache", []() { gpu::empty_cache(); }),
      // mem_get_info([device]) -> free, total (bytes), as torch.cuda.mem_get_info.
      bind("mem_get_info", [](lua_State* L, Index index) {
        gpu::MemoryInfo info = gpu::memory_info(device(index));
        lua_pushnumber(L, static_cast<lua_Number>(info.free));
        lua_pushnumber(L, static_cast<lua_Number>(info.total));
        return Pushed{2};
      }),
      // nil where GPU `index` computes in float8 (mixed precision "fp8"), else why not.
      bind("float8_unavailable", [](lua_State* L, Index index) {
        const std::string why = nn::float8_unavailable(gpu::count() ? gpu::checked_index(device(index), "accel.cuda.float8_unavailable") : 0);
        if (why.empty()) {
          lua_pushnil(L);
        } else {
          lua_pushstring(L, why.c_str());
        }
        return Pushed{1};
      }),
      // The device's generator state, a uint8 tensor on the CPU.
      bind("get_rng_state", [](Index index) { return gpu::rng_state(device(index)); }),
      bind("set_rng_state", [](const at::Tensor& state, Index index) {
        TORCH_CHECK(state.scalar_type() == at::kByte && state.dim() == 1 && state.device().is_cpu(),
                    "accel.cuda.set_rng_state: expected the uint8 CPU tensor accel.cuda.get_rng_state() "
                    "returns, got a ", state.toString(), " of shape ", state.sizes());
        gpu::set_rng_state(device(index), state);
      }),
  };
}

}  // namespace accel::lua
