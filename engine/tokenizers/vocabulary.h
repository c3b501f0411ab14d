// A model's vocabulary: token strings and their ids (tokenizer.json's
// model.vocab, {"token": id, ...}), looked up both ways. Ids are the file's,
// 0-based, below 2^31, and each belongs to one token only: a file that
// gives one id to two tokens is refused, naming both (the reference would
// keep one of them, whichever its hash map met last).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/json/json_node.h"

namespace accel::tokenizers {

using strict_json::JsonNode;

class Vocabulary {
 public:
  static Vocabulary from_json(const JsonNode& node);

  Vocabulary(Vocabulary&&) = default;
  Vocabulary& operator=(Vocabulary&&) = default;
  Vocabulary(const Vocabulary&) = delete;  // the index points into tokens_
  Vocabulary& operator=(const Vocabulary&) = delete;

  std::optional<int32_t> id(std::string_view token) const {
    const auto it = index_.find(token);
    if (it == index_.end()) return std::nullopt;
    return it->second;
  }
  // nullptr when no token has the id.
  const std::string* token(int64_t id) const {
    if (id < 0 || static_cast<uint64_t>(id) >= by_id_.size() || by_id_[static_cast<std::size_t>(id)] < 0) {
      return nullptr;
    }
    return &tokens_[static_cast<std::size_t>(by_id_[static_cast<std::size_t>(id)])];
  }
  std::size_t size() const { return tokens_.size(); }

 private:
  Vocabulary() = default;
  std::vector<std::string> tokens_;  // in the file's order
  std::vector<int32_t> by_id_;       // id -> index into tokens_, -1 for none
  std::unordered_map<std::string_view, int32_t> index_;  // token -> id
};

}  // namespace accel::tokenizers
