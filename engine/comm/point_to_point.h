// Point-to-point exchange within a group, for what collectives do not say:
// the ring of context parallelism (engine/parallel/ring_shift.h), where every
// rank sends to its successor and receives from its predecessor at once. A
// communicator that can offers it beside the Communicator interface
// (GlooCommunicator, NcclCommunicator, MpiCommunicator and MPI groups;
// SharedMemoryCommunicator hands it to the communicator beneath, since its
// segment only serves collectives, and DeviceRoutedCommunicator to the side
// where the tensors live); point_to_point() finds it. Every mesh group of
// more than one rank has one, whatever the backend.
#pragma once

namespace at {
class Tensor;
}

namespace accel {

class Communicator;

class PointToPoint {
 public:
  virtual ~PointToPoint() = default;
  // Sends `send` to group rank `to` and receives into `recv` from group rank
  // `from`, both in flight at once (so a ring of such calls cannot
  // deadlock), and returns when both have completed. `recv` is contiguous,
  // with the shape and dtype the sender sends. The ranks of an exchange make
  // their calls in the same order.
  virtual void send_recv(const at::Tensor& send, int to, at::Tensor& recv, int from) = 0;
};

// `comm`'s point-to-point exchange; throws std::invalid_argument naming its
// backend when it has none (the world's communicator, whose wrappers for
// stall reports and --debug do not carry it).
PointToPoint& point_to_point(Communicator& comm);

}  // namespace accel
