#include "engine/tokenizers/pre_tokenizers.h"

#include <algorithm>

#include "engine/tokenizers/character_classes.h"
#include "engine/tokenizers/regex.h"
#include "engine/tokenizers/split_pattern.h"
#include "engine/utf8/utf8.h"

namespace accel::tokenizers {
namespace {

// The reference's SplitDelimiterBehavior: what becomes of the matches.
enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const JsonNode& node) {
  const std::string name = node.string();
  if (name == "Removed") return Behavior::Removed;
  if (name == "Isolated") return Behavior::Isolated;
  if (name == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::MergedWithNext;
  if (name == "Contiguous") return Behavior::Contiguous;
  node.fail("is '" + name + "', expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous");
}

// Spans of `text` where each character `is_match` accepts is a match of its own.
template <class Predicate>
void char_spans(const std::string& text, Predicate&& is_match, std::vector<Span>& out) {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  std::size_t gap = 0;
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t start = i;
    if (is_match(utf8::next_code_point(text, i))) {
      if (gap < start) out.push_back({gap, start, false});
      out.push_back({start, i, true});
      gap = i;
    }
  }
  if (gap < text.size()) out.push_back({gap, text.size(), false});
}

// The reference's NormalizedString::split: the pieces `spans` make under
// `behavior`, given to `out` (empty ones included; the caller drops them).
void emit_split(const Piece& piece, std::vector<Span>& spans, Behavior behavior, PieceSink out) {
  std::vector<Span> parts;
  parts.reserve(spans.size());
  switch (behavior) {
    case Behavior::Removed:
      for (const Span& s : spans) {
        if (!s.match) parts.push_back(s);
      }
      break;
    case Behavior::Isolated:
      parts = spans;
      break;
    case Behavior::Contiguous: {
      bool previous = false;
      for (const Span& s : spans) {
        if (s.match == previous && !parts.empty()) {
          parts.back().end = s.end;
        } else {
          parts.push_back(s);
        }
        previous = s.match;
      }
      break;
    }
    case Behavior::MergedWithPrevious: {
      bool previous = false;
      for (const Span& s : spans) {
        if (s.match && !previous && !parts.empty()) {
          parts.back().end = s.end;
        } else {
          parts.push_back(s);
        }
        previous = s.match;
      }
      break;
    }
    case Behavior::MergedWithNext: {
      bool previous = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous && !parts.empty()) {
          parts.back().start = it->start;
        } else {
          parts.push_back(*it);
        }
        previous = it->match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
    }
  }
  for (const Span& s : parts) {
    out(Piece{piece.text.substr(s.start, s.end - s.start), piece.at_start && s.start == 0, false});
  }
}

// GPT-2's: contractions, letters, digits, other symbols (each after an
// optional space), and runs of whitespace (the last one left to the next word).
const Regex& gpt2_words() {
  static const Regex re = Regex::compile(
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", "GPT-2's word pattern");
  return re;
}

class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex) : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}

  void split(Piece&& piece, PieceSink out) const override {
    map_pending_bytes(piece);
    if (add_prefix_space_ && (piece.text.empty() || piece.text[0] != ' ')) piece.text.insert(0, " ");
    if (!use_regex_) {
      piece.bytes_unmapped = true;
      out(std::move(piece));
      return;
    }
    std::vector<Span> spans;  // not shared: a later ByteLevel step may run inside out()
    gpt2_words().find_matches(piece.text, spans);
    for (const Span& s : spans) {
      out(Piece{piece.text.substr(s.start, s.end - s.start), piece.at_start && s.start == 0, true});
    }
  }

 private:
  bool add_prefix_space_, use_regex_;
};

class Split : public PreTokenizer {
 public:
  Split(Regex pattern, Behavior behavior, bool invert)
      : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}

  void split(Piece&& piece, PieceSink out) const override {
    map_pending_bytes(piece);
    std::vector<Span> spans;
    pattern_.find_matches(piece.text, spans);
    if (invert_) {
      for (Span& s : spans) s.match = !s.match;
    }
    emit_split(piece, spans, behavior_, out);
  }

 private:
  Regex pattern_;
  Behavior behavior_;
  bool invert_;
};

