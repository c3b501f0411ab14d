#include "engine/launch/warm_protocol.h"

#include <sstream>
#include <stdexcept>

namespace accel {

std::string encode_warm_message(const WarmMessage& message) {
  switch (message.kind) {
    case WarmMessage::Kind::ready:
      return kReadyMessage;
    case WarmMessage::Kind::ok:
      return "ok " + std::to_string(message.collectives) + "\n";
    case WarmMessage::Kind::failed:
      return "failed " + std::to_string(message.collectives) + " " +
             std::to_string(message.error.size()) + "\n" + message.error;
  }
  return "";
}

std::optional<WarmMessage> WarmMessageReader::next() {
  const size_t end = buffer_.find('\n');
  if (end == std::string::npos) {
    if (buffer_.size() > 256) {
      throw std::runtime_error("unexpected message from a worker: '" + buffer_.substr(0, 64) + "...'");
    }
    return std::nullopt;
  }
  std::istringstream header(buffer_.substr(0, end));
  std::string word;
  header >> word;
  WarmMessage message;
  size_t error_bytes = 0;
  if (word == "ready") {
    message.kind = WarmMessage::Kind::ready;
  } else if (word == "ok" && header >> message.collectives) {
    message.kind = WarmMessage::Kind::ok;
  } else if (word == "failed" && header >> message.collectives >> error_bytes) {
    message.kind = WarmMessage::Kind::failed;
  } else {
    throw std::runtime_error("unexpected message from a worker: '" + buffer_.substr(0, end) + "'");
  }
  if (buffer_.size() < end + 1 + error_bytes) return std::nullopt;
  message.error = buffer_.substr(end + 1, error_bytes);
  buffer_.erase(0, end + 1 + error_bytes);
  return message;
}

}  // namespace accel
