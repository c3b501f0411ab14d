// 8-bit block-wise quantization with a code book of 256 sorted values, as
// bitsandbytes 0.50's CPU kernel computes it (quantize_blockwise): each
// block of `blocksize` values is scaled by its largest magnitude (absmax)
// and each value coded by the nearest entry of the code book, found through
// bitsandbytes' table of 65,536 evenly spaced points in [-1, 1]. Double
// quantization codes the 4-bit blocks' absmax this way (blocks of 256, the
// dynamic map), so the nested statistics equal bitsandbytes' byte for byte.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace accel::quant {

struct BlockwiseCodes {
  at::Tensor codes;   // uint8, a's shape
  at::Tensor absmax;  // float32, one per block (the last may be partial)
};

// a: float32 values on the CPU; code: 256 sorted float32 values.
BlockwiseCodes quantize_blockwise(const at::Tensor& a, const at::Tensor& code, int64_t blocksize);

// codes (uint8) back to float32: code[c] * absmax of its block.
at::Tensor dequantize_blockwise(const at::Tensor& codes, const at::Tensor& absmax, const at::Tensor& code,
                                int64_t blocksize);

}  // namespace accel::quant
