// A worker's error file: how a rank tells the launcher why it died.
//
// The launcher gives every rank a path in $ACCEL_ERROR_FILE. A worker appends
// records to it; the last "fatal" record is the error the launcher reports, and
// its time decides which rank failed first. The format, one record after the
// other (times are CLOCK_REALTIME nanoseconds):
//
//   === c++ backtrace time_ns=1700000000000000000 ===
//   ...lines...
//   === fatal time_ns=1700000000000000123 ===
//   recipe.lua:12: bad argument
//   stack traceback:
//   ...
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace accel {

// The error file's path reaches a worker in variables::kErrorFile
// (accel_variables.h).

// The kind of record that ends a worker; the launcher reports the last one.
inline constexpr std::string_view kFatalRecord = "fatal";

// Written before a worker's fatal error when a collective failed because a
// peer went away: that rank is a victim of another's failure.
inline constexpr std::string_view kPeerLostRecord = "peer lost";

struct ErrorRecord {
  std::string kind;     // "fatal", "c++ backtrace", ...
  int64_t time_ns = 0;  // CLOCK_REALTIME when the worker wrote it
  std::string text;     // the lines after the header, without the last newline
};

// Appends one record stamped with the current time, in a single write so a
// crashing process leaves either the whole record or none of it. Allocates
// nothing and is async-signal-safe, so a crash handler may call it. `kind`
// must be one line. Returns false (errno set) when the file cannot be written.
bool append_error_record(const char* path, std::string_view kind, std::string_view text) noexcept;

// Every record in the file's text, in order. Lines before the first header
// are not part of any record and are skipped.
std::vector<ErrorRecord> parse_error_records(std::string_view contents);

// Every record of the file at `path`; none when it is missing or unreadable.
std::vector<ErrorRecord> read_error_records(const std::string& path);

// The last record of `kind` among `records`, if there is one.
std::optional<ErrorRecord> last_record(const std::vector<ErrorRecord>& records,
                                       std::string_view kind);

}  // namespace accel
