// Added tokens: tokenizer.json's "added_tokens" (special ones such as <s>,
// [CLS] or <|endoftext|>, and plain ones a fine-tune added), which are
// found in the text before anything else and never split. As the
// reference's AddedVocabulary (tokenizer/added_vocabulary.rs):
//  - a token keeps the model's id for its content when the model has one;
//    others get ids from the model's size on, in file order (the file's
//    "id" is the reference's to check, not to use);
//  - tokens with normalized = false are found in the raw text, the others
//    in each normalized stretch between them, by their normalized content;
//  - matching is leftmost-longest; single_word tokens only match between
//    non-word characters, lstrip and rstrip ones take the whitespace
//    beside them;
//  - decoding shows a normalized token in its normalized form, so the
//    decoder can undo that (a byte-level normalizer's token).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/tokenizers/piece.h"

namespace accel::tokenizers {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
};

// Leftmost-longest matching of a set of strings (a trie over bytes).
class TokenMatcher {
 public:
  void add(const std::string& pattern, int32_t value);
  bool empty() const { return values_.empty(); }
  // The longest pattern that starts at text[at], as (length, value); length 0 when none.
  std::pair<std::size_t, int32_t> longest_at(std::string_view text, std::size_t at) const;
  // Whether some pattern starts with `byte`.
  bool starts(unsigned char byte) const { return first_bytes_[byte]; }

 private:
  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> node
  std::unordered_map<int32_t, int32_t> values_;  // node -> value of the pattern ending there
  int32_t nodes_ = 1;                            // node 0 is the root
  bool first_bytes_[256] = {};
};

class AddedVocabulary {
 public:
  // Adds `tokens` in order. `model_id` gives the model's id of a content
  // (or nothing), `model_size` is the model's vocabulary size, `normalize`
  // applies the tokenizer's normalizer.
  void add(std::vector<AddedToken> tokens, FunctionRef<std::optional<int32_t>(std::string_view)> model_id,
           std::size_t model_size, FunctionRef<void(std::string&)> normalize);

  // Cuts `text` at the tokens found in it (in the raw text, or with
  // `normalized` in normalized text): `on_text(stretch, offset)` for the
  // text between them, `on_token(id)` for each token.
  void split(std::string_view text, bool normalized, FunctionRef<void(std::string_view, std::size_t)> on_text,
             FunctionRef<void(int32_t)> on_token) const;

  std::optional<int32_t> id(std::string_view content) const;
  // What decoding shows for an added token's id: its normalized content
  // when normalizing changed it, else its content; nullptr for other ids.
  const std::string* decoding_form(int64_t id) const;
  // Whether `token` (as decoding shows it) is the content of a special token.
  bool is_special(std::string_view token) const { return special_contents_.count(std::string(token)) > 0; }
  // Every added token, by id.
  std::vector<AddedToken> tokens() const;
  std::size_t size() const { return by_content_.size(); }

 private:
  std::unordered_map<std::string, int32_t> by_content_;
  std::unordered_map<int32_t, AddedToken> by_id_;
  std::unordered_map<int32_t, std::string> normalized_form_;  // only where normalizing changed the content
  std::unordered_set<std::string> special_contents_;
  TokenMatcher raw_, normalized_;
};

}  // namespace accel::tokenizers
