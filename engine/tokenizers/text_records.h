// The texts of a fine-tuning data file, one per record, for the tokenized
// data sets: every line of a text file that is not empty, or the string
// under `key` in every line of a JSON Lines file (blank lines skipped).
// Errors name the file and the line (1-based): a line that is not a JSON
// object, one without the key, a value that is not a string, text that
// is not UTF-8.
#pragma once
#include <string>
#include <vector>

namespace accel::tokenizers {

enum class RecordFormat { Text, JsonLines };

std::vector<std::string> read_text_records(const std::string& path, RecordFormat format, const std::string& key);

}  // namespace accel::tokenizers
