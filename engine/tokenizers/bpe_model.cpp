#include "engine/tokenizers/bpe_model.h"

#include <cstdio>
#include <queue>

#include "engine/tokenizers/tokenizer_error.h"
#include "engine/utf8/utf8.h"

namespace accel::tokenizers {
namespace {

// Words longer than this are merged each time (as the reference's cache
// skips them); the cache is emptied when it holds this many words.
constexpr std::size_t kMaxCachedBytes = 256;
constexpr std::size_t kMaxCachedWords = std::size_t{1} << 18;
constexpr std::size_t kMaxCachedIds = std::size_t{1} << 22;

// One merge's two sides, from "a b" or ["a", "b"].
std::pair<std::string, std::string> merge_sides(const JsonNode& item) {
  if (item.is_string()) {
    const std::string line = item.string();
    const std::size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      item.fail("is '" + line + "', expected two tokens separated by one space");
    }
    return {line.substr(0, space), line.substr(space + 1)};
  }
  if (!item.is_array() || item.size() != 2) item.fail("is neither \"a b\" nor a pair [\"a\", \"b\"]");
  return {item.item(0).string(), item.item(1).string()};
}

}  // namespace

BpeModel::BpeModel(const JsonNode& node) : vocab_(Vocabulary::from_json(node.at("vocab"))) {
  source_ = node.where();
  if (node.has("dropout") && node.at("dropout").number() != 0.0) {
    node.at("dropout").fail("is not 0: BPE dropout (random merges) is not supported, its ids differ run to run");
  }
  unk_token_ = node.string_or("unk_token", "");
  if (node.has("unk_token")) unk_id_ = vocab_.id(unk_token_);
  continuing_subword_prefix_ = node.string_or("continuing_subword_prefix", "");
  end_of_word_suffix_ = node.string_or("end_of_word_suffix", "");
  fuse_unk_ = node.boolean_or("fuse_unk", false);
  byte_fallback_ = node.boolean_or("byte_fallback", false);
  ignore_merges_ = node.boolean_or("ignore_merges", false);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    byte_ids_[b] = vocab_.id(name).value_or(-1);
  }

  const JsonNode merges = node.at("merges");
  const std::size_t n = merges.size();
  merges_.reserve(n);
  uint32_t rank = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const JsonNode item = merges.item(i);
    if (item.is_string() && item.string().rfind("#version", 0) == 0) continue;  // merges.txt's header line
    const auto [a, b] = merge_sides(item);
    const auto a_id = vocab_.id(a), b_id = vocab_.id(b);
    if (!a_id || !b_id) item.fail("merges '" + (a_id ? b : a) + "', which is not in the vocabulary");
    if (b.size() < continuing_subword_prefix_.size()) {
      item.fail("merges '" + b + "', shorter than the continuing_subword_prefix");
    }
    const std::string merged = a + b.substr(continuing_subword_prefix_.size());
    const auto new_id = vocab_.id(merged);
    if (!new_id) item.fail("makes '" + merged + "', which is not in the vocabulary");
    merges_[pair_key(*a_id, *b_id)] = Merge{rank, *new_id};  // a repeated pair keeps its last rank
    ++rank;
  }
}

