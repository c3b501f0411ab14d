// The zero-bubble pipeline schedules' split backward (Qi et al. 2023, as
// torch.distributed.pipelining's stage_backward_input and
// stage_backward_weight): a stage's backward in two parts run at different
// times, B the gradient of its input (which the previous stage waits for)
// and W the gradients of its parameters (which nothing waits for, so the
// schedule fills its idle time with them).
//
//   auto split = SplitBackward::input_backward(output, grad, input, params);  // B
//   ...                                                                       // other actions
//   split->weight_backward();                                                 // W
//
// B runs autograd from `output` to `input` alone (backward with inputs =
// {input}: input.grad accumulates), the graph kept. Autograd then computes
// only what the input's gradient needs: an op holding a parameter (a
// linear's addmm, a norm's) gives its input's gradient and skips its
// parameters'. Each such op -- a node of the graph on the input's path
// with an edge into a part that reaches parameters and not the input: an
// "intermediate" -- has the gradient arriving at it captured on the way (a
// pre-hook). W runs each intermediate again on what arrived, its edges into
// the input's path cut first: a node's backward computes only the outputs
// whose edges are valid (a linear's weight gradient, not its input's
// again). Then autograd from its edges into the parameters' part, which
// accumulates into the parameters' .grad through their AccumulateGrad
// nodes (so the hooks of data parallel and FSDP see them as after any
// backward). The parameters' part never reaches the input's path, so
// nothing is counted twice.
//
// Between B and W the graph holds what W needs: the intermediates' saved
// tensors, the gradients captured. The other nodes on the input's path
// let go of theirs after B.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

namespace torch::autograd {
struct Node;
}

namespace accel {

class SplitBackward {
 public:
  // B: `output`'s gradient `grad` (undefined: ones, for a loss) back to
  // `input`, a leaf that requires grad, whose .grad it accumulates.
  // `params`: the stage's parameters (those that do not require grad, or
  // that the output does not depend on, take no part).
  static std::unique_ptr<SplitBackward> input_backward(const at::Tensor& output, const at::Tensor& grad,
                                                       const at::Tensor& input, const std::vector<at::Tensor>& params);
  ~SplitBackward();
  SplitBackward(const SplitBackward&) = delete;
  SplitBackward& operator=(const SplitBackward&) = delete;

  // W: the parameters' gradients, accumulated into their .grad. Once; the
  // graph is let go after it.
  void weight_backward();
  bool weight_done() const { return done_; }
  // How many intermediates B captured (for tests: a stage of linears has one per linear).
  size_t intermediates() const { return intermediates_.size(); }

  struct Capture;  // split_backward.cpp

 private:
  SplitBackward() = default;
  struct Intermediate {
    std::shared_ptr<torch::autograd::Node> node;
    std::vector<size_t> weight_edges;  // its next edges into the parameters' part
    std::shared_ptr<Capture> capture;
  };
  std::vector<Intermediate> intermediates_;
  bool done_ = false;
};

}  // namespace accel
