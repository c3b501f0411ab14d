// The seam between a backward pass and the way a model's gradients are
// synchronised across ranks: data parallel's reducer (gradient_reducer.h)
// and the sharded model of ZeRO and FSDP (sharded_model.h) implement it,
// and the Accelerator's backward (lua/accel/accelerator_gradients.lua)
// drives every prepared model through it alike:
//
//   set_sync(s)     whether backward synchronises (false on micro-steps
//                   that only accumulate, in no_sync); it holds until set again
//   caller_finishes_backward()
//                   the next backward is the caller's to end: it calls
//                   end_backward and finalize itself
//   (autograd runs; the implementation's hooks start reductions as
//    gradients become ready)
//   end_backward()  after every backward, synchronising or not: what must
//                   follow the last gradient (reduce what is left, release
//                   gathered parameters)
//   finalize(n)     after a synchronising backward: wait for every
//                   reduction and divide the gradients by the items all
//                   ranks counted (n is this rank's; 0: divide by the
//                   number of ranks)
//
// A backward nobody announced with caller_finishes_backward (a recipe's
// plain loss:backward() on a prepared model) is ended by the
// implementation itself, as DDP ends every backward: at the end of
// autograd's pass (a callback autograd runs when the pass completes) it
// runs end_backward and, when synchronising, finalize(0), so the gradients
// are the average over ranks when backward returns.
//
// Tensor and context parallelism add their own implementations beside
// these, in this folder.
#pragma once
#include <cstdint>

namespace accel {

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual void set_sync(bool sync) = 0;
  virtual bool sync() const = 0;
  virtual void caller_finishes_backward() = 0;
  virtual void end_backward() = 0;
  virtual void finalize(int64_t num_items) = 0;
};

}  // namespace accel
