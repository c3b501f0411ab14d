// Feeds the input to CsvTable::read as a data file (plain, or gzip when it
// starts with gzip's magic bytes), then parses every column, as read_csv
// does. The input's first byte chooses the format: bit 0 a header line,
// bits 1-2 the delimiter (, ; tab |), bit 3 integer columns instead of
// floating point; the rest is the file.
// Finding: anything but a std::runtime_error escaping, a crash, a sanitizer
// report, a hang or a leak; also a table whose tensor does not have its
// rows and columns.
#include <cstdlib>

#include "engine/data/csv_reader.h"
#include "tests/fuzz/scratch_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace accel::data;
  if (size == 0) return 0;
  CsvFormat format;
  format.header = data[0] & 1;
  format.delimiter = ",;\t|"[(data[0] >> 1) & 3];
  const at::ScalarType dtype = data[0] & 8 ? at::kLong : at::kFloat;
  const std::string path = accel::fuzz::write_scratch("data.csv", data + 1, size - 1);
  try {
    const CsvTable table = CsvTable::read(path, format);
    if (!table.names().empty()) table.column_index(table.names().back());
    std::vector<int64_t> columns;
    for (int64_t c = 0; c < table.num_columns(); ++c) columns.push_back(c);
    const at::Tensor values = table.columns(columns, dtype);
    if (values.size(0) != table.num_rows() || values.size(1) != table.num_columns()) std::abort();
  } catch (const std::runtime_error&) {
  }
  return 0;
}
