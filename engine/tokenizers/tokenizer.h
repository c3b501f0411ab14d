// Tokenizers: text to the ids a pretrained model was trained on, and back.
// Two kinds read from a checkpoint's folder:
//  - tokenizer.json, Hugging Face `tokenizers`' file (pipeline_tokenizer.h
//    runs it, tokenizer_json.h reads it): normalizer, pre-tokenizer, BPE or
//    WordPiece model, post-processor, decoder and added tokens, giving the
//    ids the reference gives for the same file and text;
//  - a SentencePiece tokenizer.model alone (sentencepiece_tokenizer.h), run
//    by Debian's libsentencepiece.
//
// Why the tokenizer.json pipeline is written here: no C or C++ library for
// tokenizer.json installs from Debian or PyPI (the reference is Rust, its
// bindings Python and Node). What its models need beyond a few hundred
// lines of their own comes from maintained libraries: regular expressions
// from PCRE2 (regex.h: the reference's Oniguruma patterns, JIT-compiled),
// Unicode data and normalization forms from ICU (character_classes.h,
// unicode_forms.h), JSON from nlohmann-json through the engine's strict
// reader (engine/json/json_reader.h: size and depth limits, no repeated
// keys). No byte of a tokenizer file is ever executed: patterns are
// matched by PCRE2 under backtracking limits, everything else is data.
//
// Ids are the file's own, 0-based, everywhere: they are what config.json's
// eos_token_id and every pre-tokenized data set hold.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizers/added_vocabulary.h"
#include "engine/tokenizers/encoding.h"

namespace accel::tokenizers {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // The ids of `text`, or of the pair `text` and `*pair`, cut as
  // `truncation` says (nullptr: not cut), with the special tokens the
  // tokenizer adds when `add_special_tokens`; each id's segment in
  // type_ids. Text that is not valid UTF-8 is refused, naming the byte.
  Encoding encode(std::string_view text, const std::string_view* pair, bool add_special_tokens,
                  const Truncation* truncation) const;

  // The text of `ids`; special tokens left out with `skip_special_tokens`.
  // An id the tokenizer does not have is refused, naming it.
  virtual std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const = 0;

  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual std::optional<std::string> id_to_token(int64_t id) const = 0;
  // The model's vocabulary, or that and the added tokens it lacks.
  virtual std::size_t vocab_size(bool with_added_tokens) const = 0;
  // The added and special tokens, by id.
  virtual std::vector<AddedToken> added_tokens() const = 0;
  // How many special tokens encoding adds to one text, or to a pair.
  virtual std::size_t special_tokens_added(bool pair) const = 0;

 protected:
  // The ids of one text (valid UTF-8), no special tokens added.
  virtual std::vector<int32_t> encode_text(std::string_view text) const = 0;
  // `first` (and `pair`) with segments set and, when `add`, special tokens.
  virtual Encoding finish(Encoding first, Encoding* pair, bool add) const = 0;
};

// Refuses `text` unless it is valid UTF-8, naming `what` and the first bad byte.
void check_utf8(std::string_view text, const std::string& what);

}  // namespace accel::tokenizers
