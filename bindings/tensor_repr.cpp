// PyTorch's tensor printing (torch/_tensor_str.py) in C++: one formatter
// decides the width and notation of every element from the values shown,
// then rows nest with PyTorch's indentation and line breaks.
#include "bindings/tensor_repr.h"

#include <torch/csrc/autograd/function.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "bindings/value_conversion.h"

namespace accel::lua {
namespace {

using at::Tensor;

// PyTorch's default print options.
constexpr int kPrecision = 4;
constexpr int64_t kThreshold = 1000;  // more elements than this are summarised
constexpr int64_t kEdgeItems = 3;
constexpr int kLineWidth = 80;

// Formats the elements of one tensor alike. `values` holds them as double,
// int64 or bool (see printable).
class Formatter {
 public:
  explicit Formatter(const Tensor& values) : kind_(values.scalar_type()) {
    Tensor flat = values.reshape(-1);
    if (kind_ != at::kDouble) {
      for (int64_t i = 0; i < flat.numel(); ++i) {
        max_width_ = std::max(max_width_, static_cast<int>(element(flat, i).size()));
      }
      return;
    }
    Tensor finite = flat.masked_select(at::isfinite(flat) & flat.ne(0));
    if (finite.numel() == 0) return;
    Tensor magnitude = finite.abs();
    double smallest = magnitude.min().item<double>(), largest = magnitude.max().item<double>();
    int_mode_ = at::equal(finite, finite.ceil());
    sci_mode_ = largest / smallest > 1000.0 || largest > 1e8 || (!int_mode_ && smallest < 1e-4);
    for (int64_t i = 0; i < finite.numel(); ++i) {
      max_width_ = std::max(max_width_, static_cast<int>(number(finite.data_ptr<double>()[i]).size()));
    }
  }

  int width() const { return max_width_; }

  // Element i of a 1-dim (or 0-dim, i = 0) tensor, padded to the width.
  std::string format(const Tensor& values, int64_t i) const {
    std::string text = element(values, i);
    if (static_cast<int>(text.size()) < max_width_) {
      text.insert(0, static_cast<size_t>(max_width_ - static_cast<int>(text.size())), ' ');
    }
    return text;
  }

 private:
  std::string element(const Tensor& values, int64_t i) const {
    int64_t offset = values.dim() == 0 ? 0 : i * values.stride(0);
    if (kind_ == at::kBool) return values.data_ptr<bool>()[offset] ? "True" : "False";
    if (kind_ == at::kLong) return std::to_string(values.data_ptr<int64_t>()[offset]);
    return number(values.data_ptr<double>()[offset]);
  }

  // Integral floats print with a trailing '.', so they still read as floats.
  std::string number(double v) const {
    char buffer[64];
    if (std::isnan(v)) return "nan";  // C prints some NaNs as "-nan"
    if (sci_mode_) {
      std::snprintf(buffer, sizeof buffer, "%.*e", kPrecision, v);
    } else if (int_mode_) {
      std::snprintf(buffer, sizeof buffer, std::isinf(v) ? "%.0f" : "%.0f.", v);
    } else {
      std::snprintf(buffer, sizeof buffer, "%.*f", kPrecision, v);
    }
    return buffer;
  }

  at::ScalarType kind_;
  bool int_mode_ = true;
  bool sci_mode_ = false;
  int max_width_ = 1;
};

// The elements shown when a large tensor is summarised: kEdgeItems from
// each end of every dim (get_summarized_data).
Tensor summarized(const Tensor& t) {
  if (t.dim() == 0) return t;
  int64_t n = t.size(0);
  if (t.dim() == 1) {
    return n > 2 * kEdgeItems ? at::cat({t.slice(0, 0, kEdgeItems), t.slice(0, n - kEdgeItems)}) : t;
  }
  std::vector<Tensor> rows;
  for (int64_t i = 0; i < n; ++i) {
    if (n > 2 * kEdgeItems && i == kEdgeItems) i = n - kEdgeItems;
    rows.push_back(summarized(t.select(0, i)));
  }
  return at::stack(rows);
}

std::string vector_string(const Tensor& t, int indent, bool summarize, const Formatter& f) {
  int64_t element_length = f.width() + 2;
  int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / element_length);
  std::vector<std::string> items;
  int64_t n = t.size(0);
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      items.push_back(" ...");
      i = n - kEdgeItems;
    }
    items.push_back(f.format(t, i));
  }
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) {
      out += i % static_cast<size_t>(per_line) == 0 ? ",\n" + std::string(indent + 1, ' ') : ", ";
    }
    out += items[i];
  }
  return out + "]";
}

