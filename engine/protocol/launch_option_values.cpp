#include "engine/protocol/launch_option_values.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>
#include <sstream>
#include <vector>

#include "engine/protocol/near_miss.h"

namespace accel::options {
namespace {

// The words of a space-separated list (a row's choices).
std::vector<std::string> words_of(const char* list) {
  std::istringstream words(list);
  std::vector<std::string> out;
  for (std::string word; words >> word;) out.push_back(word);
  return out;
}

}  // namespace

std::string quoted(const std::string& text) {
  constexpr size_t kShown = 80;
  if (text.size() <= kShown) return "'" + text + "'";
  return "'" + text.substr(0, kShown) + "...' (" + std::to_string(text.size()) + " bytes)";
}

bool contains_word(const char* list, const std::string& word) {
  std::vector<std::string> words = words_of(list);
  return std::find(words.begin(), words.end(), word) != words.end();
}

namespace {

// The row's choices as messages list them: "no, bf16, fp16", or with their
// numbers, "FULL_SHARD (1), SHARD_GRAD_OP (2), NO_SHARD (3)".
std::string choices_list(const OptionRow& row) {
  std::vector<std::string> words = words_of(row.choices);
  std::string list;
  for (size_t i = 0; i < words.size(); ++i) {
    list += (i ? ", " : "") + words[i];
    if (row.kind == ValueKind::numbered) list += " (" + std::to_string(i + 1) + ")";
  }
  return list;
}

// What a row accepts, as messages say it: "an integer from 1 to 4096".
std::string expectation(const OptionRow& row) {
  switch (row.kind) {
    case ValueKind::none:
    case ValueKind::boolean: return "true or false";
    case ValueKind::integer:
      return "an integer from " + number_text(row.min) + " to " + number_text(row.max);
    case ValueKind::seconds:
      return "a number of seconds from " + number_text(row.min) + " to " + number_text(row.max);
    case ValueKind::text:
    case ValueKind::numbered: return row.choices ? "one of " + choices_list(row) : "a text";
    case ValueKind::names: return "names separated by commas (Block,Attention)";
  }
  return "a value";
}

// Whether a quoted YAML string can be the row's value: a quoted number or
// switch is a string in YAML, whatever it looks like.
bool takes_text(ValueKind kind) {
  return kind == ValueKind::text || kind == ValueKind::numbered || kind == ValueKind::names;
}

// YAML 1.1's words for true and false, as yaml-cpp reads them.
std::optional<bool> yaml_bool(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* word : {"true", "yes", "on", "y"}) {
    if (lower == word) return true;
  }
  for (const char* word : {"false", "no", "off", "n"}) {
    if (lower == word) return false;
  }
  return std::nullopt;
}

// "Block, Attention" as "Block,Attention"; nothing when a name is empty.
std::optional<std::string> name_list(const std::string& text) {
  std::istringstream parts(text + ",");  // getline drops a last empty part
  std::string list;
  for (std::string name; std::getline(parts, name, ',');) {
    size_t first = name.find_first_not_of(" \t");
    if (first == std::string::npos) return std::nullopt;
    name = name.substr(first, name.find_last_not_of(" \t") - first + 1);
    list += (list.empty() ? "" : ",") + name;
  }
  return list;
}

// Converts `text` for `row`, or returns nothing when it is not acceptable.
// The value's text is the normal spelling: "true", "2", the choice's name.
std::optional<Value> convert(const OptionRow& row, const std::string& text) {
  Value value;
  value.text = text;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  auto whole_integer = [&] {
    auto [stop, error] = std::from_chars(begin, end, value.integer);
    return !text.empty() && error == std::errc() && stop == end;
  };
  switch (row.kind) {
    case ValueKind::none:
    case ValueKind::boolean: {
      auto flag = yaml_bool(text);
      if (!flag) return std::nullopt;
      value.integer = *flag ? 1 : 0;
      value.text = *flag ? "true" : "false";
      break;
    }
    case ValueKind::integer:
      if (!whole_integer() || value.integer < row.min || value.integer > row.max) return std::nullopt;
      value.text = std::to_string(value.integer);
      break;
    case ValueKind::seconds: {
      auto [stop, error] = std::from_chars(begin, end, value.number);
      // The negated test also rejects NaN.
      if (text.empty() || error != std::errc() || stop != end ||
          !(value.number >= row.min && value.number <= row.max)) {
        return std::nullopt;
      }
      break;
    }
    case ValueKind::numbered: {
      auto words = words_of(row.choices);
      if (whole_integer() && value.integer >= 1 && value.integer <= static_cast<long long>(words.size())) {
        value.text = words[static_cast<size_t>(value.integer - 1)];
      } else if (!contains_word(row.choices, text)) {
        return std::nullopt;
      }
      break;
    }
    case ValueKind::text:
      if (row.choices ? !contains_word(row.choices, text) : text.empty()) return std::nullopt;
      break;
    case ValueKind::names: {
      auto list = name_list(text);
      if (!list) return std::nullopt;
      value.text = *list;
      break;
    }
  }
  return value;
}

}  // namespace

Value convert_argument(const OptionRow& row, const std::string& text) {
  if (auto value = convert(row, text)) return *value;
  if (row.choices) {
    throw LaunchOptionsError("unsupported " + std::string(row.name) + " " + quoted(text) +
                             " (supported: " + choices_list(row) + ")" +
                             did_you_mean(text, words_of(row.choices)));
  }
  throw LaunchOptionsError(std::string(row.name) + " expects " + expectation(row) + ", got " + quoted(text));
}

Value convert_entry(const OptionRow& row, const ConfigEntry& entry, const std::string& path) {
  std::string where = path + ":" + std::to_string(entry.line) + ": key '" + entry.key + "' ";
  auto refuse = [&](const std::string& got) {
    std::string hint = row.choices ? did_you_mean(entry.text, words_of(row.choices)) : "";
    return ConfigError(where + "expects " + expectation(row) + ", got " + got + hint);
  };
  switch (entry.shape) {
    case ConfigEntry::Shape::empty: throw ConfigError(where + "has no value; it expects " + expectation(row));
    case ConfigEntry::Shape::compound:
    case ConfigEntry::Shape::mapping: throw refuse(entry.text);  // "a list", "a mapping"
    case ConfigEntry::Shape::quoted:
      if (!takes_text(row.kind)) {
        throw refuse("the string " + quoted(entry.text) + " (write it without quotes)");
      }
      break;
    case ConfigEntry::Shape::plain: break;
  }
  if (auto value = convert(row, entry.text)) return *value;
  throw refuse(quoted(entry.text));
}

// The value of a switch given: on the command line, or picked by the file's distributed_type.
Value switched_on() {
  Value value;
  value.text = "true";
  value.integer = 1;
  return value;
}

}  // namespace accel::options
