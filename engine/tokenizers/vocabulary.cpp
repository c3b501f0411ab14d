#include "engine/tokenizers/vocabulary.h"

#include <algorithm>
#include <cstdint>

namespace accel::tokenizers {

Vocabulary Vocabulary::from_json(const JsonNode& node) {
  if (!node.is_object()) node.fail("is not an object of tokens and their ids");
  Vocabulary v;
  v.tokens_.reserve(node.value().size());
  std::vector<int32_t> ids;
  ids.reserve(node.value().size());
  // A few spare ids are fine; a file may not make the id table much larger
  // than its tokens (an id of 2^31 - 1 alone would ask for 8 GiB).
  const uint64_t max_id = std::min<uint64_t>(INT32_MAX, 4 * node.value().size() + 1024);
  for (const auto& [token, value] : node.value().items()) {
    if (!value.is_number_unsigned() || value.get<uint64_t>() > max_id) {
      node.fail("gives the token '" + token + "' the id " + value.dump() +
                ", expected an integer from 0 to " + std::to_string(max_id));
    }
    v.tokens_.push_back(token);
    ids.push_back(static_cast<int32_t>(value.get<uint64_t>()));
  }
  for (std::size_t i = 0; i < v.tokens_.size(); ++i) {
    const auto id = static_cast<std::size_t>(ids[i]);
    if (id >= v.by_id_.size()) v.by_id_.resize(id + 1, -1);
    if (v.by_id_[id] >= 0) {
      node.fail("gives the id " + std::to_string(id) + " to both '" +
                v.tokens_[static_cast<std::size_t>(v.by_id_[id])] + "' and '" + v.tokens_[i] + "'");
    }
    v.by_id_[id] = static_cast<int32_t>(i);
    v.index_.emplace(v.tokens_[i], ids[i]);
  }
  return v;
}

}  // namespace accel::tokenizers
