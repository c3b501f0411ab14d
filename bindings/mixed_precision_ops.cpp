// accel.core.amp: autocast regions and the fp16 loss scaler.
#include <ATen/autocast_mode.h>

#include "bindings/op_tables.h"
#include "engine/compat.h"
#include "engine/loss_scaler.h"
#include "engine/tensor_description.h"

namespace accel::lua {
namespace {

std::vector<Binding> scaler_methods();

const HandleType kScaler{"accel.LossScaler", "LossScaler:", scaler_methods};

// Autocast on for `device` with `dtype` while it lives; the previous state
// comes back on exit, including when a Lua error unwinds through it
// (LuaJIT on x64 unwinds C++ frames, running destructors).
class AutocastRegion {
 public:
  AutocastRegion(c10::DeviceType device, at::ScalarType dtype)
      : device_(device),
        was_enabled_(compat::autocast_enabled(device)),
        previous_dtype_(compat::autocast_dtype(device)) {
    compat::set_autocast_enabled(device, true);
    compat::set_autocast_dtype(device, dtype);
    at::autocast::increment_nesting();
  }
  ~AutocastRegion() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    compat::set_autocast_enabled(device_, was_enabled_);
    compat::set_autocast_dtype(device_, previous_dtype_);
  }
  AutocastRegion(const AutocastRegion&) = delete;
  AutocastRegion& operator=(const AutocastRegion&) = delete;

 private:
  c10::DeviceType device_;
  bool was_enabled_;
  at::ScalarType previous_dtype_;
};

// autocast(fn[, dtype[, device]]): calls fn with autocast to dtype
// (bfloat16 by default) on the device type of `device` ("cpu" by default,
// "cuda" or "cuda:N") and returns its results.
int autocast(lua_State* L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  const char* name = luaL_optstring(L, 2, "bfloat16");
  const char* device_name = luaL_optstring(L, 3, "cpu");
  at::ScalarType dtype = at::kBFloat16;
  c10::DeviceType device = c10::DeviceType::CPU;
  protect(L, "accel.amp.autocast", [&] {
    dtype = parse_dtype(name);
    device = c10::Device(device_name).type();
    TORCH_CHECK(device == c10::DeviceType::CPU || device == c10::DeviceType::CUDA,
                "autocast runs on cpu or cuda, not '", device_name, "'");
    return 0;
  });
  lua_settop(L, 1);
  AutocastRegion region(device, dtype);
  lua_call(L, 0, LUA_MULTRET);
  return lua_gettop(L);
}

DynamicLossScaler& scaler_at(lua_State* L) {
  auto* scaler = test_handle<DynamicLossScaler>(L, 1, kScaler);
  if (!scaler) throw ArgError("expected a LossScaler as argument 1 (use s:method(...))");
  return *scaler;
}

std::vector<Binding> scaler_methods() {
  return {
      bind("scale", [](lua_State* L, Receiver) { return scaler_at(L).scale(); }),
      bind("growth_tracker", [](lua_State* L, Receiver) { return scaler_at(L).growth_tracker(); }),
      // unscale(params) -> found_inf
      bind("unscale", [](lua_State* L, Receiver, TensorList params) {
        return scaler_at(L).unscale(params.value);
      }),
      bind("update", [](lua_State* L, Receiver, bool found_inf) { scaler_at(L).update(found_inf); }),
      bind("load", [](lua_State* L, Receiver, double scale, int64_t tracker) {
        scaler_at(L).load(scale, tracker);
      }),
  };
}

}  // namespace

std::vector<Binding> amp_bindings() {
  return {
      // autocast_dtype([device]) -> the dtype autocast casts to on the
      // device type of `device` ("cpu" by default), or nil outside autocast:
      // what a module sends peers it will compute on in that dtype anyway.
      bind("autocast_dtype", [](lua_State* L, c10::optional<std::string> device_name) {
        const c10::DeviceType device = c10::Device(device_name.value_or("cpu")).type();
        if (compat::autocast_enabled(device)) {
          lua_pushstring(L, dtype_text(compat::autocast_dtype(device)).c_str());
        } else {
          lua_pushnil(L);
        }
        return Pushed{1};
      }),
      // LossScaler{init_scale, growth_factor, backoff_factor, growth_interval}
      bind("LossScaler", [](lua_State* L, Options o) {
        DynamicLossScaler::Options options;
        options.init_scale = option_number(L, o, "init_scale", options.init_scale);
        options.growth_factor = option_number(L, o, "growth_factor", options.growth_factor);
        options.backoff_factor = option_number(L, o, "backoff_factor", options.backoff_factor);
        options.growth_interval = static_cast<int64_t>(
            option_number(L, o, "growth_interval", static_cast<double>(options.growth_interval)));
        push_handle(L, kScaler, DynamicLossScaler(options));
        return Pushed{1};
      }),
  };
}

void open_amp(lua_State* L, int table_index) {
  table_index = table_index < 0 ? lua_gettop(L) + table_index + 1 : table_index;
  register_bindings(L, table_index, "accel.amp.", amp_bindings());
  lua_pushcfunction(L, autocast);
  lua_setfield(L, table_index, "autocast");
}

}  // namespace accel::lua