void BpeModel::merge_word(const std::string& word, std::vector<int32_t>& ids) const {
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    uint32_t length;  // bytes of the word it covers; 0 once merged into its left neighbour
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  const auto add = [&symbols](int32_t id, uint32_t length) {
    const auto n = static_cast<int32_t>(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back({id, n - 1, -1, length});
  };

  std::optional<std::pair<int32_t, uint32_t>> unk;  // an unknown run waiting to be added
  std::string lookup;
  for (std::size_t i = 0; i < word.size();) {
    const std::size_t start = i;
    i += utf8::char_length(static_cast<unsigned char>(word[i]));
    const auto byte_length = static_cast<uint32_t>(i - start);
    lookup.clear();
    if (start > 0) lookup += continuing_subword_prefix_;
    lookup.append(word, start, byte_length);
    if (i == word.size()) lookup += end_of_word_suffix_;
    if (const auto id = vocab_.id(lookup)) {
      if (unk) {
        add(unk->first, unk->second);
        unk.reset();
      }
      add(*id, byte_length);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (const char byte : lookup) all = all && byte_ids_[static_cast<unsigned char>(byte)] >= 0;
      if (all) {
        for (const char byte : lookup) add(byte_ids_[static_cast<unsigned char>(byte)], 1);
        continue;
      }
    }
    if (unk_token_.empty()) continue;  // no unknown token: the character is dropped, as in the reference
    if (!unk_id_) {
      throw TokenizerError(source_ + ": the unk_token '" + unk_token_ + "' is not in the vocabulary");
    }
    if (unk && fuse_unk_) {
      unk->second += byte_length;
    } else {
      if (unk) add(unk->first, unk->second);
      unk = std::make_pair(*unk_id_, byte_length);
    }
  }
  if (unk) add(unk->first, unk->second);

  // The lowest rank first; of equal ranks, the leftmost.
  struct Candidate {
    uint32_t rank;
    int32_t position;
    int32_t new_id;
    bool operator<(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : position > other.position;
    }
  };
  std::priority_queue<Candidate> queue;
  for (std::size_t k = 0; k + 1 < symbols.size(); ++k) {
    if (const Merge* m = merge_of(symbols[k].id, symbols[k + 1].id)) {
      queue.push({m->rank, static_cast<int32_t>(k), m->new_id});
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<std::size_t>(top.position)];
    if (left.length == 0 || left.next < 0) continue;
    const Symbol right = symbols[static_cast<std::size_t>(left.next)];
    const Merge* m = merge_of(left.id, right.id);
    if (!m || m->new_id != top.new_id) continue;  // the pair changed since it was queued
    symbols[static_cast<std::size_t>(left.next)].length = 0;
    left.id = top.new_id;
    left.length += right.length;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = top.position;
    if (left.prev >= 0) {
      if (const Merge* before = merge_of(symbols[static_cast<std::size_t>(left.prev)].id, left.id)) {
        queue.push({before->rank, left.prev, before->new_id});
      }
    }
    if (left.next >= 0) {
      if (const Merge* after = merge_of(left.id, symbols[static_cast<std::size_t>(left.next)].id)) {
        queue.push({after->rank, top.position, after->new_id});
      }
    }
  }
  for (const Symbol& s : symbols) {
    if (s.length != 0) ids.push_back(s.id);
  }
}

void BpeModel::tokenize(Piece& piece, std::vector<int32_t>& ids) const {
  const int which = piece.bytes_unmapped ? 1 : 0;
  auto& cache = cache_[which];
  auto& cached_ids = cached_ids_[which];
  const bool cacheable = piece.text.size() <= kMaxCachedBytes;
  if (cacheable) {
    const auto it = cache.find(piece.text);
    if (it != cache.end()) {
      const auto begin = cached_ids.begin() + it->second.offset;
      ids.insert(ids.end(), begin, begin + it->second.length);
      return;
    }
  }
  std::string key = cacheable ? piece.text : std::string();
  map_pending_bytes(piece);
  const std::size_t first = ids.size();
  const auto whole = ignore_merges_ ? vocab_.id(piece.text) : std::nullopt;
  if (whole) {
    ids.push_back(*whole);
  } else {
    merge_word(piece.text, ids);
  }
  if (!cacheable) return;
  if (cache.size() >= kMaxCachedWords || cached_ids.size() >= kMaxCachedIds) {
    cache.clear();
    cached_ids.clear();
  }
  const auto offset = static_cast<uint32_t>(cached_ids.size());
  cached_ids.insert(cached_ids.end(), ids.begin() + static_cast<std::ptrdiff_t>(first), ids.end());
  cache.emplace(std::move(key), CachedWord{offset, static_cast<uint32_t>(ids.size() - first)});
}

}  // namespace accel::tokenizers
