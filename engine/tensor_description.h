// How engine messages name a tensor: "float32[64, 16]", with the dtype
// names of the Lua API.
#pragma once
#include <c10/core/ScalarType.h>

#include <string>

namespace at {
class Tensor;
}

namespace accel {

std::string dtype_text(c10::ScalarType type);
std::string describe_tensor(const at::Tensor& t);

}  // namespace accel
