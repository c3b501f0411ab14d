#include "engine/tokenizers/character_classes.h"

#include <unicode/uchar.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include "engine/utf8/utf8.h"

namespace accel::tokenizers {
namespace {

// The general category Unicode `major`.0 gave `c`: ICU's, unless ICU's
// data says it was assigned later (then unassigned), or it is one of the
// few whose category changed since (found by comparing every code point
// with the reference: tests/tokenizers/make_tokenizers.py's sweep).
int8_t category_as_of(char32_t c, uint8_t major) {
  UVersionInfo age;
  u_charAge(static_cast<UChar32>(c), age);
  if (age[0] > major) return U_UNASSIGNED;
  switch (c) {
    case 0x166D:  // CANADIAN SYLLABICS CHI SIGN: Po until 12.0
    case 0x111C9:  // SHARADA SANDHI MARK: Po until 11.0
      return U_OTHER_PUNCTUATION;
    case 0x1734:  // HANUNOO SIGN PAMUDPOD: Mn until 14.0
      return U_NON_SPACING_MARK;
    case 0x1885:  // MONGOLIAN LETTER ALI GALI BALUDA and THREE BALUDA: Lo until 9.0
    case 0x1886:
      if (major < 9) return U_OTHER_LETTER;
      break;
    case 0x1CF2:  // VEDIC SIGN ARDHAVISARGA and ROTATED ARDHAVISARGA: Mc until 10.0
    case 0x1CF3:
      if (major < 10) return U_COMBINING_SPACING_MARK;
      break;
    case 0xA9BD:  // JAVANESE CONSONANT SIGN KERET: Mc until 12.0
      return U_COMBINING_SPACING_MARK;
    default:
      break;
  }
  return u_charType(static_cast<UChar32>(c));
}

bool is_punctuation_category(int8_t category) {
  switch (category) {
    case U_CONNECTOR_PUNCTUATION:
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool is_white_space(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= '\t' && c <= '\r');
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE);
}

bool is_numeric(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
  const int8_t category = u_charType(static_cast<UChar32>(c));
  return category == U_DECIMAL_DIGIT_NUMBER || category == U_LETTER_NUMBER || category == U_OTHER_NUMBER;
}

bool is_word_char(char32_t c) {
  if (c < 0x80) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }
  const auto u = static_cast<UChar32>(c);
  const int8_t category = u_charType(u);
  return u_hasBinaryProperty(u, UCHAR_ALPHABETIC) || category == U_NON_SPACING_MARK ||
         category == U_COMBINING_SPACING_MARK || category == U_ENCLOSING_MARK ||
         category == U_DECIMAL_DIGIT_NUMBER || category == U_CONNECTOR_PUNCTUATION ||
         u_hasBinaryProperty(u, UCHAR_JOIN_CONTROL);
}

bool is_bert_punctuation(char32_t c) {
  if (c < 0x80) return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
  return is_punctuation_category(category_as_of(c, 8));
}

bool is_bert_control(char32_t c) {
  const int8_t category = category_as_of(c, 8);
  return category == U_CONTROL_CHAR || category == U_FORMAT_CHAR || category == U_PRIVATE_USE_CHAR;
}

bool is_bert_nonspacing_mark(char32_t c) {
  return c >= 0x300 && category_as_of(c, 8) == U_NON_SPACING_MARK;
}

bool is_combining_mark(char32_t c) {
  if (c < 0x300) return false;
  const int8_t category = category_as_of(c, 9);
  return category == U_NON_SPACING_MARK || category == U_COMBINING_SPACING_MARK || category == U_ENCLOSING_MARK;
}

bool is_cjk_ideograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void append_lowercase(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
    return;
  }
  // One character alone: u_strToLower's only contextual rule for the root
  // locale (a final sigma) never applies, as in Rust's char::to_lowercase.
  UChar in[2];
  int32_t in_length = 0;
  U16_APPEND_UNSAFE(in, in_length, static_cast<UChar32>(c));
  UChar lowered[8];
  UErrorCode status = U_ZERO_ERROR;
  const int32_t n = u_strToLower(lowered, 8, in, in_length, "", &status);
  if (U_FAILURE(status) || n > 8) {
    utf8::append(out, c);
    return;
  }
  for (int32_t i = 0; i < n;) {
    UChar32 lc;
    U16_NEXT_UNSAFE(lowered, i, lc);
    utf8::append(out, static_cast<char32_t>(lc));
  }
}

}  // namespace accel::tokenizers
