// Byte-pair encoding as the reference's BPE model does it (models/bpe/ in
// Hugging Face tokenizers): a word starts as its characters' ids (each
// absent character as its bytes' <0xNN> tokens with byte_fallback, else as
// the unknown token, fused or not, else dropped), then the pair of
// adjacent symbols with the lowest merge rank is merged, the leftmost of
// equals first, until no adjacent pair has a merge. A priority queue over
// the pairs makes that O(n log n) in the word's length, and a cache of
// whole words (keyed by their bytes before the byte-level mapping, so a
// repeated word costs one lookup) keeps long texts linear.
//
// Read from tokenizer.json's model: vocab, merges ("a b" strings or [a, b]
// pairs), unk_token, continuing_subword_prefix, end_of_word_suffix,
// fuse_unk, byte_fallback, ignore_merges (a word that is itself in the
// vocabulary is one token: Llama 3). A merge naming a token the vocabulary
// lacks, or making one it lacks, is refused naming the merge. BPE dropout
// (random merges) is refused: its ids would differ from run to run.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/tokenizers/model.h"
#include "engine/tokenizers/vocabulary.h"

namespace accel::tokenizers {

class BpeModel : public Model {
 public:
  explicit BpeModel(const JsonNode& node);

  void tokenize(Piece& piece, std::vector<int32_t>& ids) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override { return vocab_.id(token); }
  const std::string* id_to_token(int64_t id) const override { return vocab_.token(id); }
  std::size_t vocab_size() const override { return vocab_.size(); }

 private:
  struct Merge {
    uint32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  const Merge* merge_of(int32_t a, int32_t b) const {
    const auto it = merges_.find(pair_key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  }
  // The ids of `word` (in the vocabulary's alphabet), merged.
  void merge_word(const std::string& word, std::vector<int32_t>& ids) const;

  Vocabulary vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<int32_t> unk_id_;
  std::string unk_token_;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string source_;  // names the file in errors raised while encoding
  int32_t byte_ids_[256];  // <0xNN>'s id, -1 where the vocabulary lacks it

  // Whole words already merged: their ids, as a range of cached_ids_. One
  // cache for words still in raw bytes, one for mapped or plain text.
  struct CachedWord {
    uint32_t offset;
    uint32_t length;
  };
  mutable std::unordered_map<std::string, CachedWord> cache_[2];
  mutable std::vector<int32_t> cached_ids_[2];
};

}  // namespace accel::tokenizers
