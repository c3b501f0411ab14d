// The whole content of a data file, plain or gzip-compressed (detected from
// the bytes, not the name), so every reader of data files accepts .gz alike.
#pragma once
#include <cstdint>
#include <string>

namespace accel::data {

// What a data file may expand to in memory: kMaxInflation times its size on
// disk, or kMinTextLimit when that is more. Ordinary CSV and text compress
// 3 to 10 times, very repetitive data about 100; gzip's 1000-fold bombs do
// not pass. A plain file always fits (it does not expand); a pipe or device
// (no size on disk) gets kMinTextLimit.
constexpr uint64_t kMaxInflation = 100;
constexpr uint64_t kMinTextLimit = 64ull << 20;

// Errors name the path and what failed (missing file, corrupt gzip stream,
// more text than the limit above, with what to do instead).
std::string read_file_text(const std::string& path);

}  // namespace accel::data
