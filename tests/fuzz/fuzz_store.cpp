// Feeds the input to the rendezvous store's message handling over a real
// connection, as any peer on the network reaches it: a fresh StoreServer on
// 127.0.0.1 per input, a client that sends the input's bytes as its stream
// (the first byte's bit 0 set: preceded by HELLO with the run's token, so
// the commands behind it are reached; clear: as a stranger) and reads every
// reply until the store answers a last NUM_KEYS, hangs up, or stays silent
// for 10 ms (a parked WAIT, or a frame still incomplete).
// Finding: a crash, a sanitizer report, a hang, a leak (in the store or on
// its thread), or a reply that is not a well-formed frame with a known
// status.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/protocol/store_protocol.h"
#include "engine/launch/store_server.h"

namespace proto = accel::store_protocol;

namespace {

constexpr const char* kToken = "fuzz-token";
// A frame left incomplete at the input's end is completed with zeros up to
// this many bytes, so it is served instead of waited for.
constexpr uint32_t kMaxPadding = 1 << 16;

// Each input gets its own server on its own loopback address (127.1.x.y):
// connections the server closes first wait in TIME_WAIT for a minute, and
// a run of 100,000 inputs on one address uses up its ports.
std::string next_address() {
  static uint32_t n = 0;
  n = (n + 1) % (254 * 256);
  return "127.1." + std::to_string(n / 254) + "." + std::to_string(n % 254 + 1);
}

int connect_to(const std::string& address, uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (::inet_pton(AF_INET, address.c_str(), &addr.sin_addr) != 1) std::abort();
  // libFuzzer's timer (SIGALRM) can interrupt connect(), which then goes on
  // by itself: wait for it to finish and take its outcome.
  int rc = fd < 0 ? -1 : ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  if (rc != 0 && errno == EINTR) {
    pollfd p{fd, POLLOUT, 0};
    while (::poll(&p, 1, 10000) < 0 && errno == EINTR) {
    }
    int error = 0;
    socklen_t length = sizeof error;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
    rc = error == 0 && (p.revents & POLLOUT) ? 0 : -1;
    errno = error;
  }
  if (rc != 0) {
    // The harness's own failure, not the store's: say which.
    std::fprintf(stderr, "fuzz_store: cannot connect to %s:%u: %s\n", address.c_str(), port, std::strerror(errno));
    std::abort();
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

// Sends everything; the store may hang up half way, which is its right.
void send_all(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

// The stream to send: the input, its last frame completed when that is
// cheap, and a NUM_KEYS whose reply marks the end of the conversation.
struct Conversation {
  std::string stream;
  size_t replies = 0;  // to expect; 0 when the store must hang up or wait
};

Conversation conversation(std::string stream) {
  size_t replies = 0, pos = 0;
  while (pos < stream.size()) {
    if (stream.size() - pos < proto::kFrameHeaderBytes) {
      stream.resize(pos + proto::kFrameHeaderBytes, '\0');
      continue;  // the header, completed, is read again
    }
    const uint32_t length = proto::decode_u32(stream.data() + pos);
    if (length > proto::kMaxFrameBytes) return {stream, 0};  // the store must hang up
    const size_t have = stream.size() - pos - proto::kFrameHeaderBytes;
    if (have < length) {
      if (length - have > kMaxPadding) return {stream, 0};  // the store must wait for the rest
      stream.append(length - have, '\0');
    }
    pos += proto::kFrameHeaderBytes + length;
    ++replies;
  }
  stream += proto::Encoder(static_cast<uint8_t>(proto::Command::kNumKeys)).finish();
  return {stream, replies + 1};
}

// Reads replies until the expected number came, the store hangs up, or it
// is silent for 10 ms; every reply must be a frame with a known status.
void read_replies(int fd, size_t expected) {
  std::string in;
  size_t replies = 0;
  while (expected == 0 || replies < expected) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10) <= 0) return;
    char buf[65536];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return;
    in.append(buf, static_cast<size_t>(n));
    while (const auto length = proto::frame_body_length(in)) {  // throws (a finding) past the limit
      if (in.size() < proto::kFrameHeaderBytes + *length) break;
      if (*length == 0 || static_cast<uint8_t>(in[proto::kFrameHeaderBytes]) >
                              static_cast<uint8_t>(proto::Status::kError))
        std::abort();
      in.erase(0, proto::kFrameHeaderBytes + *length);
      ++replies;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  accel::StoreLimits limits;
  limits.max_stored_bytes = 1 << 16;  // small, so a full store is reached too
  limits.hello_timeout = std::chrono::milliseconds(1000);
  const std::string address = next_address();
  accel::StoreServer server(address, 0, kToken, limits);
  const int fd = connect_to(address, server.port());
  const bool hello = data[0] & 1;
  const std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  const Conversation c = conversation(
      hello ? proto::Encoder(static_cast<uint8_t>(proto::Command::kHello)).bytes(kToken).finish() + input : input);
  send_all(fd, c.stream);
  read_replies(fd, c.replies);
  ::close(fd);
  return 0;
}
