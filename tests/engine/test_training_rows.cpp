// engine/tokenizers/training_rows.h: best-fit decreasing packs as TRL's
// pack_dataset(strategy="bfd") does on its documented example (rows
// [1 2 3 4], [8 9 10 11], [6 7]: the longest first, truncated to the row,
// each into the tightest row), with positions from 0 per document, the
// first label of each -100 and padding as masked one-token documents;
// wrapped packing cuts full rows, an example continuing at position 0, the
// rest dropped; padding pads on either side.
#include <catch2/catch.hpp>
#include <vector>

#include "engine/tokenizers/training_rows.h"

namespace tk = accel::tokenizers;
using Ids = std::vector<int64_t>;

namespace {

std::vector<tk::TrainingExample> trl_example() {
  std::vector<tk::TrainingExample> out;
  for (const Ids& ids : {Ids{1, 2, 3, 4, 5}, Ids{6, 7}, Ids{8, 9, 10}, Ids{11}}) {
    Ids labels = ids;
    for (int64_t& l : labels) l += 100;
    out.push_back({ids, labels});
  }
  return out;
}

}  // namespace

TEST_CASE("best-fit decreasing packs as TRL's bfd") {
  const tk::TrainingRows r = tk::pack_examples(trl_example(), 4, tk::PackingStrategy::BestFitDecreasing, 0);
  REQUIRE(r.rows == 3);
  REQUIRE(r.columns == 4);
  CHECK(r.input_ids == Ids{1, 2, 3, 4, 8, 9, 10, 11, 6, 7, 0, 0});
  CHECK(r.position_ids == Ids{0, 1, 2, 3, 0, 1, 2, 0, 0, 1, 0, 0});
  CHECK(r.labels == Ids{-100, 102, 103, 104, -100, 109, 110, -100, -100, 107, -100, -100});
  CHECK(r.attention_mask == Ids{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
}

TEST_CASE("wrapped packing cuts full rows and drops the rest") {
  const tk::TrainingRows r = tk::pack_examples(trl_example(), 4, tk::PackingStrategy::Wrapped, 0);
  REQUIRE(r.rows == 2);
  CHECK(r.input_ids == Ids{1, 2, 3, 4, 5, 6, 7, 8});
  CHECK(r.position_ids == Ids{0, 1, 2, 3, 0, 0, 1, 0});
  CHECK(r.labels == Ids{-100, 102, 103, 104, -100, -100, 107, -100});
  CHECK(tk::pack_examples({{Ids{1}, Ids{1}}}, 4, tk::PackingStrategy::Wrapped, 0).rows == 0);
}

TEST_CASE("padding to the longest row, on either side, cut to max_length") {
  const tk::TrainingRows right = tk::pad_examples(trl_example(), 3, 9, false);
  REQUIRE(right.rows == 4);
  REQUIRE(right.columns == 3);
  CHECK(right.input_ids == Ids{1, 2, 3, 6, 7, 9, 8, 9, 10, 11, 9, 9});
  CHECK(right.labels == Ids{101, 102, 103, 106, 107, -100, 108, 109, 110, 111, -100, -100});
  const tk::TrainingRows left = tk::pad_examples(trl_example(), 3, 9, true);
  CHECK(left.input_ids == Ids{1, 2, 3, 9, 6, 7, 8, 9, 10, 9, 9, 11});
  CHECK(left.attention_mask == Ids{1, 1, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1});
}
