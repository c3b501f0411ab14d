#include "engine/tokenizers/training_rows.h"

#include <algorithm>
#include <deque>
#include <map>
#include <numeric>

namespace accel::tokenizers {
namespace {

constexpr int64_t kIgnored = -100;

// Appends ids[from, to) of one document to the flat rows: positions from 0,
// the first label ignored.
void add_document(TrainingRows& out, const TrainingExample& e, std::size_t from, std::size_t to) {
  for (std::size_t j = from; j < to; ++j) {
    const auto position = static_cast<int64_t>(j - from);
    out.input_ids.push_back(e.ids[j]);
    out.attention_mask.push_back(1);
    out.position_ids.push_back(position);
    out.labels.push_back(position == 0 ? kIgnored : e.labels[j]);
  }
}

// Pads the last row to `columns` with one-token documents the mask hides.
void finish_row(TrainingRows& out, int64_t pad_id) {
  while (out.input_ids.size() < (out.rows + 1) * out.columns) {
    out.input_ids.push_back(pad_id);
    out.attention_mask.push_back(0);
    out.position_ids.push_back(0);
    out.labels.push_back(kIgnored);
  }
  ++out.rows;
}

// Each row's examples, in the order they went in.
std::vector<std::vector<std::size_t>> best_fit_decreasing(const std::vector<TrainingExample>& examples,
                                                          std::size_t max_length) {
  std::vector<std::size_t> order(examples.size());
  std::iota(order.begin(), order.end(), 0);
  const auto length = [&](std::size_t i) { return std::min(examples[i].ids.size(), max_length); };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return length(a) > length(b); });
  std::vector<std::vector<std::size_t>> bins;
  std::vector<std::size_t> space;              // free tokens of each row
  std::map<std::size_t, std::deque<std::size_t>> by_space;  // free tokens -> rows, first come first
  for (std::size_t i : order) {
    const std::size_t n = length(i);
    std::size_t bin;
    auto fit = by_space.lower_bound(n);
    if (fit != by_space.end()) {
      bin = fit->second.front();
      fit->second.pop_front();
      if (fit->second.empty()) by_space.erase(fit);
    } else {
      bin = bins.size();
      bins.emplace_back();
      space.push_back(max_length);
    }
    bins[bin].push_back(i);
    space[bin] -= n;
    if (space[bin] > 0) by_space[space[bin]].push_back(bin);
  }
  return bins;
}

}  // namespace

TrainingRows pad_examples(const std::vector<TrainingExample>& examples, std::size_t max_length, int64_t pad_id,
                          bool left) {
  TrainingRows out;
  for (const TrainingExample& e : examples) out.columns = std::max(out.columns, std::min(e.ids.size(), max_length));
  out.rows = examples.size();
  for (const TrainingExample& e : examples) {
    const std::size_t n = std::min(e.ids.size(), max_length), padding = out.columns - n;
    const auto pad = [&] {
      for (std::size_t j = 0; j < padding; ++j) {
        out.input_ids.push_back(pad_id);
        out.attention_mask.push_back(0);
        out.labels.push_back(kIgnored);
      }
    };
    if (left) pad();
    out.input_ids.insert(out.input_ids.end(), e.ids.begin(), e.ids.begin() + static_cast<std::ptrdiff_t>(n));
    out.labels.insert(out.labels.end(), e.labels.begin(), e.labels.begin() + static_cast<std::ptrdiff_t>(n));
    out.attention_mask.insert(out.attention_mask.end(), n, 1);
    if (!left) pad();
  }
  return out;
}

TrainingRows pack_examples(const std::vector<TrainingExample>& examples, std::size_t max_length,
                           PackingStrategy strategy, int64_t pad_id) {
  TrainingRows out;
  out.columns = max_length;
  if (strategy == PackingStrategy::BestFitDecreasing) {
    for (const std::vector<std::size_t>& members : best_fit_decreasing(examples, max_length)) {
      for (std::size_t i : members) add_document(out, examples[i], 0, std::min(examples[i].ids.size(), max_length));
      finish_row(out, pad_id);
    }
    return out;
  }
  for (const TrainingExample& e : examples) {
    std::size_t from = 0;
    while (from < e.ids.size()) {
      const std::size_t room = (out.rows + 1) * max_length - out.input_ids.size();
      const std::size_t to = std::min(e.ids.size(), from + room);
      add_document(out, e, from, to);
      from = to;
      if (out.input_ids.size() == (out.rows + 1) * max_length) ++out.rows;
    }
  }
  const std::size_t kept = out.rows * max_length;  // the rest, short of a row, dropped
  for (auto* v : {&out.input_ids, &out.attention_mask, &out.labels, &out.position_ids}) v->resize(kept);
  return out;
}

}  // namespace accel::tokenizers
