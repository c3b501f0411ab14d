// The names of dtypes and how every message names a tensor, in one place:
// the Lua API's dtype names ("float32", "bfloat16", "int64", ...), parsed
// and printed here alone (the bindings and Lua take them from here), and a
// tensor as "float32[64, 16]", its shape as "[64, 16]".
#pragma once
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

#include <string>
#include <vector>

namespace at {
class Tensor;
}

namespace accel {

// Every dtype name, in the order of accel's docs.
std::vector<std::string> dtype_names();
// "float32" ...; a dtype without a Lua name gets LibTorch's.
std::string dtype_text(c10::ScalarType type);
// The dtype a Lua name names; throws std::invalid_argument listing the names.
c10::ScalarType parse_dtype(const std::string& name);
// "[64, 16]"; "[]" for a scalar.
std::string shape_text(c10::IntArrayRef sizes);
// "float32[64, 16]".
std::string describe_tensor(const at::Tensor& t);

}  // namespace accel
