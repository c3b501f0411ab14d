// The whole content of a data file, plain or gzip-compressed (detected from
// the bytes, not the name), so every reader of data files accepts .gz alike.
#pragma once
#include <string>

namespace accel::data {

// Errors name the path and what failed (missing file, corrupt gzip stream).
std::string read_file_text(const std::string& path);

}  // namespace accel::data
