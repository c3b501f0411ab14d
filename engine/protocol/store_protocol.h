// Wire format of the rendezvous store, shared by StoreServer (launcher) and
// StoreConnection, its one client. No LibTorch: the launcher includes it.
//
// Every message is a frame: a 4-byte body length, then the body. A request
// body is a Command byte then its arguments; a response body is a Status byte
// then its results. Integers are little-endian; strings and byte values are a
// 4-byte length then the bytes; key lists are a 4-byte count then strings.
//
//   request                                   Ok response
//   SET         key value                     -
//   GET         key                           value        (or NotFound)
//   ADD         key i64                       i64 new value
//   CHECK       keys                          u8 all exist
//   DELETE      key                           u8 existed
//   NUM_KEYS    -                             i64
//   WAIT        i64 timeout_ms keys           -            (or TimedOut, keys still missing)
//   COMPARE_SET key expected desired          value after the operation
//   HELLO       token                         -            (or Error, and the store hangs up)
//
// Authentication: a connection's first request must be HELLO with the run's
// rendezvous token (--rdzv-token, ACCEL_RDZV_TOKEN, or one the launcher
// generates for a single-node run). Until then the store reads at most
// kMaxHelloBytes from it, answers nothing else, and hangs up after
// StoreLimits::hello_timeout; anything but the right token is answered Error
// and the connection closed. So nothing that lacks the token can read or
// write a key (issue: forged failures and stall states from the network).
//
// WAIT with timeout_ms <= 0 waits without limit (c10d's kNoTimeout is 0); see
// deadline_after().
// Any request can also be answered Error with a message string.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace accel::store_protocol {

enum class Command : uint8_t {
  kSet = 1,
  kGet,
  kAdd,
  kCheck,
  kDelete,
  kNumKeys,
  kWait,
  kCompareSet,
  kHello,
};

enum class Status : uint8_t {
  kOk = 0,
  kNotFound,
  kTimedOut,
  kError,
};

constexpr size_t kFrameHeaderBytes = 4;
// Larger frames are taken for garbage: a stray client must not make the
// launcher allocate without bound. The store carries addresses, counters and
// the ranks' collective states, all far smaller.
constexpr uint32_t kMaxFrameBytes = 16u << 20;
// What an unauthenticated connection may send: one HELLO with its token.
constexpr uint32_t kMaxHelloBytes = 1024;
// The longest token a HELLO carries: its frame less the command byte and
// the string's length. Longer ones are refused when options are read, and
// a longer HELLO is answered with an error saying so.
constexpr size_t kMaxTokenBytes = kMaxHelloBytes - 1 - 4;

// When a wait of timeout_ms ends: never for <= 0, nor for a timeout so long
// that adding it would overflow the clock.
inline std::optional<std::chrono::steady_clock::time_point> deadline_after(int64_t timeout_ms) {
  constexpr int64_t kCenturyMs = int64_t{100} * 365 * 24 * 3600 * 1000;
  if (timeout_ms <= 0 || timeout_ms >= kCenturyMs) return std::nullopt;
  return std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
}

struct ProtocolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Builds one frame. finish() patches in the length and hands the frame over,
// leaving the encoder spent.
class Encoder {
 public:
  explicit Encoder(uint8_t tag) : buf_(kFrameHeaderBytes, '\0') { u8(tag); }

  Encoder& u8(uint8_t v) {
    buf_.push_back(static_cast<char>(v));
    return *this;
  }
  Encoder& u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) buf_.push_back(static_cast<char>(v >> (8 * i)));
    return *this;
  }
  Encoder& i64(int64_t v) {
    const auto u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) buf_.push_back(static_cast<char>(u >> (8 * i)));
    return *this;
  }
  Encoder& bytes(std::string_view v) {
    u32(static_cast<uint32_t>(v.size()));
    buf_.append(v.data(), v.size());
    return *this;
  }
  Encoder& keys(const std::vector<std::string>& ks) {
    u32(static_cast<uint32_t>(ks.size()));
    for (const auto& k : ks) bytes(k);
    return *this;
  }

  std::string finish() {
    const auto body = static_cast<uint32_t>(buf_.size() - kFrameHeaderBytes);
    for (int i = 0; i < 4; ++i) buf_[i] = static_cast<char>(body >> (8 * i));
    return std::move(buf_);
  }

 private:
  std::string buf_;
};

inline uint32_t decode_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

// The body length of the frame at the start of buf, once its header is there.
// Throws ProtocolError for a frame over `limit`.
inline std::optional<uint32_t> frame_body_length(std::string_view buf,
                                                 uint32_t limit = kMaxFrameBytes) {
  if (buf.size() < kFrameHeaderBytes) return std::nullopt;
  const uint32_t n = decode_u32(buf.data());
  if (n > limit)
    throw ProtocolError("frame of " + std::to_string(n) + " bytes exceeds the limit");
  return n;
}

// Reads the fields of one frame body in order; throws ProtocolError when the
// body is shorter than its fields claim.
class Decoder {
 public:
  explicit Decoder(std::string_view body) : rest_(body) {}

  uint8_t u8() { return static_cast<uint8_t>(take(1)[0]); }
  uint32_t u32() { return decode_u32(take(4).data()); }
  int64_t i64() {
    const std::string_view b = take(8);
    uint64_t u = 0;
    for (int i = 0; i < 8; ++i) u |= uint64_t(static_cast<uint8_t>(b[i])) << (8 * i);
    return static_cast<int64_t>(u);
  }
  std::string bytes() { return std::string(take(u32())); }
  std::vector<std::string> keys() {
    const uint32_t n = u32();
    // Each key needs at least its 4-byte length, so a huge count is garbage.
    if (n > rest_.size() / 4) throw ProtocolError("key count exceeds frame");
    std::vector<std::string> ks;
    ks.reserve(n);
    for (uint32_t i = 0; i < n; ++i) ks.push_back(bytes());
    return ks;
  }

 private:
  std::string_view take(size_t n) {
    if (n > rest_.size()) throw ProtocolError("truncated frame");
    const std::string_view v = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return v;
  }

  std::string_view rest_;
};

}  // namespace accel::store_protocol
