// Whole tensors sent and received between the ranks of a group, as a
// pipeline's stages pass activations and gradients (torch.distributed's
// send/recv/isend/irecv), over the group's point-to-point transfers
// (engine/comm/point_to_point.h): Gloo (behind shared memory too, whose
// segment carries collectives only), MPI, and NCCL for CUDA tensors.
//
// Each tensor travels as two messages: a fixed-size description (dtype and
// shape, int64 words, on tag 1) and then its bytes (on tag 2). The receiver
// waits for the description first, so that
//   - a receive may leave the shape to the sender (recv(from) makes the
//     tensor), which is how a stage takes an activation it cannot predict;
//   - a receive into a tensor of another dtype or shape fails naming both
//     ranks and both tensors, after taking the bytes into scratch, so the
//     sender completes and neither side waits on a transfer that cannot
//     match;
//   - the bytes' receive always has the size the sender sends (backends
//     differ on a size mismatch: Gloo aborts, MPI truncates).
// Between two ranks, transfers match in the order they were started; the
// bytes' receives are posted in that order too (a receive waited before an
// earlier one from the same peer first completes the earlier one's
// description). A failure or the group's timeout names the operation, the
// peer (its group and global rank) and the group.
#pragma once
#include <c10/core/Device.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"

namespace accel {

class TensorExchange {
 public:
  // `comm` must offer point-to-point transfers (point_to_point()); `name`
  // and `ranks` (the members' global ranks, in group rank order) name the
  // group in errors.
  TensorExchange(std::shared_ptr<Communicator> comm, std::string name, std::vector<int> ranks);

  class Receive;

  // Starts sending `t` (its values, detached) to group rank `to`; returns at
  // once. The pending op holds the bytes until it completes.
  std::unique_ptr<PendingOp> isend(const at::Tensor& t, int to);
  // Starts receiving from group rank `from`: into `into` (contiguous, the
  // dtype and shape the sender sends) when given, else into a new tensor of
  // the sender's dtype and shape, on `device`.
  std::shared_ptr<Receive> irecv(int from, const std::optional<at::Tensor>& into, c10::Device device);
  void send(const at::Tensor& t, int to);
  at::Tensor recv(int from, const std::optional<at::Tensor>& into, c10::Device device);

  // "rank 1 (global rank 3) of group 'mesh.pp' (global ranks 1, 3)".
  std::string peer_name(int group_rank) const;

  struct Channels;  // the group and, per peer, the receives whose bytes are not yet posted

 private:
  std::shared_ptr<Channels> channels_;
};

class TensorExchange::Receive {
 public:
  // Completes the receive and returns the tensor (`into` when given).
  // Throws CollectiveMismatch when the sender's dtype or shape is not
  // `into`'s; a second wait returns the same tensor.
  at::Tensor wait();

  struct State;
  explicit Receive(std::shared_ptr<State> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<State> state_;
};

}  // namespace accel
