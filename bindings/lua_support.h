// Everything a binding file needs, one include: the binder split by job.
//   registration.h      bind() and register_bindings: C++ functions as Lua functions
//   value_conversion.h  Lua values to tensors, numbers, shapes, dtypes, and back
//   option_table.h      the readers of `{key = value}` options tables
//   error_boundary.h    C++ exceptions into Lua errors that name the recipe line
//   typed_userdata.h    engine objects as Lua values with methods and __gc
#pragma once

#include "bindings/error_boundary.h"
#include "bindings/option_table.h"
#include "bindings/registration.h"
#include "bindings/typed_userdata.h"
#include "bindings/value_conversion.h"
