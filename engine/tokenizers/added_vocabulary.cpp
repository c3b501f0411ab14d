#include "engine/tokenizers/added_vocabulary.h"

#include <algorithm>

#include "engine/tokenizers/character_classes.h"
#include "engine/utf8/utf8.h"

namespace accel::tokenizers {

void TokenMatcher::add(const std::string& pattern, int32_t value) {
  int32_t node = 0;
  for (auto c = pattern.rbegin(); c != pattern.rend(); ++c) {
    const auto byte = static_cast<unsigned char>(*c);
    int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(parent_.size());
      edges_.emplace((static_cast<uint64_t>(node) << 8) | byte, next);
      parent_.push_back(node);
      byte_.push_back(byte);
      depth_.push_back(depth_[node] + 1);
      fail_.push_back(0);
      longest_.push_back(-1);
      value_.push_back(-1);
    }
    node = next;
  }
  value_[node] = value;
  longest_pattern_ = std::max(longest_pattern_, pattern.size());
}

int32_t TokenMatcher::child(int32_t node, unsigned char byte) const {
  const auto it = edges_.find((static_cast<uint64_t>(node) << 8) | byte);
  return it == edges_.end() ? -1 : it->second;
}

int32_t TokenMatcher::step(int32_t node, unsigned char byte) const {
  for (;;) {
    const int32_t next = child(node, byte);
    if (next >= 0) return next;
    if (node == 0) return 0;
    node = fail_[node];
  }
}

void TokenMatcher::build() {
  // Nodes by depth, so that a node's failure link (a shallower node) is set before it is followed.
  std::vector<int32_t> order(parent_.size() - 1);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i + 1);
  std::stable_sort(order.begin(), order.end(), [this](int32_t a, int32_t b) { return depth_[a] < depth_[b]; });
  longest_[0] = value_[0] >= 0 ? 0 : -1;
  for (const int32_t node : order) {
    const int32_t parent = parent_[node];
    fail_[node] = parent == 0 ? 0 : step(fail_[parent], byte_[node]);
    longest_[node] = value_[node] >= 0 ? node : longest_[fail_[node]];
  }
}

std::pair<std::size_t, int32_t> TokenMatcher::Scan::longest_at(std::size_t at) {
  if (at >= end_) {
    // The window [at, at + w) needs the text up to the longest pattern past its end.
    const std::size_t w = std::max<std::size_t>(65536, matcher_.longest_pattern_);
    begin_ = at;
    end_ = std::min(text_.size(), at + w);
    const std::size_t scan_end = std::min(text_.size(), end_ + matcher_.longest_pattern_);
    found_.assign(end_ - begin_, -1);
    int32_t node = 0;
    for (std::size_t i = scan_end; i-- > begin_;) {
      node = matcher_.step(node, static_cast<unsigned char>(text_[i]));
      if (i < end_) found_[i - begin_] = matcher_.longest_[node];
    }
  }
  const int32_t node = found_[at - begin_];
  if (node < 0) return {0, -1};
  return {matcher_.depth_[node], matcher_.value_[node]};
}

