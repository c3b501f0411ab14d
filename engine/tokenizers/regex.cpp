#include "engine/tokenizers/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/uchar.h>
#include <unicode/uniset.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>

#include "engine/tokenizers/growth_bound.h"
#include "engine/tokenizers/tokenizer_error.h"
#include "engine/utf8/utf8.h"

namespace accel::tokenizers {
namespace {

// The Unicode version of the reference's Oniguruma (6.9.8).
constexpr const char* kOnigurumaUnicode = "15.0";

// Unicode's White_Space, as \s matches it in Oniguruma, for use inside a class.
constexpr const char* kWhiteSpace =
    "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0) return "error " + std::to_string(code);
  return reinterpret_cast<const char*>(buffer);
}

// "14.0" for PCRE2's Unicode tables.
std::string pcre2_unicode_version() {
  char version[32] = {0};
  pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, version);
  std::string v = version;
  const auto second_dot = v.find('.', v.find('.') + 1);
  return second_dot == std::string::npos ? v : v.substr(0, second_dot);
}

// The characters of property `name` (\p{name}) that Unicode assigned after
// PCRE2's tables and up to the reference's, as the inside of a class
// ("\x{31350}-\x{323AF}..."); empty when there are none or ICU does not
// know the name.
std::string newer_members(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::string> known;
  std::lock_guard<std::mutex> lock(mutex);
  const auto it = known.find(name);
  if (it != known.end()) return it->second;
  static const std::string pcre2_version = pcre2_unicode_version();
  std::string members;
  const std::string pattern = "[[:" + name + ":]&[:age=" + kOnigurumaUnicode + ":]-[:age=" + pcre2_version + ":]]";
  UErrorCode status = U_ZERO_ERROR;
  icu::UnicodeSet set(icu::UnicodeString::fromUTF8(pattern), status);
  if (U_SUCCESS(status)) {
    char range[48];
    for (int32_t r = 0; r < set.getRangeCount(); ++r) {
      const UChar32 a = set.getRangeStart(r), b = set.getRangeEnd(r);
      if (a == b) {
        std::snprintf(range, sizeof range, "\\x{%X}", static_cast<unsigned>(a));
      } else {
        std::snprintf(range, sizeof range, "\\x{%X}-\\x{%X}", static_cast<unsigned>(a), static_cast<unsigned>(b));
      }
      members += range;
    }
  }
  known.emplace(name, members);
  return members;
}

// Oniguruma's Unicode \w (letters and the rest of Alphabetic, marks,
// decimal digits, connector punctuation, and Latin-1's superscripts and
// fractions), for use inside a class.
const std::string& word_members() {
  static const std::string members = [] {
    std::string m = "\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";
    for (const char* name : {"L", "M", "Nd", "Pc", "Alphabetic"}) m += "\\p{" + std::string(name) + "}" + newer_members(name);
    return m;
  }();
  return members;
}

[[noreturn]] void refuse(const std::string& pattern, const std::string& where, const std::string& why) {
  throw TokenizerError(where + ": the pattern '" + pattern + "' " + why);
}

