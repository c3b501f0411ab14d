// All-gather through a c10d group (Gloo's or NCCL's), shared by the
// backends built on c10d. Neither has a bool type: bool tensors travel as
// bytes, which carry the same values. `wait` waits for the group's work the
// way its backend waits (and turns failures into its errors).
#pragma once
#include <ATen/ATen.h>

#include <vector>

namespace accel {

template <class Group, class Wait>
std::vector<at::Tensor> c10d_all_gather(Group& group, int size, const at::Tensor& t, Wait&& wait) {
  if (t.scalar_type() == at::kBool) {
    std::vector<at::Tensor> parts = c10d_all_gather(group, size, t.to(at::kByte), wait);
    for (at::Tensor& part : parts) part = part.to(at::kBool);
    return parts;
  }
  std::vector<at::Tensor> input{t.contiguous()};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int r = 0; r < size; ++r) output[0].push_back(at::empty_like(input[0]));
  wait(group.allgather(output, input));
  return output[0];
}

}  // namespace accel
