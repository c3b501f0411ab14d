// The seam between a backward pass and the way a model's gradients are
// synchronised across ranks: data parallel's reducer (gradient_reducer.h)
// and the sharded model of ZeRO and FSDP (sharded_model.h) implement it,
// and the Accelerator's backward (lua/accel/accelerator_gradients.lua)
// drives every prepared model through it alike:
//
//   set_sync(s)     before backward: whether this backward synchronises
//                   (false on micro-steps that only accumulate, in no_sync)
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
  virtual void end_backward() = 0;
  virtual void finalize(int64_t num_items) = 0;
};

}  // namespace accel
