#include "engine/comm/point_to_point.h"

#include <ATen/ATen.h>

#include <stdexcept>

#include "engine/comm/communicator.h"

namespace accel {

void PointToPoint::send_recv(const at::Tensor& send, int to, at::Tensor& recv, int from) {
  TORCH_CHECK(recv.is_contiguous(), "send_recv receives into a contiguous tensor");
  TORCH_CHECK(send.scalar_type() == recv.scalar_type(), "send_recv sends ", send.scalar_type(),
              " and receives into ", recv.scalar_type());
  constexpr int kTag = 0;
  std::unique_ptr<PendingOp> received = irecv(recv, from, kTag);
  std::unique_ptr<PendingOp> sent = isend(send, to, kTag);
  sent->wait();
  received->wait();
}

PointToPoint& point_to_point(Communicator& comm) {
  if (auto* p2p = dynamic_cast<PointToPoint*>(&comm)) return *p2p;
  throw std::invalid_argument("point-to-point send/recv (context parallelism's ring, a pipeline's stages) is offered "
                              "by the groups of accel.core.dist.new_group and the device mesh, and this " +
                              comm.backend() + " communicator is not one");
}

}  // namespace accel
