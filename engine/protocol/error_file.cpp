#include "engine/protocol/error_file.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <fstream>
#include <iterator>

namespace accel {
namespace {

constexpr std::string_view kHeaderStart = "=== ";
constexpr std::string_view kTimeField = " time_ns=";
constexpr std::string_view kHeaderEnd = " ===";

// Writes every iovec, continuing after a short write (a full disk, a signal).
bool write_all(int fd, iovec* iov, int count) {
  while (count > 0) {
    ssize_t written = ::writev(fd, iov, count);
    if (written < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    auto left = static_cast<size_t>(written);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return true;
}

// A header line "=== <kind> time_ns=<ns> ===", or nothing.
std::optional<ErrorRecord> parse_header(std::string_view line) {
  if (line.size() < kHeaderStart.size() + kHeaderEnd.size() ||
      line.substr(0, kHeaderStart.size()) != kHeaderStart ||
      line.substr(line.size() - kHeaderEnd.size()) != kHeaderEnd) {
    return std::nullopt;
  }
  std::string_view inner =
      line.substr(kHeaderStart.size(), line.size() - kHeaderStart.size() - kHeaderEnd.size());
  size_t field = inner.rfind(kTimeField);
  if (field == std::string_view::npos || field == 0) return std::nullopt;
  std::string_view digits = inner.substr(field + kTimeField.size());
  ErrorRecord record;
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), record.time_ns);
  if (error != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  record.kind = std::string(inner.substr(0, field));
  return record;
}

}  // namespace

bool append_error_record(const char* path, std::string_view kind, std::string_view text) noexcept {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  int64_t ns = static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
  char digits[24];
  auto converted = std::to_chars(digits, digits + sizeof(digits), ns);

  int fd = ::open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  char newline[] = "\n";
  bool needs_newline = text.empty() || text.back() != '\n';
  iovec iov[] = {
      {const_cast<char*>(kHeaderStart.data()), kHeaderStart.size()},
      {const_cast<char*>(kind.data()), kind.size()},
      {const_cast<char*>(kTimeField.data()), kTimeField.size()},
      {digits, static_cast<size_t>(converted.ptr - digits)},
      {const_cast<char*>(kHeaderEnd.data()), kHeaderEnd.size()},
      {newline, 1},
      {const_cast<char*>(text.data()), text.size()},
      {newline, needs_newline ? size_t{1} : size_t{0}},
  };
  bool ok = write_all(fd, iov, sizeof(iov) / sizeof(iov[0]));
  int saved = errno;
  ::close(fd);
  errno = saved;
  return ok;
}

std::vector<ErrorRecord> parse_error_records(std::string_view contents) {
  std::vector<ErrorRecord> records;
  while (!contents.empty()) {
    size_t end = contents.find('\n');
    std::string_view line = contents.substr(0, end);
    contents.remove_prefix(end == std::string_view::npos ? contents.size() : end + 1);
    if (auto header = parse_header(line)) {
      records.push_back(std::move(*header));
    } else if (!records.empty()) {
      records.back().text.append(line).push_back('\n');
    }
  }
  for (ErrorRecord& record : records) {
    if (!record.text.empty()) record.text.pop_back();  // the newline ending its last line
  }
  return records;
}

std::vector<ErrorRecord> read_error_records(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return {};
  std::string contents((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return parse_error_records(contents);
}

std::optional<ErrorRecord> last_record(const std::vector<ErrorRecord>& records,
                                       std::string_view kind) {
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    if (it->kind == kind) return *it;
  }
  return std::nullopt;
}

}  // namespace accel
