// accel.core.tokenizers: the engine's tokenizers (engine/tokenizers/) as
// Lua values, for lua/accel/tokenizers/, which reads the folder's configs,
// checks the recipe's options and gives them here already settled. Token
// ids are the file's own, 0-based, in and out (the one place in the Lua API
// where they are: every pretrained model and data set uses them as they
// are). This file is where ids become int64 tensors; the engine knows no
// LibTorch.
//   from_file(path) -> tokenizer, file_pad_token, file_pad_id
//   from_sentencepiece(path, {add_bos_token, add_eos_token, special_tokens})
//     -> tokenizer, {unk_token, bos_token, eos_token, pad_token}: the model's own pieces
//   sentencepiece_available() -> bool, why
//   read_records(path, "text" | "jsonl", key) -> {texts}
//   training_rows(examples, max_length, "pad" | "bfd" | "wrapped", pad_id, left)
//     -> input_ids, attention_mask, labels[, position_ids] (engine/tokenizers/training_rows.h)
// and the tokenizer's methods below.
#include <cstring>
#include <memory>

#include "bindings/kept_weights.h"
#include "bindings/lua_support.h"
#include "bindings/op_tables.h"
#include "engine/chat_template/assistant_mask.h"
#include "engine/tokenizers/batch.h"
#include "engine/tokenizers/kept_tokenizers.h"
#include "engine/tokenizers/regex.h"
#include "engine/tokenizers/sentencepiece_tokenizer.h"
#include "engine/tokenizers/text_records.h"
#include "engine/tokenizers/tokenizer_error.h"
#include "engine/tokenizers/tokenizer_json.h"
#include "engine/tokenizers/training_rows.h"