void AddedVocabulary::add(std::vector<AddedToken> tokens,
                          FunctionRef<std::optional<int32_t>(std::string_view)> model_id, std::size_t model_size,
                          FunctionRef<void(std::string&)> normalize) {
  // New ids continue from the model's size, or past the largest added id
  // when that already reaches it (the reference's next_id).
  int64_t next_id = static_cast<int64_t>(model_size);
  if (!by_id_.empty()) {
    int32_t largest = 0;
    for (const auto& [id, token] : by_id_) largest = std::max(largest, id);
    if (static_cast<std::size_t>(largest) >= model_size || model_size == 0) next_id = int64_t{largest} + 1;
  }
  for (AddedToken& token : tokens) {
    if (token.content.empty()) continue;
    std::optional<int32_t> id = this->id(token.content);
    if (!id) id = model_id(token.content);
    if (!id) id = static_cast<int32_t>(next_id++);
    token.id = *id;
    if (token.normalized) {
      std::string form = token.content;
      normalize(form);
      if (form != token.content) {
        normalized_form_[*id] = std::move(form);
      } else {
        normalized_form_.erase(*id);
      }
    }
    by_content_[token.content] = *id;
    if (token.special) special_contents_.insert(token.content);
    by_id_[*id] = std::move(token);
  }
  // The matchers hold every token under its current id.
  raw_ = TokenMatcher();
  normalized_ = TokenMatcher();
  std::vector<int32_t> ids;
  for (const auto& [id, token] : by_id_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (const int32_t id : ids) {
    const AddedToken& token = by_id_[id];
    if (!token.normalized) {
      raw_.add(token.content, id);
    } else {
      const auto form = normalized_form_.find(id);
      const std::string& pattern = form != normalized_form_.end() ? form->second : token.content;
      if (!pattern.empty()) normalized_.add(pattern, id);
    }
  }
  raw_.build();
  normalized_.build();
}

namespace {

// The character that ends `text` (valid UTF-8, not empty).
char32_t last_char(std::string_view text) {
  std::size_t start = text.size() - 1;
  while (start > 0 && utf8::is_continuation(text, start)) --start;
  return utf8::next_code_point(text, start);
}

}  // namespace

void AddedVocabulary::split(std::string_view text, bool normalized,
                            FunctionRef<void(std::string_view, std::size_t)> on_text,
                            FunctionRef<void(int32_t)> on_token) const {
  const TokenMatcher& matcher = normalized ? normalized_ : raw_;
  if (matcher.empty()) {
    if (!text.empty()) on_text(text, 0);
    return;
  }
  std::size_t done = 0;  // the end of what has been given out
  std::size_t at = 0;
  TokenMatcher::Scan scan(matcher, text);
  while (at < text.size()) {
    const auto [length, id] = scan.longest_at(at);
    if (length == 0) {
      ++at;
      continue;
    }
    std::size_t start = at, stop = at + length;
    at = stop;  // matches never overlap, even those discarded below
    const AddedToken& token = by_id_.at(id);
    if (token.single_word) {
      const bool space_before = start == 0 || !is_word_char(last_char(text.substr(0, start)));
      std::size_t after = stop;
      const bool space_after = stop == text.size() || !is_word_char(utf8::next_code_point(text, after));
      if (!space_before || !space_after) continue;
    }
    if (token.lstrip) {
      std::size_t first_space = start;
      while (first_space > 0) {
        std::size_t prev = first_space - 1;
        while (prev > 0 && utf8::is_continuation(text, prev)) --prev;
        std::size_t i = prev;
        if (!is_white_space(utf8::next_code_point(text, i))) break;
        first_space = prev;
      }
      start = std::max(first_space, done);
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        std::size_t next = stop;
        if (!is_white_space(utf8::next_code_point(text, next))) break;
        stop = next;
      }
      at = stop;
    }
    if (done < start) on_text(text.substr(done, start - done), done);
    on_token(id);
    done = stop;
  }
  if (done < text.size()) on_text(text.substr(done), done);
}

std::optional<int32_t> AddedVocabulary::id(std::string_view content) const {
  const auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

const std::string* AddedVocabulary::decoding_form(int64_t id) const {
  if (id < 0 || id > INT32_MAX) return nullptr;
  const auto form = normalized_form_.find(static_cast<int32_t>(id));
  if (form != normalized_form_.end()) return &form->second;
  const auto token = by_id_.find(static_cast<int32_t>(id));
  return token == by_id_.end() ? nullptr : &token->second.content;
}

std::vector<AddedToken> AddedVocabulary::tokens() const {
  std::vector<AddedToken> out;
  for (const auto& [id, token] : by_id_) out.push_back(token);
  std::sort(out.begin(), out.end(), [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
  return out;
}

}  // namespace accel::tokenizers
