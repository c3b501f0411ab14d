// The one UTF-8 module (engine/utf8/): the RFC 3629 check, code points in
// and out, the lossy decoding of the tokenizers' decoders, and text quoted
// for messages.
#include <catch2/catch.hpp>
#include <string>

#include "engine/utf8/utf8.h"

using namespace accel;

TEST_CASE("UTF-8 checks follow RFC 3629") {
  CHECK(utf8::valid("loss/\xce\xb1"));
  CHECK_FALSE(utf8::valid("\xc0\xaf"));          // overlong
  CHECK_FALSE(utf8::valid("\xed\xa0\x80"));      // a surrogate
  CHECK_FALSE(utf8::valid("\xf4\x90\x80\x80"));  // past U+10FFFF
  CHECK_FALSE(utf8::valid("\xe2\x82"));          // cut short
}

TEST_CASE("lossy UTF-8 replaces each maximal bad subsequence once") {
  CHECK(utf8::lossy("a\xE2\x82") == "a\uFFFD");
  CHECK(utf8::lossy("\xF0\x90\x80\x41") == "\uFFFDA");
  CHECK(utf8::lossy("\xC0\xAF") == "\uFFFD\uFFFD");
  CHECK(utf8::lossy("\xED\xA0\x80") == "\uFFFD\uFFFD\uFFFD");
  CHECK(utf8::lossy("ok \xE6\x9D\xB1") == "ok \u6771");
  CHECK(utf8::first_invalid("ab\xFF") == 2);
}

TEST_CASE("sequence lengths and code points agree on every width") {
  for (const char32_t c : {U'a', U'\u00e9', U'\u6771', U'\U0001F600', U'\U0010FFFF'}) {
    std::string text;
    utf8::append(text, c);
    REQUIRE(utf8::sequence_length(text, 0) == text.size());
    CHECK(utf8::char_length(static_cast<unsigned char>(text[0])) == text.size());
    std::size_t i = 0;
    CHECK(utf8::next_code_point(text, i) == c);
    CHECK(i == text.size());
    for (std::size_t k = 1; k < text.size(); ++k) CHECK(utf8::is_continuation(text, k));
  }
  CHECK(utf8::sequence_length("\x80", 0) == 0);      // a lone continuation byte
  CHECK(utf8::sequence_length("\xe6\x9d", 0) == 0);  // cut short
}

TEST_CASE("text quoted for a message shows control and bad bytes as \\xNN, cut at a character") {
  CHECK(utf8::escape_invalid("a\xff" "b\n") == "a\\xffb\n");
  CHECK(utf8::quoted_for_message(std::string("x\0y", 3)) == "'x\\x00y'");
  CHECK(utf8::quoted_for_message("\xe6\x9d\xb1\xe6\x9d\xb1", 4) == "'\xe6\x9d\xb1\xe6\x9d\xb1'");
  CHECK(utf8::quoted_for_message(std::string(100, 'a'), 3) == "'aaa'... (100 bytes)");
}