// Oniguruma's Ruby syntax as PCRE2 reads it (see regex.h).
std::string translate(const std::string& pattern, const std::string& where) {
  std::string out;
  out.reserve(pattern.size() + 16);
  bool in_class = false;
  std::size_t i = 0;
  const std::size_t n = pattern.size();
  while (i < n) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < n) {
      const char e = pattern[i + 1];
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
        i += 2;
      } else if (e == 'S') {
        out += in_class ? "\\S" : "[^" + std::string(kWhiteSpace) + "]";
        i += 2;
      } else if (e == 'w') {
        out += in_class ? word_members() : "[" + word_members() + "]";
        i += 2;
      } else if (e == 'W') {
        if (in_class) refuse(pattern, where, "uses \\W inside a character class, which accel does not support");
        out += "[^" + word_members() + "]";
        i += 2;
      } else if ((e == 'b' || e == 'B') && !in_class) {
        // A word boundary by that \w: a word character on one side only (\b) or not (\B).
        const std::string w = "[" + word_members() + "]";
        out += e == 'b' ? "(?:(?<=" + w + ")(?!" + w + ")|(?<!" + w + ")(?=" + w + "))"
                        : "(?:(?<=" + w + ")(?=" + w + ")|(?<!" + w + ")(?!" + w + "))";
        i += 2;
      } else if (e == 'h') {
        out += in_class ? "0-9a-fA-F" : "[0-9a-fA-F]";
        i += 2;
      } else if (e == 'H') {
        if (in_class) refuse(pattern, where, "uses \\H inside a character class, which accel does not support");
        out += "[^0-9a-fA-F]";
        i += 2;
      } else if (e == 'p' || e == 'P') {
        std::size_t end = i + 2;
        std::string name;
        if (end < n && pattern[end] == '{') {
          const std::size_t close = pattern.find('}', end);
          if (close == std::string::npos) {
            out.append(pattern, i, n - i);  // PCRE2 reports the unclosed property
            break;
          }
          name = pattern.substr(end + 1, close - end - 1);
          end = close + 1;
        } else if (end < n) {
          name = pattern.substr(end, 1);
          end += 1;
        }
        bool negated = e == 'P';
        if (!name.empty() && name[0] == '^') {
          negated = !negated;
          name.erase(0, 1);
        }
        const std::string extra = name.empty() ? std::string() : newer_members(name);
        if (extra.empty() || (in_class && negated)) {
          out.append(pattern, i, end - i);
        } else if (in_class) {
          out += "\\p{" + name + "}" + extra;
        } else {
          out += std::string(negated ? "[^" : "[") + "\\p{" + name + "}" + extra + "]";
        }
        i = end;
      } else if (e == 'Q') {
        const std::size_t close = pattern.find("\\E", i + 2);
        const std::size_t end = close == std::string::npos ? n : close + 2;
        out.append(pattern, i, end - i);
        i = end;
      } else if (e == 'x' && i + 2 < n && pattern[i + 2] == '{') {
        const std::size_t close = pattern.find('}', i + 2);
        const std::size_t end = close == std::string::npos ? n : close + 1;
        out.append(pattern, i, end - i);
        i = end;
      } else {
        out += c;
        out += e;
        i += 2;
      }
    } else if (c == '[') {
      if (in_class) {
        if (i + 1 < n && pattern[i + 1] == ':') {  // a POSIX class, [:alpha:]
          const std::size_t close = pattern.find(":]", i + 2);
          const std::size_t end = close == std::string::npos ? n : close + 2;
          out.append(pattern, i, end - i);
          i = end;
          continue;
        }
        refuse(pattern, where, "nests character classes, which accel does not support");
      }
      in_class = true;
      out += c;
      ++i;
      if (i < n && pattern[i] == '^') out += pattern[i++];
      if (i < n && pattern[i] == ']') out += pattern[i++];  // a literal ] first in a class
    } else if (c == ']' && in_class) {
      in_class = false;
      out += c;
      ++i;
    } else if (c == '&' && in_class && i + 1 < n && pattern[i + 1] == '&') {
      refuse(pattern, where, "intersects character classes (&&), which accel does not support");
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

struct CodeDeleter {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};

// Bounds on matching. One attempt (one pcre2_match call) may take at most
// kAttemptLimit steps (PCRE2's default is ten times that). A text's matches
// together may take at most kStepsPerByte per byte, twice over: an attempt
// is first tried under kFirstTry steps, charged in full whether it used them
// or not (a text has at most one attempt per byte, so first tries spend at
// most half); an attempt that needs more is tried again under what is left,
// charged in full. A pattern just under the attempt limit on every byte
// (1.7 ms a byte) thus fails its text instead of taking minutes.
constexpr uint32_t kAttemptLimit = 1000000;
constexpr uint32_t kFirstTry = 10000;
constexpr uint64_t kStepsPerByte = kFirstTry;

pcre2_jit_stack* thread_jit_stack(void*);

// Each thread matches with its own JIT stack, match context (its limits are
// set per attempt) and match data (one pair of offsets: only the whole match
// is read), made on its first match.
struct ThreadMatchState {
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = [] {
    pcre2_match_context* c = pcre2_match_context_create(nullptr);
    pcre2_set_depth_limit(c, 100000);
    pcre2_set_heap_limit(c, 64 * 1024);  // KiB
    pcre2_jit_stack_assign(c, thread_jit_stack, nullptr);
    return c;
  }();
  ~ThreadMatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};
thread_local ThreadMatchState thread_state;

pcre2_jit_stack* thread_jit_stack(void*) { return thread_state.stack; }

}  // namespace

