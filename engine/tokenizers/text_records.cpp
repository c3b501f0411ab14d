#include "engine/tokenizers/text_records.h"

#include <algorithm>

#include "engine/json/json_error.h"
#include "engine/json/json_reader.h"
#include "engine/files/outside_file.h"
#include "engine/tokenizers/tokenizer.h"
#include "engine/tokenizers/tokenizer_error.h"

namespace accel::tokenizers {
namespace {

// One record's line may be this long; a longer one is refused.
constexpr uint64_t kMaxLineBytes = uint64_t{64} << 20;
// The records are held in memory whole; a larger file is refused before it is read.
constexpr uint64_t kMaxFileBytes = uint64_t{8} << 30;

}  // namespace

std::vector<std::string> read_text_records(const std::string& path, RecordFormat format, const std::string& key) {
  const std::string text = read_outside_file(path, kMaxFileBytes);
  std::vector<std::string> records;
  std::size_t next = 0;
  for (std::size_t number = 1; next < text.size(); ++number) {
    const std::size_t end = std::min(text.find('\n', next), text.size());
    std::string line = text.substr(next, end - next);
    next = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = "'" + path + "' line " + std::to_string(number);
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (line.size() > kMaxLineBytes) throw TokenizerError(where + " is longer than " + std::to_string(kMaxLineBytes) + " bytes");
    if (format == RecordFormat::Text) {
      check_utf8(line, where);
      records.push_back(std::move(line));
      continue;
    }
    nlohmann::json record;
    try {
      record = strict_json::parse_json(line, path, kMaxLineBytes);
    } catch (const strict_json::JsonError& e) {
      throw TokenizerError(where + " " + e.problem());  // "'<path>' line N is not valid JSON: ..."
    }
    const auto it = record.find(key);
    if (it == record.end()) throw TokenizerError(where + " has no \"" + key + "\"");
    if (!it->is_string()) throw TokenizerError(where + ": \"" + key + "\" is not a string");
    records.push_back(it->get<std::string>());
  }
  return records;
}

}  // namespace accel::tokenizers
