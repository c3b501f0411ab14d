// Numeric CSV files (plain or gzip) as tensors. The file is read once and
// indexed by line; columns are parsed on request, so a text column that is
// never asked for is never parsed. A field that is not a number is an error
// naming the file, line and column: "digits.csv:12: column 3 'abc' is not a
// number". Line and column numbers are 1-based, as a text editor shows them.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace accel::data {

struct CsvFormat {
  bool header = false;   // the first non-empty line names the columns
  char delimiter = ',';
};

class CsvTable {
 public:
  // Reads `path` and checks that every data line has as many fields as the
  // first one. Blank lines are skipped; fields may be quoted ("1.5").
  static CsvTable read(const std::string& path, const CsvFormat& format = {});

  int64_t num_rows() const { return static_cast<int64_t>(rows_.size()); }
  int64_t num_columns() const { return num_columns_; }
  const std::string& path() const { return path_; }
  // Column names from the header; empty without one.
  const std::vector<std::string>& names() const { return names_; }

  // The 0-based index of the column named `name`; the error lists the names.
  int64_t column_index(const std::string& name) const;

  // Columns (0-based) of every row as a [rows, columns.size()] tensor of
  // `dtype`. For an integral dtype a field must hold an integer.
  at::Tensor columns(const std::vector<int64_t>& columns, at::ScalarType dtype) const;

 private:
  struct Row {
    size_t begin, end;  // byte range of the line in text_, without its newline
    int64_t line;       // 1-based line number in the file
  };

  std::string path_;
  CsvFormat format_;
  std::string text_;
  std::vector<Row> rows_;
  std::vector<std::string> names_;
  int64_t num_columns_ = 0;
};

}  // namespace accel::data
