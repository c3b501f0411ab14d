// The JSON text trackers write: strings escaped as RFC 8259 asks, and
// numbers in the shortest form that reads back to the same double. JSON has
// no NaN or infinity, so those are written as the strings "NaN",
// "Infinity" and "-Infinity" (Python's float() reads them back).
//
// Written here rather than by nlohmann::json (which writes the checkpoint
// files and reads these lines back in accel-run plot): a line is written on
// every acc:log call, which has 1% of a small model's step to spend, so it
// is appended to the tracker's buffer directly instead of being built as a
// JSON value first.
#pragma once
#include <string>
#include <string_view>

namespace accel::tracking {

void append_json_string(std::string& out, std::string_view s);
void append_json_number(std::string& out, double value);

}  // namespace accel::tracking
