#include "engine/formats/checksum.h"

#include <array>
#include <cstdio>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace accel::formats {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u;  // CRC-32C, bit-reversed

// table[k][b]: the CRC of byte b followed by k zero bytes, for slicing-by-8.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

Tables make_tables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ ((c & 1u) ? kPolynomial : 0u);
    t[0][b] = c;
  }
  for (uint32_t b = 0; b < 256; ++b) {
    for (int k = 1; k < 8; ++k) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFFu];
  }
  return t;
}

const Tables& tables() {
  static const Tables t = make_tables();
  return t;
}

uint32_t update_portable(uint32_t state, const unsigned char* p, std::size_t n) {
  const Tables& t = tables();
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);  // little-endian hosts only, as the engine's files are
    word ^= state;
    state = t[7][word & 0xFF] ^ t[6][(word >> 8) & 0xFF] ^ t[5][(word >> 16) & 0xFF] ^
            t[4][(word >> 24) & 0xFF] ^ t[3][(word >> 32) & 0xFF] ^ t[2][(word >> 40) & 0xFF] ^
            t[1][(word >> 48) & 0xFF] ^ t[0][word >> 56];
    p += 8;
    n -= 8;
  }
  while (n--) state = (state >> 8) ^ t[0][(state ^ *p++) & 0xFFu];
  return state;
}

#if defined(__x86_64__)
// Appending n zero bytes to a message is a linear map of the CRC register;
// these build it as a table (Mark Adler's method for combining CRCs), so
// that three independent crc32 instruction streams can run side by side
// and be joined: the instruction's latency, not its throughput, is what
// bounds a single stream.
uint32_t gf2_times(const uint32_t* matrix, uint32_t vector) {
  uint32_t sum = 0;
  for (; vector; vector >>= 1, ++matrix) {
    if (vector & 1) sum ^= *matrix;
  }
  return sum;
}

void gf2_square(uint32_t* square, const uint32_t* matrix) {
  for (int n = 0; n < 32; ++n) square[n] = gf2_times(matrix, matrix[n]);
}

// shift[k][b]: the register b << 8k after `bytes` zero bytes (a power of two).
using ShiftTable = std::array<std::array<uint32_t, 256>, 4>;

ShiftTable make_shift(std::size_t bytes) {
  uint32_t odd[32], even[32];
  odd[0] = kPolynomial;  // one zero bit
  for (int n = 1; n < 32; ++n) odd[n] = 1u << (n - 1);
  gf2_square(even, odd);  // two bits
  gf2_square(odd, even);  // four bits
  const uint32_t* op = nullptr;
  for (std::size_t n = bytes;;) {  // each square doubles: one byte, two, four...
    gf2_square(even, odd);
    n >>= 1;
    if (n == 0) {
      op = even;
      break;
    }
    gf2_square(odd, even);
    n >>= 1;
    if (n == 0) {
      op = odd;
      break;
    }
  }
  ShiftTable t{};
  for (uint32_t b = 0; b < 256; ++b) {
    for (int k = 0; k < 4; ++k) t[k][b] = gf2_times(op, b << (8 * k));
  }
  return t;
}

uint32_t shift(const ShiftTable& t, uint32_t crc) {
  return t[0][crc & 0xFF] ^ t[1][(crc >> 8) & 0xFF] ^ t[2][(crc >> 16) & 0xFF] ^ t[3][crc >> 24];
}

constexpr std::size_t kLong = 8192;
constexpr std::size_t kShort = 256;

// Three streams over consecutive blocks of `block` bytes, joined.
__attribute__((target("sse4.2"))) uint64_t three_ways(uint64_t crc0, const unsigned char*& p, std::size_t& n,
                                                     std::size_t block, const ShiftTable& t) {
  while (n >= 3 * block) {
    uint64_t crc1 = 0, crc2 = 0;
    for (const unsigned char* end = p + block; p < end; p += 8) {
      uint64_t a, b, c;
      std::memcpy(&a, p, 8);
      std::memcpy(&b, p + block, 8);
      std::memcpy(&c, p + 2 * block, 8);
      crc0 = _mm_crc32_u64(crc0, a);
      crc1 = _mm_crc32_u64(crc1, b);
      crc2 = _mm_crc32_u64(crc2, c);
    }
    crc0 = shift(t, static_cast<uint32_t>(crc0)) ^ crc1;
    crc0 = shift(t, static_cast<uint32_t>(crc0)) ^ crc2;
    p += 2 * block;
    n -= 3 * block;
  }
  return crc0;
}

__attribute__((target("sse4.2"))) uint32_t update_hardware(uint32_t state, const unsigned char* p,
                                                           std::size_t n) {
  static const ShiftTable long_shift = make_shift(kLong);
  static const ShiftTable short_shift = make_shift(kShort);
  uint64_t s = state;
  s = three_ways(s, p, n, kLong, long_shift);
  s = three_ways(s, p, n, kShort, short_shift);
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    s = _mm_crc32_u64(s, word);
    p += 8;
    n -= 8;
  }
  uint32_t s32 = static_cast<uint32_t>(s);
  while (n--) s32 = _mm_crc32_u8(s32, *p++);
  return s32;
}

bool detect_hardware() {
  __builtin_cpu_init();  // may run before libgcc's own constructor has
  return __builtin_cpu_supports("sse4.2");
}
#else
uint32_t update_hardware(uint32_t state, const unsigned char* p, std::size_t n) {
  return update_portable(state, p, n);
}
bool detect_hardware() { return false; }
#endif

bool use_hardware() {
  static const bool hardware = detect_hardware();
  return hardware;
}

}  // namespace

void Crc32c::update(const void* data, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  state_ = use_hardware() ? update_hardware(state_, p, size) : update_portable(state_, p, size);
}

uint32_t crc32c(const void* data, std::size_t size) {
  Crc32c crc;
  crc.update(data, size);
  return crc.value();
}

uint32_t crc32c_portable(const void* data, std::size_t size) {
  return ~update_portable(0xFFFFFFFFu, static_cast<const unsigned char*>(data), size);
}

bool crc32c_hardware_available() { return use_hardware(); }

std::string crc32c_hex(uint32_t value) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", value);
  return text;
}

}  // namespace accel::formats
