// The code books of bitsandbytes' block-wise quantization, value for value
// as bitsandbytes 0.50 makes them (functional.get_4bit_type and
// create_dynamic_map), so that codes computed here index the same values
// and the maps saved with a 4-bit weight (`weight.quant_map`,
// `weight.nested_quant_map`) are byte for byte bitsandbytes' own.
#pragma once
#include <ATen/core/Tensor.h>

#include <string>

namespace accel::quant {

// The 16 values of "nf4" (NormalFloat: quantiles of N(0, 1), in increasing
// order) or "fp4" (1 sign, 2 exponent, 1 mantissa bit, in bit-pattern
// order), scaled to [-1, 1]; float32 on the CPU. Any other name is an error.
at::Tensor four_bit_code(const std::string& quant_type);

// The signed 8-bit dynamic map (256 sorted values in [-1, 1]) that double
// quantization codes the 4-bit blocks' absmax with; float32 on the CPU.
at::Tensor dynamic_map();

}  // namespace accel::quant
