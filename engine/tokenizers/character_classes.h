// Character classes and case mapping as the reference (Hugging Face
// `tokenizers`, in Rust) sees them, from ICU's Unicode data. Each predicate
// names the Rust function it stands for, because the same name means
// different sets there: `char::is_whitespace` and Oniguruma's \s are
// Unicode's White_Space; the regex crate's \w is Alphabetic, marks, decimal
// digits, connector punctuation and the joiners; and BERT's punctuation,
// controls and accents come from the unicode_categories crate, whose tables
// are Unicode 8.0's. Those three are ICU's categories as Unicode 8.0
// assigned them (a character added later is unassigned there; the few
// whose category changed since keep their 8.0 one), so a later emoji or
// script is kept by BERT's normalizer exactly as the reference keeps it.
#pragma once
#include <string>

namespace accel::tokenizers {

bool is_white_space(char32_t c);   // char::is_whitespace, Oniguruma's and the regex crate's \s
bool is_numeric(char32_t c);       // char::is_numeric: general category N
bool is_word_char(char32_t c);     // the regex crate's Unicode \w
bool is_bert_punctuation(char32_t c);  // ASCII punctuation, or category P as of Unicode 8.0
bool is_bert_control(char32_t c);      // categories Cc, Cf, Co as of Unicode 8.0 (unicode_categories' is_other)
bool is_bert_nonspacing_mark(char32_t c);  // category Mn as of Unicode 8.0
bool is_combining_mark(char32_t c);        // category M, for the StripAccents normalizer
bool is_cjk_ideograph(char32_t c);  // the CJK blocks BERT's normalizer puts spaces around

// Appends char::to_lowercase(c): the full mapping, one character at a
// time (so Σ is always σ, and İ is i followed by U+0307).
void append_lowercase(std::string& out, char32_t c);

}  // namespace accel::tokenizers
