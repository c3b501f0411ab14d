#include "engine/tokenizers/sentencepiece_charsmap.h"

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "engine/tokenizers/tokenizer_error.h"

namespace accel::tokenizers {
namespace {

// ModelProto's fields that hold a NormalizerSpec, and NormalizerSpec's map.
constexpr uint32_t kNormalizerSpec = 3;
constexpr uint32_t kDenormalizerSpec = 5;
constexpr uint32_t kPrecompiledCharsmap = 2;

class Wire {
 public:
  Wire(std::string_view data, const std::string& where) : data_(data), where_(where) {}
  bool done() const { return at_ == data_.size(); }

  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (at_ >= data_.size()) fail("ends inside a varint");
      const auto byte = static_cast<unsigned char>(data_[at_++]);
      value |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if (!(byte & 0x80)) return value;
    }
    fail("has a varint longer than 10 bytes");
  }

  std::string_view bytes(uint64_t n) {
    if (n > data_.size() - at_) fail("has a field longer than what remains");
    const std::string_view out = data_.substr(at_, n);
    at_ += n;
    return out;
  }

  // Skips a field of tag `tag`; length-delimited ones are returned. A group
  // (protobuf's deprecated wire types 3 and 4, which a parser skips when it
  // does not know the field) is skipped whole, nested groups with it.
  std::string_view field(uint64_t tag) {
    switch (tag & 7) {
      case 0: varint(); return {};
      case 1: bytes(8); return {};
      case 2: return bytes(varint());
      case 3:
        for (int depth = 1; depth > 0;) {
          if (done()) fail("ends inside a group");
          const uint64_t inner = varint();
          if ((inner & 7) == 4) {
            --depth;
          } else if ((inner & 7) == 3) {
            if (++depth > 100) fail("nests groups more than 100 deep");
          } else {
            field(inner);
          }
        }
        return {};
      case 5: bytes(4); return {};
      default: fail("has a field of wire type " + std::to_string(tag & 7) + " where none is open");
    }
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw TokenizerError(where_ + " is not a SentencePiece model: it " + why + " (at byte " + std::to_string(at_) + ")");
  }

 private:
  std::string_view data_;
  std::string where_;
  std::size_t at_ = 0;
};

// darts-clone's unit: label, leaf flag, offset to its children, value.
uint32_t offset_of(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }
bool has_leaf(uint32_t unit) { return (unit >> 8) & 1; }
uint32_t label_of(uint32_t unit) { return unit & ((1u << 31) | 0xFF); }
uint32_t value_of(uint32_t unit) { return unit & ((1u << 31) - 1); }

void check_charsmap(std::string_view blob, const std::string& where) {
  const auto refuse = [&](const std::string& why) {
    throw TokenizerError(where + " is not a valid character map: " + why);
  };
  uint32_t trie_bytes = 0;
  if (blob.size() < sizeof trie_bytes) refuse("it has " + std::to_string(blob.size()) + " bytes, fewer than its size field");
  std::memcpy(&trie_bytes, blob.data(), sizeof trie_bytes);  // little-endian, as x86 and ARM read it
  if (trie_bytes > blob.size() - sizeof trie_bytes) {
    refuse("its trie of " + std::to_string(trie_bytes) + " bytes is longer than the " +
           std::to_string(blob.size() - sizeof trie_bytes) + " that follow");
  }
  const std::size_t units = trie_bytes / sizeof(uint32_t);
  const std::string_view strings = blob.substr(sizeof trie_bytes + trie_bytes);
  if (units == 0) refuse("its trie is empty");
  // A value starts a NUL-terminated string when a NUL follows it.
  const std::size_t last_nul = strings.rfind('\0');
  std::vector<uint32_t> array(units);
  std::memcpy(array.data(), blob.data() + sizeof trie_bytes, units * sizeof(uint32_t));
  // A base is a node's children's block: base ^ label for every label must be a unit.
  const auto check_base = [&](std::size_t from, uint64_t base) {
    if ((base | 0xFF) >= units) {
      refuse("unit " + std::to_string(from) + " leads to units " + std::to_string(base) + " to " +
             std::to_string(base | 0xFF) + ", past the trie's " + std::to_string(units));
    }
  };
  std::vector<bool> seen(units, false);
  std::vector<uint32_t> bases;
  const uint32_t root = offset_of(array[0]);
  check_base(0, root);
  bases.push_back(root);
  while (!bases.empty()) {
    const uint32_t base = bases.back();
    bases.pop_back();
    // Label 0 too: a text holding a NUL byte is looked up by it.
    for (uint32_t label = 0; label < 256; ++label) {
      const uint32_t child = base ^ label;
      if (seen[child] || label_of(array[child]) != label) continue;
      seen[child] = true;
      const uint64_t next = child ^ offset_of(array[child]);
      check_base(child, next);
      if (has_leaf(array[child])) {
        const uint32_t value = value_of(array[next]);
        if (last_nul == std::string_view::npos || value > last_nul) {
          refuse("unit " + std::to_string(next) + "'s value " + std::to_string(value) +
                 " is not the start of a NUL-terminated string among its " + std::to_string(strings.size()) +
                 " bytes of replacements");
        }
      }
      bases.push_back(static_cast<uint32_t>(next));
    }
  }
}

void check_spec(std::string_view spec, const std::string& where) {
  Wire wire(spec, where);
  while (!wire.done()) {
    const uint64_t tag = wire.varint();
    const std::string_view value = wire.field(tag);
    if ((tag >> 3) == kPrecompiledCharsmap && (tag & 7) == 2 && !value.empty()) {
      check_charsmap(value, where + ".precompiled_charsmap");
    }
  }
}

}  // namespace

void check_sentencepiece_charsmaps(const std::string& data, const std::string& source) {
  Wire wire(data, "'" + source + "'");
  // Protobuf merges a message field given twice, the last map winning:
  // every map given is checked.
  while (!wire.done()) {
    const uint64_t tag = wire.varint();
    const std::string_view value = wire.field(tag);
    const uint64_t number = tag >> 3;
    if ((tag & 7) == 2 && (number == kNormalizerSpec || number == kDenormalizerSpec)) {
      check_spec(value, "'" + source + "': " + (number == kNormalizerSpec ? "normalizer_spec" : "denormalizer_spec"));
    }
  }
}

}  // namespace accel::tokenizers
