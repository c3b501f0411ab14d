// All-gather through a c10d group (Gloo's or NCCL's), shared by the
// backends built on c10d. Elements travel as bytes, which a gather carries
// unchanged whatever their type: Gloo has neither bool nor (LibTorch 1.13's)
// bfloat16. `wait` waits for the group's work the way its backend waits
// (and turns failures into its errors).
#pragma once
#include <ATen/ATen.h>

#include <vector>

namespace accel {

template <class Group, class Wait>
std::vector<at::Tensor> c10d_all_gather(Group& group, int size, const at::Tensor& t, Wait&& wait) {
  std::vector<at::Tensor> input{t.contiguous().reshape({-1}).view(at::kByte)};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int r = 0; r < size; ++r) output[0].push_back(at::empty_like(input[0]));
  wait(group.allgather(output, input));
  std::vector<at::Tensor> parts;
  for (const at::Tensor& bytes : output[0]) parts.push_back(bytes.view(t.scalar_type()).view(t.sizes()));
  return parts;
}

}  // namespace accel
