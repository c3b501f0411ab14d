// Activation checkpointing (accel.checkpoint, as torch.utils.checkpoint): a
// block of the forward runs without keeping what its backward needs, and
// runs again in backward to rebuild it, trading compute for activation
// memory.
//
// Note [checkpointing in one pass]: gradient synchronisation hangs on the
// parameters' gradient accumulators (gradient_reducer.h, sharded_model.h),
// so each must run once per backward, in backward's own pass, checkpoints
// or not. Of PyTorch's two ways, one breaks that and the other cannot be
// had in C++:
//   - reentrant: the forward runs under no_grad; backward recomputes and runs
//     a nested backward that accumulates into .grad. The accumulators then run
//     in that nested pass: a reducer's end-of-pass callback is queued on the
//     nested pass (it finalizes early), and a parameter used by two blocks,
//     or by a block and the rest of the model, is reported twice.
//   - non-reentrant (its default): the forward records the graph through
//     saved-tensor hooks that keep nothing, and backward recomputes to fill
//     in the saved tensors. LibTorch's C++ API has no such hooks (PyTorch's
//     are Python objects).
// accel gives the non-reentrant semantics with one node. The first run
// records the block's graph only to learn where it leaves the block: the
// block's tensor arguments and the gradient accumulators of the parameters
// it uses. It then frees everything that graph saved before the call
// returns, so what stays is the inputs, as with a first run under no_grad;
// while the block runs, the peak holds one block's activations, as it does
// again when backward recomputes it. The block's outputs get one node
// whose edges are those places: backward reaches each parameter's
// accumulator in the same pass as the rest of the model, once, its
// gradients from inside and outside the block summed by autograd first.
// When backward reaches the node it restores the first run's random and
// autocast state, recomputes, and computes the gradients at those places
// with a nested pass that accumulates nothing (as torch.autograd.grad does).
// A tensor needing a gradient that the block takes from elsewhere than its
// arguments (a table argument, an upvalue) is backpropagated through inside
// that nested pass, down to the parameters it came from: correct, but it
// costs a walk of its graph each time; pass such tensors as arguments.
//
// Recomputation calls back into whoever gave the block, here a std::function;
// for a Lua block that means entering Lua from inside backward, possibly on
// an autograd worker thread: bindings/lua_in_backward.h says how that is safe.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace accel {

// Runs the block with `inputs` (tensors in the order given to checkpoint)
// and returns the tensors among its results, in an order that is the same
// on every call.
using CheckpointedBlock = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>& inputs)>;

// Runs `first_run(inputs)` and returns its tensors with their history
// through the checkpoint's node (a tensor that needs no gradient comes back
// as it is). `first_run` and `recompute` get the inputs detached (tensors of
// their own that require grad as the given ones do); `recompute` is called
// by backward, on whichever thread autograd runs the node, and must compute
// what `first_run` did. With grad mode off there is nothing to save:
// `first_run` gets the inputs as they are and its tensors come back so.
//
// Random state (the CPU generator, and the CUDA generators of the inputs'
// devices) and autocast state are saved before the first run and put back
// for the recomputation, then restored to where backward found them: with
// dropout on, gradients equal the uncheckpointed ones bit for bit. Backward
// fails, naming the tensor, when an input was modified in place after the
// call, when the recomputation gives tensors of other shapes, and when it
// runs through the node a second time (only with retain_graph).
std::vector<at::Tensor> checkpoint(const std::vector<at::Tensor>& inputs, const CheckpointedBlock& first_run,
                                   CheckpointedBlock recompute);

// Whether this thread is recomputing a checkpointed block now: stage 3 of
// the sharded model keeps a unit gathered then and does not prefetch the
// next one, which backward has passed already (sharded_model.cpp).
bool recomputing_activations();

// How many recomputations ran in this process, and how many of those ran
// on a thread other than the one that made the checkpoint (an autograd
// worker thread), for tests and benchmarks.
struct RecomputationCounts {
  int64_t total = 0;
  int64_t on_other_threads = 0;
};
RecomputationCounts recomputation_counts();

}  // namespace accel
