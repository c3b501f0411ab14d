#include "engine/tensor_description.h"

#include <ATen/ATen.h>

#include <stdexcept>

namespace accel {
namespace {

struct DtypeName {
  const char* name;
  c10::ScalarType type;
};

constexpr DtypeName kDtypes[] = {
    {"float32", at::kFloat},   {"float64", at::kDouble}, {"bfloat16", at::kBFloat16},
    {"float16", at::kHalf},    {"int64", at::kLong},     {"int32", at::kInt},
    {"int16", at::kShort},     {"int8", at::kChar},      {"uint8", at::kByte},
    {"bool", at::kBool},
};

}  // namespace

std::vector<std::string> dtype_names() {
  std::vector<std::string> names;
  for (const auto& d : kDtypes) names.emplace_back(d.name);
  return names;
}

std::string dtype_text(c10::ScalarType type) {
  for (const auto& d : kDtypes) {
    if (d.type == type) return d.name;
  }
  return c10::toString(type);
}

c10::ScalarType parse_dtype(const std::string& name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return d.type;
  }
  std::string known;
  for (const auto& d : kDtypes) known += std::string(known.empty() ? "" : ", ") + d.name;
  throw std::invalid_argument("unknown dtype '" + name + "' (known: " + known + ")");
}

std::string shape_text(c10::IntArrayRef sizes) {
  std::string text = "[";
  for (size_t d = 0; d < sizes.size(); ++d) text += (d ? ", " : "") + std::to_string(sizes[d]);
  return text + "]";
}

std::string describe_tensor(const at::Tensor& t) { return dtype_text(t.scalar_type()) + shape_text(t.sizes()); }

}  // namespace accel
