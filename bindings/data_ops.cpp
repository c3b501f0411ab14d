// accel.core.data: the engine's data code as Lua values, for the Lua half
// in lua/accel/data/: epoch plans (which rows each rank reads), background
// batch gathering, CSV parsing, and text vocabularies. Row indices here are
// the engine's own (0-based) and never reach recipes; batch numbers and
// token ids are 1-based, as everywhere in the Lua API.
#include <memory>

#include "bindings/op_tables.h"
#include "engine/data/batch_prefetcher.h"
#include "engine/data/csv_reader.h"
#include "engine/data/epoch_plan.h"
#include "engine/data/file_text.h"
#include "engine/data/shuffled_order.h"
#include "engine/data/vocabulary.h"

namespace accel::lua {
namespace {

using data::BatchPrefetcher;
using data::EpochPlan;
using data::Vocabulary;

std::vector<Binding> epoch_plan_methods();
std::vector<Binding> prefetcher_methods();
std::vector<Binding> vocabulary_methods();

const HandleType kEpochPlan{"accel.data.EpochPlan", "accel.data.EpochPlan:", epoch_plan_methods};
const HandleType kPrefetcher{"accel.data.BatchPrefetcher", "accel.data.BatchPrefetcher:",
                             prefetcher_methods};
const HandleType kVocabulary{"accel.data.Vocabulary", "accel.data.Vocabulary:", vocabulary_methods};

// ---- epoch plans ---------------------------------------------------------

EpochPlan& plan_at(lua_State* L) { return check_handle<EpochPlan>(L, 1, kEpochPlan); }

std::vector<Binding> epoch_plan_methods() {
  return {
      // This rank's batches, or `rank`'s (0-based) when given.
      bind("num_batches", [](lua_State* L, Receiver, c10::optional<int64_t> rank) {
        const EpochPlan& plan = plan_at(L);
        const int64_t r = rank.value_or(plan.layout().rank);
        TORCH_CHECK(r >= 0 && r < plan.layout().world_size, "rank ", r, " is not in [0, ",
                    plan.layout().world_size - 1, "]");
        return plan.num_batches(r);
      }),
      // indices([first_batch]): this rank's rows from batch first_batch (1-based) on.
      bind("indices", [](lua_State* L, Receiver, c10::optional<Position> first_batch) {
        return plan_at(L).indices(first_batch ? first_batch->value : 0);
      }),
      // padding(k): rows of padding at the tail of every rank's batch k (1-based), by rank.
      bind("padding", [](lua_State* L, Receiver, Position batch) {
        return plan_at(L).padding(batch.value);
      }),
      bind("position_after", [](lua_State* L, Receiver, int64_t batches) {
        return plan_at(L).position_after(batches);
      }),
  };
}

// EpochPlan{dataset_size, world_size, rank, batch_size, shuffle, seed,
//           drop_last, even_batches, epoch, start}
Pushed make_epoch_plan(lua_State* L, Options o) {
  data::ShardLayout layout;
  layout.dataset_size = option_integer(L, o, "dataset_size", 0);
  layout.world_size = option_integer(L, o, "world_size", 1);
  layout.rank = option_integer(L, o, "rank", 0);
  layout.batch_size = option_integer(L, o, "batch_size", 1);
  layout.shuffle = option_boolean(L, o, "shuffle", false);
  layout.seed = option_integer(L, o, "seed", 0);
  layout.drop_last = option_boolean(L, o, "drop_last", false);
  layout.even_batches = option_boolean(L, o, "even_batches", true);
  EpochPlan plan(layout, option_integer(L, o, "epoch", 0), option_integer(L, o, "start", 0));
  push_handle(L, kEpochPlan, std::move(plan));
  return Pushed{1};
}

// ---- background batch gathering -------------------------------------------

using PrefetcherPtr = std::unique_ptr<BatchPrefetcher>;

BatchPrefetcher& prefetcher_at(lua_State* L) {
  PrefetcherPtr& p = check_handle<PrefetcherPtr>(L, 1, kPrefetcher);
  TORCH_CHECK(p, "the batch prefetcher is closed");
  return *p;
}

std::vector<Binding> prefetcher_methods() {
  return {
      // The next batch as a table of tensors, or nil after the last.
      bind("next", [](lua_State* L, Receiver) {
        std::vector<at::Tensor> batch;
        if (!prefetcher_at(L).next(batch)) {
          lua_pushnil(L);
          return Pushed{1};
        }
        return Pushed{push(L, batch)};
      }),
      // Stops the threads now rather than when the collector gets to it.
      bind("close", [](lua_State* L, Receiver) {
        check_handle<PrefetcherPtr>(L, 1, kPrefetcher).reset();
      }),
  };
}

// ---- CSV -------------------------------------------------------------------

// Column `i` of the table at `idx`: a 1-based number or a header name.
int64_t column_at(lua_State* L, int idx, const data::CsvTable& table, const char* what) {
  if (lua_type(L, idx) == LUA_TSTRING) return table.column_index(lua_tostring(L, idx));
  if (lua_type(L, idx) == LUA_TNUMBER) {
    const double v = lua_tonumber(L, idx);
    TORCH_CHECK(v == static_cast<double>(static_cast<int64_t>(v)) && v >= 1 &&
                    v <= static_cast<double>(table.num_columns()),
                what, " column ", v, " does not exist: '", table.path(), "' has ",
                table.num_columns(), " columns (numbers are 1-based)");
    return static_cast<int64_t>(v) - 1;
  }
  throw ArgError(std::string(what) + " columns are names or 1-based numbers, got a " +
                 type_name_at(L, idx));
}

// read_csv(path, {header, delimiter, columns, target, target_dtype})
//   -> features [rows, columns] float32, targets [rows] (or nil), names
// Without `columns`, every column but the target.
Pushed read_csv(lua_State* L, std::string path, Options o) {
  data::CsvFormat format;
  format.header = option_boolean(L, o, "header", false);
  const std::string delimiter = option_string(L, o, "delimiter", ",");
  if (delimiter.size() != 1) {
    throw ArgError("option 'delimiter' must be one character, got '" + delimiter + "'");
  }
  format.delimiter = delimiter[0];
  const data::CsvTable table = data::CsvTable::read(path, format);

  c10::optional<int64_t> target;
  if (option_present(L, o, "target")) {
    lua_getfield(L, o.index, "target");
    target = column_at(L, lua_gettop(L), table, "target");
    lua_pop(L, 1);
  }
  std::vector<int64_t> columns;
  if (option_present(L, o, "columns")) {
    lua_getfield(L, o.index, "columns");
    if (lua_type(L, -1) != LUA_TTABLE) throw ArgError("option 'columns' must be a table");
    const int list = lua_gettop(L);
    for (size_t i = 1; i <= lua_objlen(L, list); ++i) {
      lua_rawgeti(L, list, static_cast<int>(i));
      columns.push_back(column_at(L, lua_gettop(L), table, "feature"));
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    TORCH_CHECK(!columns.empty(), "option 'columns' is empty");
  } else {
    for (int64_t c = 0; c < table.num_columns(); ++c) {
      if (c != target) columns.push_back(c);
    }
  }

  push_tensor(L, table.columns(columns, at::kFloat));
  if (target) {
    const at::ScalarType dtype = parse_dtype(option_string(L, o, "target_dtype", "int64"));
    push_tensor(L, table.columns({*target}, dtype).view({-1}));
  } else {
    lua_pushnil(L);
  }
  lua_createtable(L, static_cast<int>(columns.size()), 0);
  for (size_t i = 0; i < columns.size(); ++i) {
    const std::string name = table.names().empty()
                                 ? std::to_string(columns[i] + 1)
                                 : table.names()[static_cast<size_t>(columns[i])];
    lua_pushlstring(L, name.data(), name.size());
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return Pushed{3};
}

// ---- text --------------------------------------------------------------------

Vocabulary& vocabulary_at(lua_State* L) { return check_handle<Vocabulary>(L, 1, kVocabulary); }

std::vector<Binding> vocabulary_methods() {
  return {
      bind("size", [](lua_State* L, Receiver) { return vocabulary_at(L).size(); }),
      bind("level", [](lua_State* L, Receiver) {
        return std::string(data::token_level_name(vocabulary_at(L).level()));
      }),
      bind("tokens", [](lua_State* L, Receiver) {
        const std::vector<std::string>& tokens = vocabulary_at(L).tokens();
        lua_createtable(L, static_cast<int>(tokens.size()), 0);
        for (size_t i = 0; i < tokens.size(); ++i) {
          lua_pushlstring(L, tokens[i].data(), tokens[i].size());
          lua_rawseti(L, -2, static_cast<int>(i + 1));
        }
        return Pushed{1};
      }),
      // encode(text[, source]): `source` names the text in errors.
      bind("encode", [](lua_State* L, Receiver, std::string text, c10::optional<std::string> source) {
        return vocabulary_at(L).encode(text, source.value_or("text"));
      }),
      bind("decode", [](lua_State* L, Receiver, at::Tensor ids) {
        return vocabulary_at(L).decode(ids);
      }),
  };
}

// TextDataset(path, level[, vocabulary]) -> ids (1-D int64), vocabulary:
// the file's tokens under the given vocabulary, or under a new one built
// from the file (all 256 bytes at byte level).
Pushed text_corpus(lua_State* L, std::string path, std::string level_name) {
  const data::TokenLevel level = data::parse_token_level(level_name);
  const std::string text = data::read_file_text(path);
  if (!lua_isnoneornil(L, 3)) {
    const Vocabulary& vocab = check_handle<Vocabulary>(L, 3, kVocabulary);
    TORCH_CHECK(vocab.level() == level, "the vocabulary is ", data::token_level_name(vocab.level()),
                " level, but level = \"", level_name, "\" was asked for");
    push_tensor(L, vocab.encode(text, path));
    lua_pushvalue(L, 3);
    return Pushed{2};
  }
  Vocabulary vocab = level == data::TokenLevel::Byte ? Vocabulary::bytes()
                                                     : Vocabulary::chars_of(text, path);
  push_tensor(L, vocab.encode(text, path));
  push_handle(L, kVocabulary, std::move(vocab));
  return Pushed{2};
}

}  // namespace

std::vector<Binding> data_bindings() {
  return {
      bind("EpochPlan", make_epoch_plan),
      // take_rows({t1, t2, ...}, rows) -> {t1[rows], t2[rows], ...}
      bind("take_rows", [](TensorList tensors, const at::Tensor& rows) {
        return data::take_rows(tensors.value, rows);
      }),
      // BatchPrefetcher(tensors, rows, batch_size, num_workers): batch k is
      // rows[(k-1)*B + 1 .. k*B] of every tensor, gathered ahead on threads.
      bind("BatchPrefetcher", [](lua_State* L, TensorList tensors, at::Tensor rows,
                                 int64_t batch_size, int64_t num_workers) {
        // Two batches in flight per worker, as PyTorch's prefetch_factor.
        auto prefetcher = std::make_unique<BatchPrefetcher>(std::move(tensors.value), std::move(rows),
                                                            batch_size, num_workers, 2 * num_workers);
        push_handle(L, kPrefetcher, PrefetcherPtr(std::move(prefetcher)));
        return Pushed{1};
      }),
      // permutation(n, seed) -> the engine's shuffled order of 0..n-1.
      bind("permutation", [](int64_t n, int64_t seed) {
        return data::shuffled_order(n, seed);
      }),
      bind("read_csv", read_csv),
      // The same reader under the name CSVDataset users see in errors.
      bind("CSVDataset", read_csv),
      bind("TextDataset", text_corpus),
      // windows(ids, seq_len, stride) -> inputs, targets: [count, seq_len]
      // views of `ids` (no copy); window i starts at token (i-1)*stride + 1
      // and its targets are the same tokens shifted by one.
      bind("windows", [](const at::Tensor& ids, int64_t seq_len, int64_t stride) {
        TORCH_CHECK(ids.dim() == 1 && ids.numel() > seq_len && seq_len >= 1 && stride >= 1,
                    "windows: need seq_len >= 1, stride >= 1 and more than seq_len ids, got ",
                    ids.numel(), " ids, seq_len ", seq_len, ", stride ", stride);
        const int64_t n = ids.numel();
        return std::make_tuple(ids.narrow(0, 0, n - 1).unfold(0, seq_len, stride),
                               ids.narrow(0, 1, n - 1).unfold(0, seq_len, stride));
      }),
  };
}

}  // namespace accel::lua
