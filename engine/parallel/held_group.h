// A group kept in an autograd function's context until its backward has
// run, for the collectives backward makes (ring_shift.h): saved_data holds
// IValues only, so the group rides in a capsule, shared.
#pragma once
#include <torch/autograd.h>
#include <torch/custom_class.h>

#include <memory>

namespace accel {

class Communicator;

struct HeldGroup : torch::CustomClassHolder {
  explicit HeldGroup(std::shared_ptr<Communicator> c) : comm(std::move(c)) {}
  std::shared_ptr<Communicator> comm;
};

inline void hold_group(torch::autograd::AutogradContext* ctx, std::shared_ptr<Communicator> group) {
  ctx->saved_data["group"] = c10::IValue::make_capsule(c10::make_intrusive<HeldGroup>(std::move(group)));
}

inline Communicator& held_group(torch::autograd::AutogradContext* ctx) {
  return *c10::static_intrusive_pointer_cast<HeldGroup>(ctx->saved_data["group"].toCapsule())->comm;
}

}  // namespace accel
