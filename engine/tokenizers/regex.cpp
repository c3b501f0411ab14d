#include "engine/tokenizers/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/uchar.h>
#include <unicode/uniset.h>

#include <cstdio>
#include <map>
#include <mutex>

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
struct ContextDeleter {
  void operator()(pcre2_match_context* context) const { pcre2_match_context_free(context); }
};

// Each thread matches with its own JIT stack and match data (one pair of
// offsets: only the whole match is read), made on its first match.
struct ThreadMatchState {
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  ~ThreadMatchState() {
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
  std::unique_ptr<pcre2_match_context, ContextDeleter> context;
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
  compiled->context.reset(pcre2_match_context_create(nullptr));
  // Bounds on backtracking (PCRE2's defaults are ten times these): a
  // pattern that needs more on some text fails that text.
  pcre2_set_match_limit(compiled->context.get(), 1000000);
  pcre2_set_depth_limit(compiled->context.get(), 100000);
  pcre2_set_heap_limit(compiled->context.get(), 64 * 1024);  // KiB
  pcre2_jit_stack_assign(compiled->context.get(), thread_jit_stack, nullptr);
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

Regex Regex::literal(const std::string& text, const std::string& where) {
  if (utf8::first_invalid(text) != std::string::npos) {
    throw TokenizerError(where + ": the pattern is not valid UTF-8");
  }
  return Regex(compile_pcre2(text, text, PCRE2_LITERAL, where));
}

const std::string& Regex::source() const { return compiled_->source; }

void Regex::find_matches(std::string_view text, std::vector<Span>& out) const {
  out.clear();
  if (text.empty()) {
    out.push_back({0, 0, false});
    return;
  }
  const Compiled& re = *compiled_;
  pcre2_match_data* data = thread_state.data;
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t previous = 0;   // the end of the last span written
  std::size_t search = 0;     // where the next search starts
  std::size_t last_match_end = std::string_view::npos;
  while (search <= text.size()) {
    const int rc = re.jit ? pcre2_jit_match(re.code.get(), subject, text.size(), search, PCRE2_NO_UTF_CHECK, data,
                                            re.context.get())
                          : pcre2_match(re.code.get(), subject, text.size(), search, PCRE2_NO_UTF_CHECK, data,
                                        re.context.get());
    if (rc == PCRE2_ERROR_NOMATCH) break;
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