namespace accel::lua {
namespace {

namespace tk = accel::tokenizers;

using TokenizerPtr = std::shared_ptr<const tk::Tokenizer>;

std::vector<Binding> tokenizer_methods();
const HandleType kTokenizer{"accel.Tokenizer", "accel.tokenizers.Tokenizer:", tokenizer_methods};
std::vector<Binding> pattern_methods();
const HandleType kPattern{"accel.Pattern", "accel.Pattern:", pattern_methods};

const tk::Tokenizer& tokenizer_at(lua_State* L) { return *check_handle<TokenizerPtr>(L, 1, kTokenizer); }

// A Python regular expression for re.fullmatch (PEFT's target_modules).
using PatternPtr = std::shared_ptr<const tk::Regex>;
std::vector<Binding> pattern_methods() {
  return {bind("fullmatch", [](lua_State* L, Receiver, std::string text) {
    return check_handle<PatternPtr>(L, 1, kPattern)->full_match(text);
  })};
}

// A Lua string at `idx` as a view (valid while it stays on the stack).
std::string_view string_at(lua_State* L, int idx, const std::string& what) {
  if (lua_type(L, idx) != LUA_TSTRING) throw ArgError(what + " must be a string, got a " + type_name_at(L, idx));
  std::size_t size = 0;
  const char* s = lua_tolstring(L, idx, &size);
  return {s, size};
}

// The strings of the list at `idx`.
std::vector<std::string_view> strings_at(lua_State* L, int idx, const char* what) {
  if (lua_type(L, idx) != LUA_TTABLE) throw ArgError(std::string(what) + " must be a list of strings");
  std::vector<std::string_view> out;
  const std::size_t n = lua_objlen(L, idx);
  out.reserve(n);
  for (std::size_t i = 1; i <= n; ++i) {
    lua_rawgeti(L, idx, static_cast<int>(i));
    out.push_back(string_at(L, -1, std::string(what) + "[" + std::to_string(i) + "]"));
    lua_pop(L, 1);  // the list keeps the string alive
  }
  return out;
}

int64_t integer_value(double v, const std::string& what) {
  if (!(v == static_cast<double>(static_cast<int64_t>(v)))) throw ArgError(what + " is " + std::to_string(v) + ", not an integer");
  return static_cast<int64_t>(v);
}

// Ids from a list of numbers or an integer tensor of one dim.
std::vector<int64_t> ids_at(lua_State* L, int idx, const std::string& what) {
  if (const at::Tensor* t = to_tensor(L, idx)) {
    require_integer_tensor(*t, what, "token ids");
    TORCH_CHECK(t->dim() <= 1, what, " must have one dim, got ", t->dim());
    const at::Tensor ids = t->to(at::kCPU, at::kLong).contiguous().view(-1);
    return std::vector<int64_t>(ids.data_ptr<int64_t>(), ids.data_ptr<int64_t>() + ids.numel());
  }
  if (lua_type(L, idx) != LUA_TTABLE) throw ArgError(what + " must be a list of ids or an integer tensor, got a " + type_name_at(L, idx));
  const std::size_t n = lua_objlen(L, idx);
  std::vector<int64_t> ids(n);
  for (std::size_t i = 1; i <= n; ++i) {
    lua_rawgeti(L, idx, static_cast<int>(i));
    if (lua_type(L, -1) != LUA_TNUMBER) throw ArgError(what + "[" + std::to_string(i) + "] is not a number");
    ids[i - 1] = integer_value(lua_tonumber(L, -1), what + "[" + std::to_string(i) + "]");
    lua_pop(L, 1);
  }
  return ids;
}

void push_ids(lua_State* L, const std::vector<int32_t>& ids) {
  lua_createtable(L, static_cast<int>(ids.size()), 0);
  for (std::size_t i = 0; i < ids.size(); ++i) {
    lua_pushnumber(L, ids[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
}

at::Tensor long_matrix(const std::vector<int64_t>& values, std::size_t rows, std::size_t columns) {
  at::Tensor t = at::empty({static_cast<int64_t>(rows), static_cast<int64_t>(columns)}, at::kLong);
  if (!values.empty()) std::memcpy(t.data_ptr<int64_t>(), values.data(), values.size() * sizeof(int64_t));
  return t;
}

// A list of {ids = {...}, labels = {...}} at `idx`.
std::vector<tk::TrainingExample> examples_at(lua_State* L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE) throw ArgError("examples must be a list of {ids, labels}");
  const std::size_t n = lua_objlen(L, idx);
  std::vector<tk::TrainingExample> out(n);
  for (std::size_t i = 1; i <= n; ++i) {
    const std::string what = "examples[" + std::to_string(i) + "]";
    lua_rawgeti(L, idx, static_cast<int>(i));
    if (lua_type(L, -1) != LUA_TTABLE) throw ArgError(what + " must be a table {ids, labels}");
    lua_getfield(L, -1, "ids");
    out[i - 1].ids = ids_at(L, lua_gettop(L), what + ".ids");
    lua_getfield(L, -2, "labels");
    out[i - 1].labels = ids_at(L, lua_gettop(L), what + ".labels");
    lua_pop(L, 3);
    if (out[i - 1].labels.size() != out[i - 1].ids.size()) {
      throw ArgError(what + " has " + std::to_string(out[i - 1].ids.size()) + " ids and " +
                     std::to_string(out[i - 1].labels.size()) + " labels");
    }
  }
  return out;
}

tk::Side side_option(lua_State* L, const Options& o, const char* name) {
  const std::string side = option_string(L, o, name, "right");
  if (side == "right") return tk::Side::Right;
  if (side == "left") return tk::Side::Left;
  throw ArgError(std::string("option '") + name + "' must be \"right\" or \"left\", got \"" + side + "\"");
}

// {max_length, truncation_strategy, truncation_side}; nothing without max_length.
std::optional<tk::Truncation> truncation_option(lua_State* L, const Options& o) {
  if (!option_present(L, o, "max_length")) return std::nullopt;
  tk::Truncation t;
  const int64_t max_length = option_integer(L, o, "max_length", 0);
  if (max_length < 0) throw ArgError("option 'max_length' must not be negative");
  t.max_length = static_cast<std::size_t>(max_length);
  const std::string strategy = option_string(L, o, "truncation_strategy", "longest_first");
  if (strategy == "longest_first") {
    t.strategy = tk::TruncationStrategy::LongestFirst;
  } else if (strategy == "only_first") {
    t.strategy = tk::TruncationStrategy::OnlyFirst;
  } else if (strategy == "only_second") {
    t.strategy = tk::TruncationStrategy::OnlySecond;
  } else {
    throw ArgError("option 'truncation_strategy' must be longest_first, only_first or only_second, got " + strategy);
  }
  t.side = side_option(L, o, "truncation_side");
  return t;
}

std::vector<tk::Encoding> encode_all(const tk::Tokenizer& tok, const std::vector<std::string_view>& texts,
                                     const std::vector<std::string_view>* pairs, bool add_special_tokens,
                                     const tk::Truncation* truncation) {
  std::vector<tk::Encoding> out;
  out.reserve(texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    try {
      out.push_back(tok.encode(texts[i], pairs ? &(*pairs)[i] : nullptr, add_special_tokens, truncation));
    } catch (const tk::TokenizerError& e) {
      throw tk::TokenizerError("text " + std::to_string(i + 1) + ": " + e.what());
    }
  }
  return out;
}

std::vector<Binding> tokenizer_methods() {
  return {
      // encode(text, {pair, add_special_tokens, max_length, truncation_strategy,
      // truncation_side}) -> {ids}, {segments}
      bind("encode", [](lua_State* L, Receiver, std::string text, c10::optional<Options> options) {
        const Options o = options.value_or(Options{});
        const tk::Tokenizer& tok = tokenizer_at(L);
        std::string pair;
        const bool has_pair = option_present(L, o, "pair");
        if (has_pair) pair = option_string(L, o, "pair", "");
        const std::string_view pair_view = pair;
        const auto truncation = truncation_option(L, o);
        const tk::Encoding e = tok.encode(text, has_pair ? &pair_view : nullptr,
                                          option_boolean(L, o, "add_special_tokens", true),
                                          truncation ? &*truncation : nullptr);
        push_ids(L, e.ids);
        push_ids(L, e.type_ids);
        return Pushed{2};
      }),
      // encode_batch(texts, pairs | nil, {add_special_tokens, max_length, truncation_strategy,
      // truncation_side, padding, pad_length, pad_to_multiple_of, padding_side, pad_id})
      //   -> input_ids, attention_mask, token_type_ids: int64 [#texts, length]
      bind("encode_batch", [](lua_State* L, Receiver) {
        const tk::Tokenizer& tok = tokenizer_at(L);
        const std::vector<std::string_view> texts = strings_at(L, 2, "texts");
        std::vector<std::string_view> pairs;
        const bool has_pairs = !lua_isnil(L, 3);
        if (has_pairs) {
          pairs = strings_at(L, 3, "text_pair");
          TORCH_CHECK(pairs.size() == texts.size(), "text_pair has ", pairs.size(), " texts, texts has ",
                      texts.size());
        }
        const Options o{lua_istable(L, 4) ? 4 : 0};
        const auto truncation = truncation_option(L, o);
        const std::vector<tk::Encoding> encodings =
            encode_all(tok, texts, has_pairs ? &pairs : nullptr, option_boolean(L, o, "add_special_tokens", true),
                       truncation ? &*truncation : nullptr);
        tk::Padding padding;
        const bool pad = option_boolean(L, o, "padding", false);
        if (pad) {
          if (option_present(L, o, "pad_length")) {
            const int64_t length = option_integer(L, o, "pad_length", 0);
            if (length < 0) throw ArgError("option 'pad_length' must not be negative");
            padding.length = static_cast<std::size_t>(length);
          }
          const int64_t multiple = option_integer(L, o, "pad_to_multiple_of", 0);
          if (multiple < 0) throw ArgError("option 'pad_to_multiple_of' must not be negative");
          padding.multiple_of = static_cast<std::size_t>(multiple);
          padding.side = side_option(L, o, "padding_side");
          padding.pad_id = static_cast<int32_t>(option_integer(L, o, "pad_id", 0));
        }
        const tk::Batch b = tk::make_batch(encodings, pad ? &padding : nullptr);
        return std::make_tuple(long_matrix(b.input_ids, b.rows, b.columns),
                               long_matrix(b.attention_mask, b.rows, b.columns),
                               long_matrix(b.type_ids, b.rows, b.columns));
      }),
      // pack(texts, block_size, separator_id | nil, add_special_tokens) -> int64 [blocks, block_size]:
      // the texts' ids one after another (the separator after each text that
      // does not already end with it), cut into blocks; the rest is dropped.
      // (The second Receiver steps over the texts, read here.)
      bind("pack", [](lua_State* L, Receiver, Receiver, int64_t block_size, c10::optional<int64_t> separator,
                      bool add_special_tokens) {
        TORCH_CHECK(block_size >= 1, "block_size must be at least 1, got ", block_size);
        const tk::Tokenizer& tok = tokenizer_at(L);
        const std::vector<std::string_view> texts = strings_at(L, 2, "texts");
        std::vector<int64_t> all;
        for (const tk::Encoding& e : encode_all(tok, texts, nullptr, add_special_tokens, nullptr)) {
          all.insert(all.end(), e.ids.begin(), e.ids.end());
          if (separator && (e.ids.empty() || e.ids.back() != *separator)) all.push_back(*separator);
        }
        const std::size_t blocks = all.size() / static_cast<std::size_t>(block_size);
        all.resize(blocks * static_cast<std::size_t>(block_size));
        return long_matrix(all, blocks, static_cast<std::size_t>(block_size));
      }),
      // decode(ids, skip_special_tokens) -> text; ids a list or a 1-D integer
      // tensor, read here (the second Receiver steps over them).
      bind("decode", [](lua_State* L, Receiver, Receiver, bool skip_special_tokens) {
        return tokenizer_at(L).decode(ids_at(L, 2, "ids"), skip_special_tokens);
      }),
      // assistant_mask(ids, {{begin, end}...}) -> {0 or 1 per id}: the ids
      // whose text overlaps a span of the decoded text (0-based bytes, end
      // excluded), as transformers' assistant_masks (engine/chat_template/assistant_mask.h).
      bind("assistant_mask", [](lua_State* L, Receiver, Receiver, Receiver) {
        const tk::Tokenizer& tok = tokenizer_at(L);
        const std::vector<int64_t> ids = ids_at(L, 2, "ids");
        if (lua_type(L, 3) != LUA_TTABLE) throw ArgError("spans must be a list of {begin, end}");
        std::vector<std::pair<std::size_t, std::size_t>> spans;
        for (std::size_t i = 1; i <= lua_objlen(L, 3); ++i) {
          lua_rawgeti(L, 3, static_cast<int>(i));
          const std::vector<int64_t> span = ids_at(L, lua_gettop(L), "spans[" + std::to_string(i) + "]");
          lua_pop(L, 1);
          if (span.size() != 2 || span[0] < 0 || span[1] < span[0]) throw ArgError("spans[" + std::to_string(i) + "] must be {begin, end}");
          spans.emplace_back(static_cast<std::size_t>(span[0]), static_cast<std::size_t>(span[1]));
        }
        const std::vector<int32_t> mask = chat_template::assistant_mask(ids.size(), spans, [&](std::size_t n) {
          return tok.decode(std::vector<int64_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n)), false).size();
        });
        push_ids(L, mask);
        return Pushed{1};
      }),
      // decode_batch(ids, skip_special_tokens) -> {texts}; ids a 2-D integer
      // tensor, one text a row, or a list of lists.
      bind("decode_batch", [](lua_State* L, Receiver, Receiver, bool skip_special_tokens) {
        const tk::Tokenizer& tok = tokenizer_at(L);
        std::vector<std::string> texts;
        if (const at::Tensor* t = to_tensor(L, 2)) {
          require_integer_tensor(*t, "ids", "token ids");
          TORCH_CHECK(t->dim() == 2, "ids must have two dims (one row a text), got ", t->dim());
          const at::Tensor ids = t->to(at::kCPU, at::kLong).contiguous();
          const int64_t columns = ids.size(1);
          for (int64_t r = 0; r < ids.size(0); ++r) {
            const int64_t* row = ids.data_ptr<int64_t>() + r * columns;
            texts.push_back(tok.decode(std::vector<int64_t>(row, row + columns), skip_special_tokens));
          }
        } else {
          if (lua_type(L, 2) != LUA_TTABLE) throw ArgError("ids must be a 2-D integer tensor or a list of lists");
          const std::size_t n = lua_objlen(L, 2);
          for (std::size_t i = 1; i <= n; ++i) {
            lua_rawgeti(L, 2, static_cast<int>(i));
            texts.push_back(tok.decode(ids_at(L, lua_gettop(L), "ids[" + std::to_string(i) + "]"), skip_special_tokens));
            lua_pop(L, 1);
          }
        }
        lua_createtable(L, static_cast<int>(texts.size()), 0);
        for (std::size_t i = 0; i < texts.size(); ++i) {
          lua_pushlstring(L, texts[i].data(), texts[i].size());
          lua_rawseti(L, -2, static_cast<int>(i + 1));
        }
        return Pushed{1};
      }),
      bind("token_to_id", [](lua_State* L, Receiver, std::string token) {
        const auto id = tokenizer_at(L).token_to_id(token);
        if (id) {
          lua_pushnumber(L, *id);
        } else {
          lua_pushnil(L);
        }
        return Pushed{1};
      }),
      bind("id_to_token", [](lua_State* L, Receiver, int64_t id) {
        const auto token = tokenizer_at(L).id_to_token(id);
        if (token) {
          lua_pushlstring(L, token->data(), token->size());
        } else {
          lua_pushnil(L);
        }
        return Pushed{1};
      }),
      bind("vocab_size", [](lua_State* L, Receiver, bool with_added_tokens) {
        return static_cast<int64_t>(tokenizer_at(L).vocab_size(with_added_tokens));
      }),
      bind("special_tokens_added", [](lua_State* L, Receiver, bool pair) {
        return static_cast<int64_t>(tokenizer_at(L).special_tokens_added(pair));
      }),
      // added_tokens() -> {{content, id, special, single_word, lstrip, rstrip, normalized}, ...} by id
      bind("added_tokens", [](lua_State* L, Receiver) {
        const std::vector<tk::AddedToken> tokens = tokenizer_at(L).added_tokens();
        lua_createtable(L, static_cast<int>(tokens.size()), 0);
        for (std::size_t i = 0; i < tokens.size(); ++i) {
          const tk::AddedToken& t = tokens[i];
          lua_createtable(L, 0, 7);
          lua_pushlstring(L, t.content.data(), t.content.size());
          lua_setfield(L, -2, "content");
          lua_pushnumber(L, t.id);
          lua_setfield(L, -2, "id");
          for (const auto& [name, value] : {std::pair<const char*, bool>{"special", t.special},
                                            {"single_word", t.single_word}, {"lstrip", t.lstrip},
                                            {"rstrip", t.rstrip}, {"normalized", t.normalized}}) {
            lua_pushboolean(L, value);
            lua_setfield(L, -2, name);
          }
          lua_rawseti(L, -2, static_cast<int>(i + 1));
        }
        return Pushed{1};
      }),
  };
}

}  // namespace

std::vector<Binding> tokenizer_bindings() {
  return {
      // In a warm worker, what an earlier run read of the same file
      // (engine/tokenizers/kept_tokenizers.h).
      bind("from_file", [](lua_State* L, std::string path) {
        tk::KeptTokenizers* kept = kept_tokenizers();
        tk::KeptTokenizer file;
        if (kept) {
          file = kept->read(path);
        } else {
          tk::TokenizerFile read = tk::read_tokenizer_json(path);
          file = {std::move(read.tokenizer), read.padding};
        }
        push_handle(L, kTokenizer, TokenizerPtr(file.tokenizer));
        if (file.padding) {
          lua_pushlstring(L, file.padding->pad_token.data(), file.padding->pad_token.size());
          lua_pushnumber(L, file.padding->pad_id);
        } else {
          lua_pushnil(L);
          lua_pushnil(L);
        }
        return Pushed{3};
      }),
      bind("from_sentencepiece", [](lua_State* L, std::string path, c10::optional<Options> options) {
        const Options o = options.value_or(Options{});
        tk::SentencePieceOptions sp;
        sp.add_bos_token = option_boolean(L, o, "add_bos_token", true);
        sp.add_eos_token = option_boolean(L, o, "add_eos_token", false);
        if (option_present(L, o, "special_tokens")) {
          lua_getfield(L, o.index, "special_tokens");
          for (const std::string_view s : strings_at(L, lua_gettop(L), "special_tokens")) sp.special_tokens.emplace_back(s);
          lua_pop(L, 1);
        }
        const auto tokenizer = std::make_shared<tk::SentencePieceTokenizer>(path, sp);
        push_handle(L, kTokenizer, TokenizerPtr(tokenizer));
        // The model's own unknown, BOS, EOS and padding pieces.
        lua_createtable(L, 0, 4);
        for (const auto& [name, piece] : {std::pair<const char*, std::string>{"unk_token", tokenizer->unk_piece()},
                                          {"bos_token", tokenizer->bos_piece()},
                                          {"eos_token", tokenizer->eos_piece()},
                                          {"pad_token", tokenizer->pad_piece()}}) {
          if (piece.empty()) continue;
          lua_pushlstring(L, piece.data(), piece.size());
          lua_setfield(L, -2, name);
        }
        return Pushed{2};
      }),
      // python_pattern(pattern, where) -> a pattern whose :fullmatch(text) is re.fullmatch's answer.
      bind("python_pattern", [](lua_State* L, std::string pattern, std::string where) {
        push_handle(L, kPattern, PatternPtr(std::make_shared<const tk::Regex>(tk::Regex::python(pattern, where))));
        return Pushed{1};
      }),
      bind("sentencepiece_available", [](lua_State* L) {
        std::string why;
        lua_pushboolean(L, tk::sentencepiece_available(&why));
        lua_pushlstring(L, why.data(), why.size());
        return Pushed{2};
      }),
      bind("training_rows", [](lua_State* L, Receiver, int64_t max_length, std::string mode, int64_t pad_id,
                               bool left) {
        TORCH_CHECK(max_length >= 1, "max_length must be at least 1, got ", max_length);
        const std::vector<tk::TrainingExample> examples = examples_at(L, 1);
        const auto length = static_cast<std::size_t>(max_length);
        tk::TrainingRows r;
        if (mode == "pad") {
          r = tk::pad_examples(examples, length, pad_id, left);
        } else if (mode == "bfd" || mode == "wrapped") {
          r = tk::pack_examples(examples, length, mode == "bfd" ? tk::PackingStrategy::BestFitDecreasing
                                                                 : tk::PackingStrategy::Wrapped, pad_id);
        } else {
          throw ArgError("mode must be \"pad\", \"bfd\" or \"wrapped\", got \"" + mode + "\"");
        }
        push_tensor(L, long_matrix(r.input_ids, r.rows, r.columns));
        push_tensor(L, long_matrix(r.attention_mask, r.rows, r.columns));
        push_tensor(L, long_matrix(r.labels, r.rows, r.columns));
        if (mode == "pad") return Pushed{3};
        push_tensor(L, long_matrix(r.position_ids, r.rows, r.columns));
        return Pushed{4};
      }),
      bind("read_records", [](lua_State* L, std::string path, std::string format, std::string key) {
        tk::RecordFormat f;
        if (format == "text") {
          f = tk::RecordFormat::Text;
        } else if (format == "jsonl") {
          f = tk::RecordFormat::JsonLines;
        } else {
          throw ArgError("format must be \"text\" or \"jsonl\", got \"" + format + "\"");
        }
        const std::vector<std::string> records = tk::read_text_records(path, f, key);
        lua_createtable(L, static_cast<int>(records.size()), 0);
        for (std::size_t i = 0; i < records.size(); ++i) {
          lua_pushlstring(L, records[i].data(), records[i].size());
          lua_rawseti(L, -2, static_cast<int>(i + 1));
        }
        return Pushed{1};
      }),
  };
}

}  // namespace accel::lua
