// Option-table readers: the named fields of the `{key = value}` table that
// ends many calls (`conv2d(x, w, b, {stride = 2})`, `EpochPlan{...}`).
// Every binding reads its options through these, so a missing key gives the
// fallback and a value of the wrong type is an error that names the key;
// the error boundary puts the function's name in front of it
// ("accel.nn.functional.conv2d: option 'stride' must be ...").
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "bindings/value_conversion.h"

namespace accel::lua {

// Refuses option names outside `known`, naming the unknown one.
void check_option_names(lua_State* L, const Options& opts, std::initializer_list<const char*> known);
bool option_present(lua_State* L, const Options& opts, const char* name);

double option_number(lua_State* L, const Options& opts, const char* name, double fallback);
int64_t option_integer(lua_State* L, const Options& opts, const char* name, int64_t fallback);
bool option_boolean(lua_State* L, const Options& opts, const char* name, bool fallback);
std::string option_string(lua_State* L, const Options& opts, const char* name,
                          const std::string& fallback);
// One integer per spatial dim (stride, padding...): a number, the same for
// every dim, or a table of numbers.
std::vector<int64_t> option_integers(lua_State* L, const Options& opts, const char* name,
                                     std::vector<int64_t> fallback);
// A tensor field, or nullopt when absent.
c10::optional<at::Tensor> option_tensor(lua_State* L, const Options& opts, const char* name);

// The device that creation calls naming none use (nullopt: ATen's default).
void set_creation_device(c10::optional<at::Device> device);
c10::optional<at::Device> creation_device();

// Reads dtype and device; a base without a device gets the creation device.
at::TensorOptions tensor_options(lua_State* L, const Options& opts,
                                 at::TensorOptions base = at::TensorOptions());
// Applies the table's requires_grad (ATen's factories ignore it in options).
at::Tensor with_requires_grad(lua_State* L, const Options& opts, at::Tensor t);

}  // namespace accel::lua
