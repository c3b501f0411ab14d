// Fine-tuning rows from examples already tokenized (lua/accel/tokenizers/
// tokenized_dataset.lua makes them: ids and labels, -100 where the loss
// skips a token), laid out rows x columns, row-major, for int64 tensors:
//  - pad_examples: one example a row, cut to max_length, padded to the
//    longest row (pad id, mask 0, label -100) on the right or the left;
//  - pack_examples: several examples a row of max_length, each with its
//    positions from 0, which the models read as document boundaries, and
//    -100 on the label of each one's first token (TRL's padding-free
//    collator sets it): BestFitDecreasing (TRL's "bfd": examples whole, cut
//    to max_length keeping their start, longest first into the row whose
//    free space is the smallest that holds it, the first to reach that
//    space among equals; rows padded with one-token documents of position 0,
//    mask 0, label -100) or Wrapped (every example one after another, cut
//    into rows of exactly max_length, the rest dropped, as transformers'
//    run_clm; an example cut by a row's end continues at position 0).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace accel::tokenizers {

struct TrainingExample {
  std::vector<int64_t> ids;
  std::vector<int64_t> labels;  // as many as ids
};

struct TrainingRows {
  std::size_t rows = 0;
  std::size_t columns = 0;
  std::vector<int64_t> input_ids, attention_mask, labels;
  std::vector<int64_t> position_ids;  // packed rows only
};

enum class PackingStrategy { BestFitDecreasing, Wrapped };

TrainingRows pad_examples(const std::vector<TrainingExample>& examples, std::size_t max_length, int64_t pad_id,
                          bool left);

// No row (fewer tokens than one wrapped row): rows == 0.
TrainingRows pack_examples(const std::vector<TrainingExample>& examples, std::size_t max_length,
                           PackingStrategy strategy, int64_t pad_id);

}  // namespace accel::tokenizers