enum class PrependScheme { First, Never, Always };

class Metaspace : public PreTokenizer {
 public:
  Metaspace(char32_t replacement, PrependScheme scheme, bool split)
      : replacement_(replacement), scheme_(scheme), split_(split) {
    utf8::append(replacement_utf8_, replacement);
  }

  void split(Piece&& piece, PieceSink out) const override {
    map_pending_bytes(piece);
    std::string text;
    text.reserve(piece.text.size() + 8);
    for (const char c : piece.text) {
      if (c == ' ') {
        text += replacement_utf8_;
      } else {
        text += c;
      }
    }
    const bool starts_with_replacement = text.compare(0, replacement_utf8_.size(), replacement_utf8_) == 0;
    if (!starts_with_replacement &&
        (scheme_ == PrependScheme::Always || (scheme_ == PrependScheme::First && piece.at_start))) {
      text.insert(0, replacement_utf8_);
    }
    piece.text.swap(text);
    if (!split_) {
      out(std::move(piece));
      return;
    }
    std::vector<Span> spans;
    char_spans(piece.text, [this](char32_t c) { return c == replacement_; }, spans);
    emit_split(piece, spans, Behavior::MergedWithNext, out);
  }

 private:
  char32_t replacement_;
  std::string replacement_utf8_;
  PrependScheme scheme_;
  bool split_;
};

// Cuts at characters `is_match` accepts, under `behavior`.
template <class Predicate>
class CharSplit : public PreTokenizer {
 public:
  CharSplit(Predicate is_match, Behavior behavior) : is_match_(std::move(is_match)), behavior_(behavior) {}

  void split(Piece&& piece, PieceSink out) const override {
    map_pending_bytes(piece);
    std::vector<Span> spans;
    char_spans(piece.text, is_match_, spans);
    emit_split(piece, spans, behavior_, out);
  }

 private:
  Predicate is_match_;
  Behavior behavior_;
};

template <class Predicate>
std::unique_ptr<PreTokenizer> char_split(Predicate is_match, Behavior behavior) {
  return std::make_unique<CharSplit<Predicate>>(std::move(is_match), behavior);
}

// Whitespace removed, then each punctuation character on its own.
class BertPreTokenizer : public PreTokenizer {
 public:
  void split(Piece&& piece, PieceSink out) const override {
    map_pending_bytes(piece);
    const std::string& text = piece.text;
    std::size_t word = 0;  // where the current word began
    const auto flush = [&](std::size_t end) {
      if (word < end) out(Piece{text.substr(word, end - word), piece.at_start && word == 0, false});
    };
    for (std::size_t i = 0; i < text.size();) {
      const std::size_t start = i;
      const char32_t c = utf8::next_code_point(text, i);
      if (is_white_space(c)) {
        flush(start);
        word = i;
      } else if (is_bert_punctuation(c)) {
        flush(start);
        out(Piece{text.substr(start, i - start), piece.at_start && start == 0, false});
        word = i;
      }
    }
    flush(text.size());
  }
};

// The regex crate's \w+|[^\w\s]+, whitespace between them removed.
class Whitespace : public PreTokenizer {
 public:
  void split(Piece&& piece, PieceSink out) const override {
    map_pending_bytes(piece);
    const std::string& text = piece.text;
    std::size_t i = 0;
    while (i < text.size()) {
      const std::size_t start = i;
      const char32_t c = utf8::next_code_point(text, i);
      if (is_white_space(c) && !is_word_char(c)) continue;
      const bool word = is_word_char(c);
      std::size_t end = i;
      while (end < text.size()) {
        std::size_t next = end;
        const char32_t d = utf8::next_code_point(text, next);
        if (word ? !is_word_char(d) : (is_word_char(d) || is_white_space(d))) break;
        end = next;
      }
      out(Piece{text.substr(start, end - start), piece.at_start && start == 0, false});
      i = end;
    }
  }
};

