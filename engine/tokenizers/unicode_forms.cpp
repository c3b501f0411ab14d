#include "engine/tokenizers/unicode_forms.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uniset.h>

#include <memory>

#include "engine/tokenizers/tokenizer_error.h"

namespace accel::tokenizers {
namespace {

// One filtered normalizer per form, made on first use and kept for the
// process (ICU's instances are immutable and thread-safe).
struct FilteredForms {
  icu::UnicodeSet known;  // the characters Unicode 11.0 assigned
  std::unique_ptr<icu::FilteredNormalizer2> forms[4];

  FilteredForms() {
    UErrorCode status = U_ZERO_ERROR;
    known.applyPattern(icu::UnicodeString(u"[:age=11.0:]"), status);
    if (U_FAILURE(status)) throw TokenizerError(std::string("ICU has no Unicode ages: ") + u_errorName(status));
    known.freeze();
    const icu::Normalizer2* base[4] = {icu::Normalizer2::getNFCInstance(status),
                                        icu::Normalizer2::getNFDInstance(status),
                                        icu::Normalizer2::getNFKCInstance(status),
                                        icu::Normalizer2::getNFKDInstance(status)};
    if (U_FAILURE(status)) throw TokenizerError(std::string("ICU has no normalization data: ") + u_errorName(status));
    for (int i = 0; i < 4; ++i) forms[i] = std::make_unique<icu::FilteredNormalizer2>(*base[i], known);
  }
};

const icu::Normalizer2& form_normalizer(NormalForm form) {
  static const FilteredForms forms;
  return *forms.forms[static_cast<int>(form)];
}

}  // namespace

void normalize_form(std::string& text, NormalForm form) {
  // ASCII is the same in every form.
  bool ascii = true;
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return;
  const icu::Normalizer2& normalizer = form_normalizer(form);
  UErrorCode status = U_ZERO_ERROR;
  if (normalizer.isNormalizedUTF8(text, status) && U_SUCCESS(status)) return;
  status = U_ZERO_ERROR;
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  icu::StringByteSink<std::string> sink(&out);
  normalizer.normalizeUTF8(0, text, sink, nullptr, status);
  if (U_FAILURE(status)) throw TokenizerError(std::string("Unicode normalization failed: ") + u_errorName(status));
  text.swap(out);
}

}  // namespace accel::tokenizers
