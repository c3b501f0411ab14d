#include "engine/quant/four_bit_weight.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>

#include "engine/quant/blockwise_quantization.h"
#include "engine/quant/quant_maps.h"

namespace accel::quant {
namespace {

constexpr int64_t kBlocksizes[] = {32, 64, 128, 256, 512, 1024, 2048, 4096};

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t block_count(int64_t n, int64_t blocksize) { return (n + blocksize - 1) / blocksize; }

// The scaled values in [-1, 1], as bitsandbytes' quantize_4bit computes
// them: a whole block times the reciprocal of its absmax, the last partial
// block divided by its own (clamped to 1e-38); and the blocks' absmax.
std::pair<at::Tensor, at::Tensor> scaled_blocks(const at::Tensor& flat, int64_t blocksize) {
  const int64_t n = flat.numel(), rem = n % blocksize, full = n - rem;
  std::vector<at::Tensor> scaled, absmax;
  if (full > 0) {
    at::Tensor blocks = flat.narrow(0, 0, full).view({full / blocksize, blocksize});
    at::Tensor largest = std::get<0>(blocks.abs().max(-1));
    scaled.push_back(at::clamp(blocks * largest.clamp_min(1e-38).reciprocal().view({-1, 1}), -1, 1).view(-1));
    absmax.push_back(largest);
  }
  if (rem > 0) {
    at::Tensor tail = flat.narrow(0, full, rem);
    at::Tensor largest = tail.abs().max().clamp_min(1e-38);
    scaled.push_back(at::clamp(tail / largest, -1, 1));
    absmax.push_back(largest.view({1}));
  }
  return {at::cat(scaled), at::cat(absmax)};
}

// Codes of the scaled values: the index of the nearest value of the code
// book (bucketize over the midpoints of its sorted values), mapped back to
// the book's own order (fp4's is not sorted).
at::Tensor nearest_codes(const at::Tensor& scaled, const at::Tensor& code) {
  auto [sorted, order] = at::sort(code, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  const int64_t k = sorted.numel();
  at::Tensor midpoints = (sorted.narrow(0, 0, k - 1) + sorted.narrow(0, 1, k - 1)) / 2;
  at::Tensor index = at::bucketize(scaled, midpoints, /*out_int32=*/false);
  return order.index_select(0, index.view(-1)).to(at::kByte);
}

// Two codes a byte, the first in the high nibble (an even count: see quantize_4bit).
at::Tensor pack_pairs(const at::Tensor& codes) {
  at::Tensor pairs = codes.view({-1, 2});
  return pairs.select(1, 0).bitwise_left_shift(4).bitwise_or(pairs.select(1, 1)).view({-1, 1});
}

// The CPU's dequantization, straight from the bytes: no code or index
// tensors the size of the weight.
template <typename T>
void dequantize_cpu(const uint8_t* bytes, const float* book, const float* absmax, int64_t n, int64_t blocksize,
                    T* out) {
  at::parallel_for(0, block_count(n, blocksize), 16, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float scale = absmax[b];
      const int64_t last = std::min((b + 1) * blocksize, n);
      for (int64_t i = b * blocksize; i < last; ++i) {
        const uint8_t byte = bytes[i >> 1];
        out[i] = static_cast<T>(book[(i & 1) ? (byte & 0x0F) : (byte >> 4)] * scale);
      }
    }
  });
}

}  // namespace

FourBitWeight quantize_4bit(const at::Tensor& weight, const FourBitOptions& options) {
  TORCH_CHECK(std::find(std::begin(kBlocksizes), std::end(kBlocksizes), options.blocksize) != std::end(kBlocksizes),
              "4-bit quantization: blocksize must be 32, 64, 128, 256, 512, 1024, 2048 or 4096, got ",
              options.blocksize);
  const auto dtype = weight.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf,
              "4-bit quantization: the weight must be float32, bfloat16 or float16, got ", dtype);
  TORCH_CHECK(weight.numel() > 0, "4-bit quantization: the weight is empty");
  FourBitWeight w;
  w.blocksize = options.blocksize;
  w.quant_type = options.quant_type;
  w.shape = weight.sizes().vec();
  w.dtype = dtype;
  w.quant_map = four_bit_code(options.quant_type).to(weight.device());
  at::Tensor flat = weight.detach().reshape(-1).to(at::kFloat);
  auto [scaled, absmax] = scaled_blocks(flat, options.blocksize);
  // An odd count is padded with the value 0 before coding, as bitsandbytes pads.
  if (scaled.numel() % 2) scaled = at::constant_pad_nd(scaled, {0, 1});
  w.packed = pack_pairs(nearest_codes(scaled, w.quant_map));
  if (options.quant_storage != at::kByte) {
    const int64_t width = c10::elementSize(options.quant_storage);
    TORCH_CHECK(w.packed.numel() % width == 0, "4-bit quantization: ", w.packed.numel(),
                " bytes of codes do not fill whole ", options.quant_storage, " elements (quant_storage)");
    w.packed = w.packed.view(-1).view(options.quant_storage).view({-1, 1});
  }
  if (!options.double_quant) {
    w.absmax = absmax;
    return w;
  }
  // The mean is taken off before coding, in float32 (bitsandbytes'
  // compress_statistics); the offset is added back when decoding.
  at::Tensor offset = absmax.mean();
  w.nested_offset = offset.item<float>();
  w.nested_quant_map = dynamic_map().to(weight.device());
  BlockwiseCodes nested = quantize_blockwise(absmax - offset, w.nested_quant_map, w.nested_blocksize);
  w.absmax = nested.codes;
  w.nested_absmax = nested.absmax;
  return w;
}