struct Regex::Compiled {
  std::string source;
  std::string where;
  std::unique_ptr<pcre2_code, CodeDeleter> code;
  bool jit = false;
};

namespace {

std::shared_ptr<Regex::Compiled> compile_pcre2(const std::string& source, const std::string& text,
                                               uint32_t options, const std::string& where) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                                   options | PCRE2_UTF, &error, &offset, nullptr);
  if (!code) {
    throw TokenizerError(where + ": the pattern '" + source + "' does not compile: " + pcre2_message(error) +
                         " (at byte " + std::to_string(offset) + ")");
  }
  auto compiled = std::make_shared<Regex::Compiled>();
  compiled->source = source;
  compiled->where = where;
  compiled->code.reset(code);
  compiled->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return compiled;
}

}  // namespace

Regex Regex::compile(const std::string& pattern, const std::string& where) {
  if (utf8::first_invalid(pattern) != std::string::npos) {
    throw TokenizerError(where + ": the pattern is not valid UTF-8");
  }
  return Regex(compile_pcre2(pattern, translate(pattern, where), PCRE2_UCP | PCRE2_MULTILINE | PCRE2_NEVER_BACKSLASH_C,
                             where));
}

namespace {

// Python's syntax as PCRE2 reads it: `{,n}` and `{,}` are `{0,n}` and `{0,}`
// in Python 3 (PCRE2 10.42 reads them as text), `\Z` is PCRE2's `\z`.
std::string translate_python(const std::string& pattern) {
  std::string out;
  out.reserve(pattern.size() + 4);
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      out += c;
      out += pattern[i + 1] == 'Z' && !in_class ? 'z' : pattern[i + 1];
      ++i;
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      out += c;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == '{' && i + 1 < pattern.size() && pattern[i + 1] == ',') {
      std::size_t end = i + 2;
      while (end < pattern.size() && pattern[end] >= '0' && pattern[end] <= '9') ++end;
      if (end < pattern.size() && pattern[end] == '}') {
        out += "{0,";
        out.append(pattern, i + 2, end - i - 2);
        out += '}';
        i = end;
        continue;
      }
    }
    out += c;
  }
  return out;
}

}  // namespace

Regex Regex::python(const std::string& pattern, const std::string& where) {
  if (utf8::first_invalid(pattern) != std::string::npos) {
    throw TokenizerError(where + ": the pattern is not valid UTF-8");
  }
  return Regex(compile_pcre2(pattern, translate_python(pattern),
                             PCRE2_UCP | PCRE2_ANCHORED | PCRE2_ENDANCHORED | PCRE2_NEVER_BACKSLASH_C, where));
}

