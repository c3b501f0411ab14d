// The one error type of checkpoint I/O. Its message always names the file
// (and, where it applies, the tensor or key) at fault.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>

#include "engine/json/json_error.h"

namespace accel::formats {

struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Runs `read` (a reader of a file's JSON), its JSON errors (engine/json/)
// raised as FormatError, so callers of this layer catch one type.
template <class Read>
auto rethrow_json_errors(Read&& read) -> decltype(read()) {
  try {
    return std::forward<Read>(read)();
  } catch (const strict_json::JsonError& e) {
    throw FormatError(e.what());
  }
}

}  // namespace accel::formats