void add_pre_tokenizers(const JsonNode& node, std::vector<std::unique_ptr<PreTokenizer>>& out) {
  const std::string type = node.string("type");
  if (type == "Sequence") {
    const JsonNode steps = node.at("pretokenizers");
    for (std::size_t i = 0; i < steps.size(); ++i) add_pre_tokenizers(steps.item(i), out);
  } else if (type == "ByteLevel") {
    out.push_back(std::make_unique<ByteLevel>(node.boolean_or("add_prefix_space", true),
                                              node.boolean_or("use_regex", true)));
  } else if (type == "Split") {
    out.push_back(std::make_unique<Split>(make_pattern(node.at("pattern")), parse_behavior(node.at("behavior")),
                                          node.boolean_or("invert", false)));
  } else if (type == "Metaspace") {
    const std::string replacement = node.string("replacement");
    std::size_t i = 0;
    const char32_t c = replacement.empty() ? 0 : utf8::next_code_point(replacement, i);
    if (replacement.empty() || i != replacement.size()) node.at("replacement").fail("must be one character");
    PrependScheme scheme = PrependScheme::Always;
    if (node.has("prepend_scheme")) {
      const std::string name = node.string("prepend_scheme");
      if (name == "first") {
        scheme = PrependScheme::First;
      } else if (name == "never") {
        scheme = PrependScheme::Never;
      } else if (name != "always") {
        node.at("prepend_scheme").fail("is '" + name + "', expected first, never or always");
      }
    }
    // Files from before prepend_scheme say add_prefix_space instead.
    if (node.has("add_prefix_space") && !node.at("add_prefix_space").boolean()) {
      if (scheme != PrependScheme::Never && node.has("prepend_scheme")) {
        node.at("add_prefix_space").fail("is false, which contradicts prepend_scheme");
      }
      scheme = PrependScheme::Never;
    }
    out.push_back(std::make_unique<Metaspace>(c, scheme, node.boolean_or("split", true)));
  } else if (type == "BertPreTokenizer") {
    out.push_back(std::make_unique<BertPreTokenizer>());
  } else if (type == "Whitespace") {
    out.push_back(std::make_unique<Whitespace>());
  } else if (type == "WhitespaceSplit") {
    out.push_back(char_split([](char32_t c) { return is_white_space(c); }, Behavior::Removed));
  } else if (type == "Punctuation") {
    const Behavior behavior = node.has("behavior") ? parse_behavior(node.at("behavior")) : Behavior::Isolated;
    out.push_back(char_split([](char32_t c) { return is_bert_punctuation(c); }, behavior));
  } else if (type == "Digits") {
    const bool individual = node.boolean_or("individual_digits", false);
    out.push_back(char_split([](char32_t c) { return is_numeric(c); },
                             individual ? Behavior::Isolated : Behavior::Contiguous));
  } else if (type == "CharDelimiterSplit") {
    const std::string delimiter = node.string("delimiter");
    std::size_t i = 0;
    const char32_t d = delimiter.empty() ? 0 : utf8::next_code_point(delimiter, i);
    if (delimiter.empty() || i != delimiter.size()) node.at("delimiter").fail("must be one character");
    out.push_back(char_split([d](char32_t c) { return c == d; }, Behavior::Removed));
  } else {
    node.at("type").fail("is '" + type +
                         "', a pre-tokenizer accel does not support (it reads ByteLevel, Split, Metaspace, "
                         "BertPreTokenizer, Whitespace, WhitespaceSplit, Punctuation, Digits, CharDelimiterSplit "
                         "and Sequence)");
  }
}

}  // namespace

std::vector<std::unique_ptr<PreTokenizer>> make_pre_tokenizers(const JsonNode& node) {
  std::vector<std::unique_ptr<PreTokenizer>> out;
  add_pre_tokenizers(node, out);
  return out;
}

}  // namespace accel::tokenizers
