// Point-to-point sends and receives within a group, for what collectives do
// not say: the ring of context parallelism (engine/parallel/ring_shift.h),
// where every rank sends to its successor and receives from its predecessor
// at once, and a pipeline's activations and gradients between stages
// (engine/comm/tensor_exchange.h, which adds the tensors' descriptions). A
// communicator that can offers it beside the Communicator interface
// (GlooCommunicator, NcclCommunicator, MpiCommunicator and MPI groups;
// SharedMemoryCommunicator hands it to the communicator beneath, since its
// segment only serves collectives, and DeviceRoutedCommunicator to the side
// where the tensors live); point_to_point() finds it. Every mesh group of
// more than one rank has one, whatever the backend.
#pragma once
#include <memory>

namespace at {
class Tensor;
}

namespace accel {

class Communicator;
class PendingOp;

class PointToPoint {
 public:
  virtual ~PointToPoint() = default;
  // Starts sending `t` to group rank `to` / receiving into `t` (contiguous,
  // as many bytes as the sender sends) from group rank `from`, and returns
  // at once; wait() completes it, failing within the group's timeout when
  // the peer never takes part. Transfers between two ranks with the same
  // `tag` match in the order they were started; bytes travel unconverted,
  // whatever the dtype. Neither tensor may be touched before wait().
  virtual std::unique_ptr<PendingOp> isend(const at::Tensor& t, int to, int tag) = 0;
  virtual std::unique_ptr<PendingOp> irecv(at::Tensor& t, int from, int tag) = 0;
  // Sends `send` to group rank `to` and receives into `recv` from group rank
  // `from`, both in flight at once (so a ring of such calls cannot
  // deadlock), and returns when both have completed; tag 0. `recv` has the
  // shape and dtype the sender sends. The ranks of an exchange make their
  // calls in the same order.
  virtual void send_recv(const at::Tensor& send, int to, at::Tensor& recv, int from);
};

// `comm`'s point-to-point exchange; throws std::invalid_argument naming its
// backend when it has none (the world's communicator, whose wrappers for
// stall reports and --debug do not carry it).
PointToPoint& point_to_point(Communicator& comm);

}  // namespace accel
