// The one JSON reader (engine/json/): strict RFC 8259 with the bounds every
// file of outside JSON gets (size, depth, no key twice), typed reads whose
// errors name the file and the field, and JsonNode's located values (null
// and absent alike, as Hugging Face's readers take them).
#include <catch2/catch.hpp>
#include <string>

#include "engine/json/json_error.h"
#include "engine/json/json_node.h"
#include "engine/json/json_reader.h"

using namespace accel::strict_json;
using Catch::Contains;

TEST_CASE("the reader takes one strict JSON object and names the source when it refuses") {
  CHECK(parse_json(R"({"a": [1, 2.5, "x", null, true]})", "f.json", 1000)["a"][1] == 2.5);
  CHECK_THROWS_WITH(parse_json("[1]", "f.json", 1000), "'f.json' is not a JSON object");
  CHECK_THROWS_WITH(parse_json(R"({"a": 1,})", "f.json", 1000), Contains("'f.json' is not valid JSON: "));
  CHECK_THROWS_WITH(parse_json("{\"a\": 1} // no comments", "f.json", 1000), Contains("is not valid JSON"));
  CHECK_THROWS_WITH(parse_json(R"({"a": 1, "a": 2})", "f.json", 1000),
                    "'f.json' has the key 'a' twice in one object");
  CHECK_THROWS_WITH(parse_json(R"({"a": 1})", "f.json", 3), "'f.json' has 8 bytes of JSON, more than the 3 such a file may have");
  const std::string deep = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  CHECK_THROWS_WITH(parse_json("{\"a\": " + deep + "}", "f.json", 1000), Contains("nests objects and lists more than 16 deep"));
  CHECK_THROWS_WITH(parse_json("{\"a\": \"\xff\"}", "f.json", 1000), Contains("is not valid JSON") && Contains("\\xff"));
  CHECK_THROWS_WITH(parse_json(R"({"a": 1e999})", "f.json", 1000), Contains("number overflow parsing '1e999'"));
}

TEST_CASE("a JSON error keeps the problem apart from the source") {
  try {
    parse_json("nope", "x.jsonl line 3", 1000);
    FAIL("no error");
  } catch (const JsonError& e) {
    CHECK(std::string(e.what()).rfind("'x.jsonl line 3' is not valid JSON: ", 0) == 0);
    CHECK(e.problem().rfind("is not valid JSON: ", 0) == 0);
  }
}

TEST_CASE("typed reads name the field and what it holds") {
  const nlohmann::json v = parse_json(R"({"s": "x", "n": -3, "u": 7, "b": true, "f": 0.5})", "f.json", 1000);
  CHECK(json_string(json_member(v, "s", "'f.json'"), "'f.json': s") == "x");
  CHECK(json_integer(v["n"], "n") == -3);
  CHECK(json_unsigned(v["u"], "u") == 7);
  CHECK(json_boolean(v["b"], "b"));
  CHECK(json_number(v["f"], "f") == 0.5);
  CHECK_THROWS_WITH(json_member(v, "missing", "'f.json'"), "'f.json' has no 'missing'");
  CHECK_THROWS_WITH(json_unsigned(v["n"], "'f.json': n"), "'f.json': n is a negative integer, expected a non-negative integer");
  CHECK_THROWS_WITH(json_string(v["f"], "'f.json': f"), "'f.json': f is a number with a fraction, expected a string");
  CHECK(json_utf8("ok", "a name") == "ok");
  CHECK_THROWS_WITH(json_utf8("\xc0\xaf", "the name"), "the name is not valid UTF-8, which JSON files cannot hold");
}

TEST_CASE("a JsonNode reads null as absent and names its path") {
  const nlohmann::json v = parse_json(R"({"model": {"merges": [["a", "b"], 3], "dropout": null}})", "tok.json", 1000);
  const JsonNode root(v, "tok.json", "");
  const JsonNode model = root.at("model");
  CHECK_FALSE(model.has("dropout"));
  CHECK_THROWS_WITH(model.at("dropout"), "'tok.json': model has no 'dropout'");
  CHECK(model.at("merges").size() == 2);
  CHECK(model.at("merges").item(0).item(1).string() == "b");
  CHECK_THROWS_WITH(model.at("merges").item(1).string(), "'tok.json': model.merges[1] is a non-negative integer, expected a string");
  CHECK_THROWS_WITH(model.at("merges").item(1).unsigned_integer(2),
                    "'tok.json': model.merges[1] is 3, more than the largest allowed, 2");
  CHECK(model.string_or("unk", "[UNK]") == "[UNK]");
  CHECK_THROWS_AS(root.at("model").at("merges").boolean(), JsonError);
}
