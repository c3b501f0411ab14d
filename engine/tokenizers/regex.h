// The regular expressions of tokenizer.json ("Split" and "Replace" patterns,
// GPT-2's word pattern), matched as the reference matches them and run by
// PCRE2 with its JIT.
//
// The reference compiles them with Oniguruma (Ruby syntax) and walks the
// matches with the onig crate's find_iter; PCRE2 is the maintained library
// Debian ships that reads the same patterns (Unicode properties, lookahead,
// (?i:...)) at several times Oniguruma's speed. What differs is rewritten
// before PCRE2 compiles the pattern, so the same text splits the same way:
//   \s, \S   Unicode's White_Space (PCRE2's also takes U+180E);
//   \w, \W, \b, \B  Oniguruma's word characters (PCRE2's lack marks and
//            Alphabetic symbols, and take every number);
//   \h, \H   a hex digit and its complement, as in Ruby (PCRE2: horizontal space);
//   \p{X}    with the characters Unicode 15.0 added to X (the reference's
//            Oniguruma has them, this PCRE2 knows Unicode 14.0), from ICU;
//   ^ $      at every line, as in Ruby (PCRE2's multiline option).
// Nested character classes and class intersection (&&) are refused, naming
// the pattern. Matching is bounded: a pattern that backtracks without end
// on some text fails with an error rather than hanging.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace accel::tokenizers {

// One piece of a text as a pattern cuts it: [start, end) in bytes.
struct Span {
  std::size_t start;
  std::size_t end;
  bool match;
};

class Regex {
 public:
  // `where` names the pattern's place for errors ("'tokenizer.json':
  // pre_tokenizer.pattern.Regex").
  static Regex compile(const std::string& pattern, const std::string& where);
  // Matches `text` itself (tokenizer.json's {"String": ...} patterns).
  static Regex literal(const std::string& text, const std::string& where);
  // A Python regular expression (PEFT's target_modules), for full_match:
  // PCRE2 reads Python's syntax but for `{,n}` (0 to n, as Python 3 reads
  // it) and `\Z` (the very end), rewritten; Unicode classes, as Python's
  // str patterns.
  static Regex python(const std::string& pattern, const std::string& where);

  // Whether the whole of `text` matches, as Python's re.fullmatch says;
  // one attempt under the match limits, a pattern that needs more (one that
  // backtracks exponentially in the text's length) is an error naming the
  // pattern and the text.
  bool full_match(std::string_view text) const;

  // The reference's find_matches: consecutive spans covering `text` (valid
  // UTF-8), the matches and the text between them, in order. An empty text
  // gives one empty span that is not a match.
  void find_matches(std::string_view text, std::vector<Span>& out) const;

  // `text` with every match replaced by `content` (a Replace normalizer or
  // decoder); refused, naming `where`, before it is built when it would
  // have more than `max_bytes`.
  std::string replace(std::string_view text, const std::string& content, std::size_t max_bytes,
                      const std::string& where) const;

  const std::string& source() const;

  struct Compiled;  // PCRE2's compiled pattern and match settings (regex.cpp)

 private:
  explicit Regex(std::shared_ptr<const Compiled> compiled) : compiled_(std::move(compiled)) {}
  std::shared_ptr<const Compiled> compiled_;
};

}  // namespace accel::tokenizers
