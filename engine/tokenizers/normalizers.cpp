#include "engine/tokenizers/normalizers.h"

#include "engine/tokenizers/byte_level.h"
#include "engine/tokenizers/character_classes.h"
#include "engine/tokenizers/growth_bound.h"
#include "engine/tokenizers/regex.h"
#include "engine/tokenizers/split_pattern.h"
#include "engine/tokenizers/unicode_forms.h"
#include "engine/utf8/utf8.h"

namespace accel::tokenizers {
namespace {

// Rewrites `text` character by character: `map(c, out)` appends what c becomes.
template <class Map>
void map_chars(std::string& text, Map&& map) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const char32_t c = utf8::next_code_point(text, i);
    map(c, out);
  }
  text.swap(out);
}

void lowercase(std::string& text) {
  map_chars(text, [](char32_t c, std::string& out) { append_lowercase(out, c); });
}

// BERT's whitespace: tab, newline and carriage return, which Unicode calls
// controls, and Unicode's White_Space.
bool is_bert_white_space(char32_t c) { return c == '\t' || c == '\n' || c == '\r' || is_white_space(c); }

class BertNormalizer : public Normalizer {
 public:
  BertNormalizer(bool clean_text, bool handle_chinese_chars, bool strip_accents, bool lowercase)
      : clean_text_(clean_text),
        handle_chinese_chars_(handle_chinese_chars),
        strip_accents_(strip_accents),
        lowercase_(lowercase) {}

  void normalize(std::string& text) const override {
    if (clean_text_ || handle_chinese_chars_) {
      map_chars(text, [this](char32_t c, std::string& out) {
        if (clean_text_) {
          if (c == 0 || c == 0xFFFD || (c != '\t' && c != '\n' && c != '\r' && is_bert_control(c))) return;
          if (is_bert_white_space(c)) c = ' ';
        }
        if (handle_chinese_chars_ && is_cjk_ideograph(c)) {
          out += ' ';
          utf8::append(out, c);
          out += ' ';
          return;
        }
        utf8::append(out, c);
      });
    }
    if (strip_accents_) {
      normalize_form(text, NormalForm::NFD);
      map_chars(text, [](char32_t c, std::string& out) {
        if (!is_bert_nonspacing_mark(c)) utf8::append(out, c);
      });
    }
    if (lowercase_) lowercase(text);
  }

 private:
  bool clean_text_, handle_chinese_chars_, strip_accents_, lowercase_;
};

class FormNormalizer : public Normalizer {
 public:
  explicit FormNormalizer(NormalForm form) : form_(form) {}
  void normalize(std::string& text) const override { normalize_form(text, form_); }

 private:
  NormalForm form_;
};

class Lowercase : public Normalizer {
 public:
  void normalize(std::string& text) const override { lowercase(text); }
};

// Strips Unicode's White_Space from either end.
class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void normalize(std::string& text) const override {
    std::size_t begin = 0, end = text.size();
    if (left_) {
      while (begin < end) {
        std::size_t next = begin;
        if (!is_white_space(utf8::next_code_point(text, next))) break;
        begin = next;
      }
    }
    if (right_) {
      while (end > begin) {
        std::size_t start = end - 1;
        while (start > begin && utf8::is_continuation(text, start)) --start;
        std::size_t i = start;
        if (!is_white_space(utf8::next_code_point(text, i))) break;
        end = start;
      }
    }
    text = text.substr(begin, end - begin);
  }

 private:
  bool left_, right_;
};

class StripAccents : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    map_chars(text, [](char32_t c, std::string& out) {
      if (!is_combining_mark(c)) utf8::append(out, c);
    });
  }
};

// The reference's Nmt: drops ASCII control characters and maps other
// spacing characters to a space, as SentencePiece's nmt normalization does.
class Nmt : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    map_chars(text, [](char32_t c, std::string& out) {
      if ((c >= 0x01 && c <= 0x08) || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F || c == 0x8F ||
          c == 0x9F) {
        return;
      }
      if (c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D || c == 0x1680 || (c >= 0x200B && c <= 0x200F) ||
          c == 0x2028 || c == 0x2029 || c == 0x2581 || c == 0xFEFF || c == 0xFFFD) {
        c = ' ';
      }
      utf8::append(out, c);
    });
  }
};

class Replace : public Normalizer {
 public:
  Replace(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void normalize(std::string& text) const override {
    text = pattern_.replace(text, content_, growth_limit(text.size()), where);
  }

 private:
  Regex pattern_;
  std::string content_;
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  void normalize(std::string& text) const override {
    if (!text.empty()) text.insert(0, prefix_);
  }

 private:
  std::string prefix_;
};

class ByteLevelNormalizer : public Normalizer {
 public:
  void normalize(std::string& text) const override {
    std::string out;
    out.reserve(text.size() * 2);
    append_byte_level(out, text);
    text.swap(out);
  }
};

void add_normalizers(const JsonNode& node, std::vector<std::unique_ptr<Normalizer>>& out) {
  const std::string type = node.string("type");
  if (type == "Sequence") {
    const JsonNode steps = node.at("normalizers");
    for (std::size_t i = 0; i < steps.size(); ++i) add_normalizers(steps.item(i), out);
  } else if (type == "BertNormalizer") {
    const bool lowercase = node.boolean_or("lowercase", true);
    out.push_back(std::make_unique<BertNormalizer>(node.boolean_or("clean_text", true),
                                                   node.boolean_or("handle_chinese_chars", true),
                                                   node.boolean_or("strip_accents", lowercase), lowercase));
  } else if (type == "NFC") {
    out.push_back(std::make_unique<FormNormalizer>(NormalForm::NFC));
  } else if (type == "NFD") {
    out.push_back(std::make_unique<FormNormalizer>(NormalForm::NFD));
  } else if (type == "NFKC") {
    out.push_back(std::make_unique<FormNormalizer>(NormalForm::NFKC));
  } else if (type == "NFKD") {
    out.push_back(std::make_unique<FormNormalizer>(NormalForm::NFKD));
  } else if (type == "Lowercase") {
    out.push_back(std::make_unique<Lowercase>());
  } else if (type == "Strip") {
    out.push_back(std::make_unique<Strip>(node.boolean_or("strip_left", true), node.boolean_or("strip_right", true)));
  } else if (type == "StripAccents") {
    out.push_back(std::make_unique<StripAccents>());
  } else if (type == "Nmt") {
    out.push_back(std::make_unique<Nmt>());
  } else if (type == "Replace") {
    out.push_back(std::make_unique<Replace>(make_pattern(node.at("pattern")), node.string("content")));
  } else if (type == "Prepend") {
    out.push_back(std::make_unique<Prepend>(node.string("prepend")));
  } else if (type == "ByteLevel") {
    out.push_back(std::make_unique<ByteLevelNormalizer>());
  } else {
    node.at("type").fail("is '" + type +
                         "', a normalizer accel does not support (it reads BertNormalizer, NFC, NFD, NFKC, NFKD, "
                         "Lowercase, Strip, StripAccents, Nmt, Replace, Prepend, ByteLevel and Sequence)");
  }
  if (type != "Sequence") out.back()->where = node.where() + " (" + type + ")";
}

}  // namespace

std::vector<std::unique_ptr<Normalizer>> make_normalizers(const JsonNode& node) {
  std::vector<std::unique_ptr<Normalizer>> out;
  add_normalizers(node, out);
  return out;
}

}  // namespace accel::tokenizers
