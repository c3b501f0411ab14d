#include "engine/comm/point_to_point.h"

#include <stdexcept>

#include "engine/comm/communicator.h"

namespace accel {

PointToPoint& point_to_point(Communicator& comm) {
  if (auto* p2p = dynamic_cast<PointToPoint*>(&comm)) return *p2p;
  throw std::invalid_argument("point-to-point send/recv (the ring of context parallelism) is offered by the "
                              "groups of accel.core.dist.new_group and the device mesh, and this " +
                              comm.backend() + " communicator is not one");
}

}  // namespace accel