std::string tensor_string(const Tensor& t, int indent, bool summarize, const Formatter& f) {
  if (t.dim() == 0) return f.format(t, 0);
  if (t.dim() == 1) return vector_string(t, indent, summarize, f);
  std::vector<std::string> slices;
  int64_t n = t.size(0);
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      slices.push_back("...");
      i = n - kEdgeItems;
    }
    slices.push_back(tensor_string(t.select(0, i), indent + 1, summarize, f));
  }
  std::string separator = "," + std::string(static_cast<size_t>(t.dim() - 1), '\n') +
                          std::string(static_cast<size_t>(indent + 1), ' ');
  std::string out = "[";
  for (size_t i = 0; i < slices.size(); ++i) out += (i ? separator : "") + slices[i];
  return out + "]";
}

// The values as double, int64 or bool on the CPU, which the formatter reads.
Tensor printable(const Tensor& t) {
  Tensor cpu = t.detach().to(at::kCPU);
  if (cpu.is_floating_point()) return cpu.to(at::kDouble);
  if (cpu.scalar_type() == at::kBool) return cpu;
  return cpu.to(at::kLong);
}

std::string shape_tuple(at::IntArrayRef sizes) {
  std::string out = "(";
  for (size_t i = 0; i < sizes.size(); ++i) out += (i ? ", " : "") + std::to_string(sizes[i]);
  return out + (sizes.size() == 1 ? ",)" : ")");
}

// _add_suffixes: each suffix goes on the line when it fits in 80 columns.
std::string with_suffixes(std::string text, const std::vector<std::string>& suffixes, int indent) {
  size_t newline = text.rfind('\n');
  int64_t last_line = static_cast<int64_t>(text.size()) -
                      (newline == std::string::npos ? -1 : static_cast<int64_t>(newline)) + 1;
  for (const std::string& suffix : suffixes) {
    int64_t length = static_cast<int64_t>(suffix.size());
    if (last_line + length + 2 > kLineWidth) {
      text += ",\n" + std::string(static_cast<size_t>(indent), ' ') + suffix;
      last_line = indent + length;
    } else {
      text += ", " + suffix;
      last_line += length + 2;
    }
  }
  return text + ")";
}

}  // namespace

std::string tensor_repr(const Tensor& t) {
  if (!t.defined()) return "tensor(undefined)";
  const std::string prefix = "tensor(";
  const int indent = static_cast<int>(prefix.size());
  std::vector<std::string> suffixes;
  if (!t.device().is_cpu()) suffixes.push_back("device='" + t.device().str() + "'");
  at::ScalarType type = t.scalar_type();
  std::string dtype_suffix = std::string("dtype=accel.") + dtype_text(type);
  std::string body;
  if (t.numel() == 0) {
    if (t.dim() != 1) suffixes.push_back("size=" + shape_tuple(t.sizes()));
    // An empty tensor shows no values to infer int64 from, so any dtype
    // but the default is named.
    if (type != at::kFloat) suffixes.push_back(dtype_suffix);
    body = "[]";
  } else {
    if (type != at::kFloat && type != at::kLong && type != at::kBool) suffixes.push_back(dtype_suffix);
    Tensor values = printable(t);
    bool summarize = values.numel() > kThreshold;
    Formatter formatter(summarize ? summarized(values) : values);
    body = tensor_string(values, indent, summarize, formatter);
  }
  if (t.grad_fn()) {
    std::string name = t.grad_fn()->name();
    size_t colon = name.rfind("::");
    suffixes.push_back("grad_fn=<" + (colon == std::string::npos ? name : name.substr(colon + 2)) + ">");
  } else if (t.requires_grad()) {
    suffixes.push_back("requires_grad=True");
  }
  return with_suffixes(prefix + body, suffixes, indent);
}

}  // namespace accel::lua
