#include "engine/protocol/warm_protocol.h"

#include <sstream>
#include <stdexcept>

namespace accel {
namespace {

[[noreturn]] void unexpected(const std::string& header) {
  throw std::runtime_error("unexpected bytes on a warm worker's socket: '" + header + "'");
}

}  // namespace

std::string encode_run_request(const RunRequest& request) {
  std::string text = request.cwd + '\0' + request.recipe;
  for (const std::string& arg : request.args) text += '\0' + arg;
  return text;
}

RunRequest decode_run_request(const std::string& text) {
  std::vector<std::string> fields{""};
  for (char c : text) {
    if (c == '\0') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  if (fields.size() < 2 || fields[0].empty() || fields[1].empty()) {
    throw std::runtime_error("a run request names no folder and recipe");
  }
  return RunRequest{fields[0], fields[1], std::vector<std::string>(fields.begin() + 2, fields.end())};
}

std::string encode_warm_command(const WarmCommand& command) {
  return command.word + " " + std::to_string(command.text.size()) + "\n" + command.text;
}

std::string encode_warm_message(const WarmMessage& message) {
  switch (message.kind) {
    case WarmMessage::Kind::ready:
      return "ready " + std::to_string(message.number) + " 0\n";
    case WarmMessage::Kind::more:
      return "more 0 0\n";
    case WarmMessage::Kind::ok:
    case WarmMessage::Kind::failed:
      break;
  }
  return std::string(message.kind == WarmMessage::Kind::ok ? "ok " : "failed ") +
         std::to_string(message.number) + " " + std::to_string(message.text.size()) + "\n" + message.text;
}

std::optional<std::pair<std::string, std::string>> WarmFrameReader::next_frame() {
  const size_t end = buffer_.find('\n');
  if (end == std::string::npos) {
    if (buffer_.size() > 256) unexpected(buffer_.substr(0, 64) + "...");
    return std::nullopt;
  }
  const std::string header = buffer_.substr(0, end);
  // The last word of the header is the length of the text after it.
  const size_t space = header.rfind(' ');
  size_t bytes = 0;
  try {
    size_t used = 0;
    bytes = space == std::string::npos ? 0 : std::stoul(header.substr(space + 1), &used);
    if (space == std::string::npos || used != header.size() - space - 1) unexpected(header);
  } catch (const std::logic_error&) {
    unexpected(header);
  }
  if (buffer_.size() < end + 1 + bytes) return std::nullopt;
  std::pair<std::string, std::string> frame{header.substr(0, space), buffer_.substr(end + 1, bytes)};
  buffer_.erase(0, end + 1 + bytes);
  return frame;
}

std::optional<WarmCommand> WarmFrameReader::next_command() {
  std::optional<std::pair<std::string, std::string>> frame = next_frame();
  if (!frame) return std::nullopt;
  if (frame->first != "run" && frame->first != "chunk" && frame->first != "check" && frame->first != "submit") {
    unexpected(frame->first);
  }
  return WarmCommand{frame->first, frame->second};
}

std::optional<WarmMessage> WarmFrameReader::next_message() {
  std::optional<std::pair<std::string, std::string>> frame = next_frame();
  if (!frame) return std::nullopt;
  std::istringstream header(frame->first);
  std::string word;
  WarmMessage message;
  header >> word;
  if (!(header >> message.number)) unexpected(frame->first);
  if (word == "ready") {
    message.kind = WarmMessage::Kind::ready;
  } else if (word == "ok") {
    message.kind = WarmMessage::Kind::ok;
  } else if (word == "failed") {
    message.kind = WarmMessage::Kind::failed;
  } else if (word == "more") {
    message.kind = WarmMessage::Kind::more;
  } else {
    unexpected(frame->first);
  }
  message.text = std::move(frame->second);
  return message;
}

}  // namespace accel
