// accel.core.autograd's input_backward: the zero-bubble split backward
// (split_backward_ops.cpp), which accel_core.cpp adds to the autograd table.
#pragma once
#include <vector>

namespace accel::lua {

struct Binding;  // registration.h

std::vector<Binding> split_backward_bindings();

}  // namespace accel::lua
