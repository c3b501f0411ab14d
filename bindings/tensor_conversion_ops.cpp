// Conversions between tensors and Lua values, dtypes and devices.
#include "bindings/op_tables.h"
#include "bindings/tensor_repr.h"
#include "engine/gpu.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;

void push_element(lua_State* L, const Tensor& flat, int64_t i) {
  if (flat.scalar_type() == at::kBool) {
    lua_pushboolean(L, flat.data_ptr<bool>()[i]);
  } else {
    lua_pushnumber(L, flat.data_ptr<double>()[i]);
  }
}

// Nested Lua tables of a (contiguous double or bool) tensor's values.
void push_nested(lua_State* L, const Tensor& flat, at::IntArrayRef sizes, size_t dim,
                 int64_t& offset) {
  if (dim == sizes.size()) {
    push_element(L, flat, offset++);
    return;
  }
  lua_createtable(L, static_cast<int>(sizes[dim]), 0);
  for (int64_t i = 0; i < sizes[dim]; ++i) {
    push_nested(L, flat, sizes, dim + 1, offset);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
}

Pushed totable(lua_State* L, T t) {
  Tensor flat = t.detach().to(at::kCPU);
  flat = (flat.scalar_type() == at::kBool ? flat : flat.to(at::kDouble)).contiguous();
  int64_t offset = 0;
  push_nested(L, flat, t.sizes(), 0, offset);
  return Pushed{1};
}

}  // namespace

std::vector<Binding> tensor_conversion_bindings() {
  return {
      bind("item", [](lua_State* L, T t) {
        TORCH_CHECK(t.numel() == 1, "item() needs a tensor of one element, got ", t.numel(),
                    " elements of shape ", t.sizes());
        if (t.scalar_type() == at::kBool) {
          lua_pushboolean(L, t.item<bool>());
        } else {
          lua_pushnumber(L, t.item<double>());
        }
        return Pushed{1};
      }),
      bind("totable", totable),
      bind("size", [](lua_State* L, T t, c10::optional<Dim> dim) {
        if (dim) {
          lua_pushnumber(L, static_cast<lua_Number>(t.size(dim->value)));
          return Pushed{1};
        }
        return Pushed{push(L, t.sizes().vec())};
      }),
      bind("dim", [](T t) { return static_cast<int64_t>(t.dim()); }),
      bind("numel", [](T t) { return static_cast<int64_t>(t.numel()); }),
      // to(dtype) or to(device[, non_blocking]); a dtype name never parses
      // as a device. A non-blocking copy from pinned host memory overlaps
      // the GPU's work.
      bind("to", [](T t, std::string target, c10::optional<bool> non_blocking) {
        for (const char* device : {"cpu", "cuda", "mps"}) {
          if (target.rfind(device, 0) == 0) return t.to(usable_device(target, "to(\"" + target + "\")"), non_blocking.value_or(false));
        }
        return t.to(parse_dtype(target));
      }),
      // cuda([index]): the current GPU, or GPU `index`.
      bind("cuda", [](T t, c10::optional<int64_t> index) {
        const int i = gpu::checked_index(static_cast<int>(index.value_or(-1)), "t:cuda()");
        return t.to(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(i)));
      }),
      // A copy in page-locked host memory, which the GPU copies from
      // asynchronously; needs a GPU, as in PyTorch.
      bind("pin_memory", [](T t) {
        gpu::require("t:pin_memory()");
        return t.pin_memory();
      }),
      bind("is_pinned", [](T t) { return gpu::count() > 0 && t.is_pinned(); }),
      bind("type_as", [](T t, T other) { return t.to(other.scalar_type()); }),
      bind("cpu", [](T t) { return t.cpu(); }),
      bind("float", [](T t) { return t.to(at::kFloat); }),
      bind("double", [](T t) { return t.to(at::kDouble); }),
      bind("half", [](T t) { return t.to(at::kHalf); }),
      bind("bfloat16", [](T t) { return t.to(at::kBFloat16); }),
      bind("long", [](T t) { return t.to(at::kLong); }),
      bind("int", [](T t) { return t.to(at::kInt); }),
      bind("bool", [](T t) { return t.to(at::kBool); }),
      bind("is_contiguous", [](T t) { return t.is_contiguous(); }),
      // PyTorch's: the same memory (storage, offset, sizes, strides), e.g. an
      // optimizer's parameter and a model's.
      bind("is_set_to", [](T t, T other) { return t.is_set_to(other); }),
      bind("is_floating_point", [](T t) { return t.is_floating_point(); }),
      bind("element_size", [](T t) { return static_cast<int64_t>(t.element_size()); }),
      bind("stride", [](lua_State* L, T t, c10::optional<Dim> dim) {
        if (dim) return Pushed{push(L, t.stride(dim->value))};
        return Pushed{push(L, t.strides().vec())};
      }),
      bind("__len", [](T t) {
        TORCH_CHECK(t.dim() > 0, "# of a 0-dim tensor: it has no first dim");
        return static_cast<int64_t>(t.size(0));
      }),
      bind("__tostring", tensor_repr),
  };
}

}  // namespace accel::lua
