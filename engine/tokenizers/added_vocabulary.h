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
#include <cstddef>
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

// Leftmost-longest matching of a set of strings in time linear in the
// text, however long the strings (a file's added token may be 300 KB): an
// Aho-Corasick automaton over the strings reversed, run backwards over the
// text, gives the longest string starting at each position, as HF
// tokenizers' AddedVocabulary finds them with its aho-corasick crate.
class TokenMatcher {
 public:
  // Adds `pattern` (a repeated one keeps the last value); build() before matching.
  void add(const std::string& pattern, int32_t value);
  void build();
  bool empty() const { return longest_pattern_ == 0; }

  // The longest pattern starting at each position of `text`, asked for in
  // increasing positions; found a window of positions at a time, so memory
  // stays bounded by the window, not the text.
  class Scan {
   public:
    Scan(const TokenMatcher& matcher, std::string_view text) : matcher_(matcher), text_(text) {}
    // (length, value) of the longest pattern at text[at]; length 0 when none.
    std::pair<std::size_t, int32_t> longest_at(std::size_t at);

   private:
    const TokenMatcher& matcher_;
    std::string_view text_;
    std::size_t begin_ = 0, end_ = 0;  // the window [begin_, end_) filled
    std::vector<int32_t> found_;       // per position of the window: the node of its longest match, or -1
  };

 private:
  int32_t step(int32_t node, unsigned char byte) const;
  int32_t child(int32_t node, unsigned char byte) const;

  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> node, of the reversed patterns
  std::vector<int32_t> parent_{-1}, fail_{0}, longest_{-1}, value_{-1};
  std::vector<uint32_t> depth_{0};
  std::vector<unsigned char> byte_{0};
  std::size_t longest_pattern_ = 0;
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
