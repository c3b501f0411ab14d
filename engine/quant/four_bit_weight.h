// A weight quantized to 4 bits as bitsandbytes 0.50 quantizes it
// (functional.quantize_4bit, the Params4bit of bnb.nn.Linear4bit): the
// values, flattened, are cut into blocks of `blocksize` (64); each block is
// scaled by its largest magnitude (absmax) and each value coded by the
// nearest of 16 values (NormalFloat "nf4" or "fp4"), two codes a byte, the
// first in the high nibble. With double quantization the blocks' absmax
// are themselves coded in 8 bits (their mean taken off, blocks of 256, the
// dynamic map), saving ~0.37 bits a parameter. The fields are those a
// transformers folder of a 4-bit model saves beside each `weight`
// (`weight.absmax`, `weight.quant_map`, `weight.nested_absmax`,
// `weight.nested_quant_map`, and the rest in `weight.quant_state.*`).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

namespace accel::quant {

struct FourBitWeight {
  at::Tensor packed;     // uint8 ((n + 1) / 2, 1), or those bytes viewed as quant_storage
  at::Tensor absmax;     // float32 per block, or, nested, their uint8 codes
  at::Tensor quant_map;  // the 16 float32 values the codes index
  int64_t blocksize = 64;
  std::string quant_type = "nf4";
  std::vector<int64_t> shape;              // the weight's own (out_features, in_features)
  at::ScalarType dtype = at::kFloat;       // the weight's dtype before quantization
  // Double quantization, when nested_absmax is defined.
  at::Tensor nested_absmax;     // float32, one per nested block of absmax
  at::Tensor nested_quant_map;  // the 256 float32 values of the dynamic map
  int64_t nested_blocksize = 256;
  double nested_offset = 0;     // the mean taken off the absmax (a float32 value)

  bool nested() const { return nested_absmax.defined(); }
};

struct FourBitOptions {
  int64_t blocksize = 64;
  std::string quant_type = "nf4";
  bool double_quant = false;
  at::ScalarType quant_storage = at::kByte;
};

// Quantizes a float32, bfloat16 or float16 weight (CPU or GPU).
FourBitWeight quantize_4bit(const at::Tensor& weight, const FourBitOptions& options);

// The blocks' absmax in float32 (the nested codes decoded and the offset
// added back, in float32, as bitsandbytes does).
at::Tensor block_absmax(const FourBitWeight& w);

// The weight back, in `dtype`: quant_map[code] * absmax of its block,
// computed in float32 and then converted.
at::Tensor dequantize_4bit(const FourBitWeight& w, at::ScalarType dtype);

// Checks the fields agree with each other (sizes, dtypes, block counts),
// naming `where` and the field at fault: a folder's tensors are checked
// before use.
void check_four_bit_weight(const FourBitWeight& w, const std::string& where);

}  // namespace accel::quant
