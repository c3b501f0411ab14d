#include "engine/quant/blockwise_quantization.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace accel::quant {
namespace {

constexpr int kCodes = 256;
constexpr int kTableSize = 65536;

// bitsandbytes' table: point i of [-1, 1] -> the index of the first code
// whose midpoint with the next is not below the point.
std::array<uint8_t, kTableSize> nearest_code_table(const float* code) {
  std::array<float, kCodes - 1> midpoints;
  for (int i = 0; i < kCodes - 1; ++i) midpoints[i] = 0.5f * (code[i] + code[i + 1]);
  std::array<uint8_t, kTableSize> table;
  int index = 0;
  for (int i = 0; i < kTableSize; ++i) {
    const float value = -1.0f + (2.0f * static_cast<float>(i)) / static_cast<float>(kTableSize - 1);
    while (index < kCodes - 1 && midpoints[index] < value) ++index;
    table[i] = static_cast<uint8_t>(index);
  }
  return table;
}

// A scaled value's point in the table, rounded as bitsandbytes rounds it.
inline uint16_t table_index(float value) {
  value = std::clamp(value, -1.0f, 1.0f);
  return static_cast<uint16_t>((value + 1.0f) * 0.5f * static_cast<float>(kTableSize - 1) + 0.5f);
}

void check_code(const at::Tensor& code, const char* where) {
  TORCH_CHECK(code.scalar_type() == at::kFloat && code.numel() == kCodes, where,
              ": the code book must be 256 float32 values, got ", code.numel(), " ", code.scalar_type());
}

}  // namespace

BlockwiseCodes quantize_blockwise(const at::Tensor& a, const at::Tensor& code, int64_t blocksize) {
  TORCH_CHECK(blocksize > 0, "blockwise quantization: blocksize must be positive, got ", blocksize);
  check_code(code, "blockwise quantization");
  at::Tensor values = a.to(at::kCPU, at::kFloat).contiguous();
  at::Tensor book = code.to(at::kCPU).contiguous();
  const int64_t n = values.numel();
  const int64_t blocks = (n + blocksize - 1) / blocksize;
  at::Tensor codes = at::empty(a.sizes(), at::TensorOptions().dtype(at::kByte));
  at::Tensor absmax = at::empty({blocks}, at::TensorOptions().dtype(at::kFloat));
  const auto table = nearest_code_table(book.data_ptr<float>());
  const float* in = values.data_ptr<float>();
  uint8_t* out = codes.data_ptr<uint8_t>();
  float* scales = absmax.data_ptr<float>();
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const int64_t first = b * blocksize, last = std::min(first + blocksize, n);
      float largest = 0.0f;
      for (int64_t i = first; i < last; ++i) largest = std::max(largest, std::fabs(in[i]));
      scales[b] = largest;
      // An all-zero block codes every value as code 0, as bitsandbytes does.
      const float inverse = largest == 0.0f ? 0.0f : 1.0f / largest;
      for (int64_t i = first; i < last; ++i) out[i] = largest == 0.0f ? 0 : table[table_index(in[i] * inverse)];
    }
  });
  return {codes.to(a.device()), absmax.to(a.device())};
}

at::Tensor dequantize_blockwise(const at::Tensor& codes, const at::Tensor& absmax, const at::Tensor& code,
                                int64_t blocksize) {
  TORCH_CHECK(codes.scalar_type() == at::kByte, "blockwise dequantization: codes must be uint8, got ",
              codes.scalar_type());
  check_code(code, "blockwise dequantization");
  const int64_t n = codes.numel();
  const int64_t blocks = (n + blocksize - 1) / blocksize;
  TORCH_CHECK(absmax.numel() == blocks, "blockwise dequantization: ", n, " codes in blocks of ", blocksize,
              " need ", blocks, " absmax values, got ", absmax.numel());
  // Padded to whole blocks, so that each block's scale broadcasts over it.
  at::Tensor values = code.to(codes.device()).index_select(0, codes.reshape(-1).to(at::kLong));
  at::Tensor padded = at::constant_pad_nd(values, {0, blocks * blocksize - n});
  at::Tensor scaled = padded.view({blocks, blocksize}) * absmax.to(at::kFloat).view({blocks, 1});
  return scaled.view(-1).narrow(0, 0, n).view(codes.sizes());
}

}  // namespace accel::quant
