#include "engine/data/csv_reader.h"

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string_view>

#include "engine/data/file_text.h"
#include "engine/utf8/utf8.h"

namespace accel::data {
namespace {

bool is_blank(char c, char delimiter) { return (c == ' ' || c == '\t' || c == '\r') && c != delimiter; }

std::string location(const std::string& path, int64_t line) {
  return path + ":" + std::to_string(line) + ": ";
}

// Splits one line into fields: surrounding blanks trimmed, quotes removed
// (a quoted field keeps its delimiters; "" inside quotes stays doubled, as
// only header names need unescaping).
void split(std::string_view line, char delimiter, std::vector<std::string_view>& fields,
           const std::string& path, int64_t line_number) {
  fields.clear();
  size_t pos = 0;
  const size_t n = line.size();
  for (;;) {
    while (pos < n && is_blank(line[pos], delimiter)) ++pos;
    std::string_view field;
    if (pos < n && line[pos] == '"') {
      size_t close = pos + 1;
      for (;; ++close) {
        if (close >= n) {
          throw std::runtime_error(location(path, line_number) + "column " +
                                   std::to_string(fields.size() + 1) + " has an unterminated quote");
        }
        if (line[close] == '"') {
          if (close + 1 < n && line[close + 1] == '"') {
            ++close;
            continue;
          }
          break;
        }
      }
      field = line.substr(pos + 1, close - pos - 1);
      pos = close + 1;
      while (pos < n && is_blank(line[pos], delimiter)) ++pos;
      if (pos < n && line[pos] != delimiter) {
        throw std::runtime_error(location(path, line_number) + "column " +
                                 std::to_string(fields.size() + 1) +
                                 " has text after its closing quote");
      }
    } else {
      size_t end = line.find(delimiter, pos);
      if (end == std::string_view::npos) end = n;
      size_t last = end;
      while (last > pos && is_blank(line[last - 1], delimiter)) --last;
      field = line.substr(pos, last - pos);
      pos = end;
    }
    fields.push_back(field);
    if (pos >= n) return;
    ++pos;  // the delimiter; a line ending in one has an empty last field
  }
}

std::string unescape_quotes(std::string_view field) {
  std::string out;
  out.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    out += field[i];
    if (field[i] == '"' && i + 1 < field.size() && field[i + 1] == '"') ++i;
  }
  return out;
}

bool parse_number(std::string_view field, double& value) {
  if (!field.empty() && field[0] == '+') field.remove_prefix(1);
  if (field.empty()) return false;
  auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), value);
  return error == std::errc() && end == field.data() + field.size();
}

}  // namespace

CsvTable CsvTable::read(const std::string& path, const CsvFormat& format) {
  CsvTable table;
  table.path_ = path;
  table.format_ = format;
  table.text_ = read_file_text(path);
  const std::string& text = table.text_;
  size_t pos = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;  // a UTF-8 byte order mark
  std::vector<std::string_view> fields;
  int64_t line = 0, width_line = 0;
  bool header_pending = format.header;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    ++line;
    size_t stop = end;
    if (stop > pos && text[stop - 1] == '\r') --stop;
    const std::string_view content(text.data() + pos, stop - pos);
    const Row row{pos, stop, line};
    pos = end + 1;
    if (content.find_first_not_of(" \t") == std::string_view::npos) continue;
    split(content, format.delimiter, fields, path, line);
    const auto width = static_cast<int64_t>(fields.size());
    if (header_pending) {
      for (std::string_view name : fields) table.names_.push_back(unescape_quotes(name));
      table.num_columns_ = width;
      width_line = line;
      header_pending = false;
      continue;
    }
    if (width_line == 0) {
      table.num_columns_ = width;
      width_line = line;
    } else if (width != table.num_columns_) {
      throw std::runtime_error(location(path, line) + std::to_string(width) + " columns, but line " +
                               std::to_string(width_line) + " has " +
                               std::to_string(table.num_columns_));
    }
    table.rows_.push_back(row);
  }
  return table;
}

int64_t CsvTable::column_index(const std::string& name) const {
  if (!format_.header) {
    throw std::runtime_error("column '" + name + "' is given by name, but '" + path_ +
                             "' is read without a header (set header = true)");
  }
  std::string known;
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return static_cast<int64_t>(i);
    known += (i ? ", " : "") + names_[i];
  }
  throw std::runtime_error("'" + path_ + "' has no column named '" + name + "' (columns: " + known +
                           ")");
}

at::Tensor CsvTable::columns(const std::vector<int64_t>& columns, at::ScalarType dtype) const {
  for (int64_t c : columns) {
    if (c < 0 || c >= num_columns_) {
      throw std::runtime_error("column " + std::to_string(c + 1) + " does not exist: '" + path_ +
                               "' has " + std::to_string(num_columns_) + " columns");
    }
  }
  const bool integral = at::isIntegralType(dtype, /*includeBool=*/true);
  const auto width = static_cast<int64_t>(columns.size());
  at::Tensor values = at::empty({num_rows(), width}, at::kDouble);
  double* out = values.data_ptr<double>();
  std::vector<std::string_view> fields;
  for (const Row& row : rows_) {
    split(std::string_view(text_.data() + row.begin, row.end - row.begin), format_.delimiter,
          fields, path_, row.line);
    for (int64_t c : columns) {
      const std::string_view field = fields[static_cast<size_t>(c)];
      double value = 0;
      const bool number = parse_number(field, value);
      if (!number || (integral && (!std::isfinite(value) || value != std::trunc(value)))) {
        std::string message = location(path_, row.line) + "column " + std::to_string(c + 1) + " " +
                              utf8::quoted_for_message(field) + " is not " +
                              (number ? "an integer" : "a number");
        if (!names_.empty()) message += " (column " + utf8::quoted_for_message(names_[static_cast<size_t>(c)]) + ")";
        throw std::runtime_error(message);
      }
      *out++ = value;
    }
  }
  return values.to(dtype);
}

}  // namespace accel::data