bool Regex::full_match(std::string_view text) const {
  const Compiled& re = *compiled_;
  // pcre2_jit_match does not check UTF-8 itself.
  if (utf8::first_invalid(text) != std::string_view::npos) {
    throw TokenizerError(re.where + ": " + utf8::quoted_for_message(text) + " is not valid UTF-8");
  }
  pcre2_match_context* context = thread_state.context;
  pcre2_set_match_limit(context, kAttemptLimit);
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const int rc = re.jit ? pcre2_jit_match(re.code.get(), subject, text.size(), 0, 0, thread_state.data, context)
                        : pcre2_match(re.code.get(), subject, text.size(), 0, 0, thread_state.data, context);
  if (rc >= 0) return true;
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  throw TokenizerError(re.where + ": the pattern '" + re.source + "' failed on " + utf8::quoted_for_message(text) +
                       ": " + pcre2_message(rc) +
                       (rc == PCRE2_ERROR_MATCHLIMIT ? " (it backtracks without bound on names this long)" : ""));
}

Regex Regex::literal(const std::string& text, const std::string& where) {
  if (utf8::first_invalid(text) != std::string::npos) {
    throw TokenizerError(where + ": the pattern is not valid UTF-8");
  }
  return Regex(compile_pcre2(text, text, PCRE2_LITERAL, where));
}

const std::string& Regex::source() const { return compiled_->source; }

std::string Regex::replace(std::string_view text, const std::string& content, std::size_t max_bytes,
                           const std::string& where) const {
  std::vector<Span> spans;
  find_matches(text, spans);
  std::size_t size = 0;
  for (const Span& s : spans) size += s.match ? content.size() : s.end - s.start;
  if (size > max_bytes) check_growth(where, text.size(), size);
  std::string out;
  out.reserve(size);
  for (const Span& s : spans) {
    if (s.match) {
      out += content;
    } else {
      out.append(text, s.start, s.end - s.start);
    }
  }
  return out;
}

void Regex::find_matches(std::string_view text, std::vector<Span>& out) const {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  const Compiled& re = *compiled_;
  pcre2_match_data* data = thread_state.data;
  pcre2_match_context* context = thread_state.context;
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const uint64_t budget = 2 * kStepsPerByte * (text.size() + 1);
  uint64_t spent = 0;
  const auto attempt = [&](std::size_t start, uint64_t limit) {
    pcre2_set_match_limit(context, static_cast<uint32_t>(limit));
    spent += limit;
    return re.jit ? pcre2_jit_match(re.code.get(), subject, text.size(), start, PCRE2_NO_UTF_CHECK, data, context)
                  : pcre2_match(re.code.get(), subject, text.size(), start, PCRE2_NO_UTF_CHECK, data, context);
  };
  std::size_t previous = 0;   // the end of the last span written
  std::size_t search = 0;     // where the next search starts
  std::size_t last_match_end = std::string_view::npos;
  while (search <= text.size()) {
    int rc = attempt(search, kFirstTry);
    if (rc == PCRE2_ERROR_MATCHLIMIT && spent < budget) {
      rc = attempt(search, std::min<uint64_t>(kAttemptLimit, budget - spent));
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc == PCRE2_ERROR_MATCHLIMIT && spent >= budget) {
      throw TokenizerError(re.where + ": the pattern '" + re.source + "' needs more than the " +
                           std::to_string(budget) + " steps of matching a text of " + std::to_string(text.size()) +
                           " bytes may take (" + std::to_string(2 * kStepsPerByte) + " a byte)");
    }
    if (rc < 0) {
      throw TokenizerError(re.where + ": the pattern '" + re.source + "' failed on a text of " +
                           std::to_string(text.size()) + " bytes: " + pcre2_message(rc));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    const std::size_t start = ovector[0], end = ovector[1];
    // As the onig crate's find_iter: an empty match right where the last
    // match ended is skipped, and the search moves on one character.
    if (start == end && last_match_end == end) {
      if (search >= text.size()) break;
      search += utf8::char_length(static_cast<unsigned char>(text[search]));
      continue;
    }
    search = end;
    last_match_end = end;
    if (previous != start) out.push_back({previous, start, false});
    out.push_back({start, end, true});
    previous = end;
  }
  if (previous != text.size()) out.push_back({previous, text.size(), false});
}

}  // namespace accel::tokenizers