at::Tensor block_absmax(const FourBitWeight& w) {
  if (!w.nested()) return w.absmax.to(at::kFloat);
  at::Tensor decoded = dequantize_blockwise(w.absmax, w.nested_absmax, w.nested_quant_map, w.nested_blocksize);
  return decoded + static_cast<float>(w.nested_offset);
}

at::Tensor dequantize_4bit(const FourBitWeight& w, at::ScalarType dtype) {
  const int64_t n = numel_of(w.shape);
  at::Tensor bytes = w.packed.scalar_type() == at::kByte ? w.packed : w.packed.view(at::kByte);
  bytes = bytes.reshape(-1).contiguous();
  at::Tensor absmax = block_absmax(w).contiguous();
  at::Tensor book = w.quant_map.to(at::kFloat).contiguous();
  if (bytes.is_cpu() && (dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf)) {
    at::Tensor out = at::empty(w.shape, bytes.options().dtype(dtype));
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, dtype, "dequantize_4bit", [&] {
      dequantize_cpu<scalar_t>(bytes.data_ptr<uint8_t>(), book.data_ptr<float>(), absmax.data_ptr<float>(), n,
                               w.blocksize, out.data_ptr<scalar_t>());
    });
    return out;
  }
  // Elsewhere (a GPU) in ATen ops: the nibbles, their values, each block times its scale.
  at::Tensor nibbles = at::stack({bytes.bitwise_right_shift(4), bytes.bitwise_and(0x0F)}, 1).view(-1);
  const int64_t blocks = block_count(n, w.blocksize);
  at::Tensor values = book.index_select(0, nibbles.narrow(0, 0, n).to(at::kLong));
  at::Tensor padded = at::constant_pad_nd(values, {0, blocks * w.blocksize - n}).view({blocks, w.blocksize});
  return (padded * absmax.view({blocks, 1})).view(-1).narrow(0, 0, n).view(w.shape).to(dtype);
}

void check_four_bit_weight(const FourBitWeight& w, const std::string& where) {
  TORCH_CHECK(!w.shape.empty(), where, ": the quantized weight has no shape");
  const int64_t n = numel_of(w.shape);
  TORCH_CHECK(w.packed.defined() && w.packed.numel() * w.packed.element_size() == (n + 1) / 2, where,
              ": 'weight' holds ", w.packed.defined() ? w.packed.numel() * w.packed.element_size() : 0,
              " bytes, but a 4-bit weight of shape ", c10::IntArrayRef(w.shape), " needs ", (n + 1) / 2);
  TORCH_CHECK(w.quant_map.defined() && w.quant_map.numel() == 16 && w.quant_map.scalar_type() == at::kFloat, where,
              ": 'weight.quant_map' must be 16 float32 values");
  const int64_t blocks = block_count(n, w.blocksize);
  TORCH_CHECK(w.absmax.defined() && w.absmax.numel() == blocks, where, ": 'weight.absmax' must hold ", blocks,
              " values (", n, " weights in blocks of ", w.blocksize, "), got ",
              w.absmax.defined() ? w.absmax.numel() : 0);
  if (!w.nested()) {
    TORCH_CHECK(w.absmax.scalar_type() == at::kFloat, where, ": 'weight.absmax' must be float32 without nested "
                "statistics, got ", w.absmax.scalar_type());
    return;
  }
  TORCH_CHECK(w.absmax.scalar_type() == at::kByte, where,
              ": 'weight.absmax' must be uint8 codes with nested statistics, got ", w.absmax.scalar_type());
  TORCH_CHECK(w.nested_quant_map.defined() && w.nested_quant_map.numel() == 256, where,
              ": 'weight.nested_quant_map' must be 256 float32 values");
  TORCH_CHECK(w.nested_absmax.numel() == block_count(blocks, w.nested_blocksize), where,
              ": 'weight.nested_absmax' must hold ", block_count(blocks, w.nested_blocksize), " values, got ",
              w.nested_absmax.numel());
}

}  // namespace accel::quant
