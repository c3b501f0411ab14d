// Unicode normalization forms (NFC, NFD, NFKC, NFKD) of UTF-8 text, by
// ICU. The reference normalizes with the unicode-normalization-alignments
// crate, whose tables are Unicode 11.0's: characters assigned after it are
// left as they are (ICU's FilteredNormalizer2 over the characters of 11.0),
// as they are there, so a newer character never decomposes here alone.
#pragma once
#include <string>

namespace accel::tokenizers {

enum class NormalForm { NFC, NFD, NFKC, NFKD };

// `text` (valid UTF-8) in `form`, in place.
void normalize_form(std::string& text, NormalForm form);

}  // namespace accel::tokenizers
