// Collectives over MPI (OpenMPI), for runs started by mpirun or srun, or by
// `accel-run --backend mpi`: over the world, or over a subgroup of it
// (engine/comm/mpi_group_communicator.h). Rank and size come from MPI itself.
#pragma once
#include <chrono>
#include <memory>

#include "engine/comm/communicator.h"
#include "engine/comm/point_to_point.h"

namespace accel {

class MpiCommunicator final : public Communicator, public PointToPoint {
 public:
  // The world. Initialises MPI unless something else in the process already
  // did; finalises it on destruction if it initialised it. Its collectives
  // wait without a deadline: the world's monitor (make_communicator) ends a
  // stalled run.
  MpiCommunicator();
  // A subgroup: `comm_handle` is its MPI_Comm as MPI_Comm_c2f gives it (so
  // that this header needs no mpi.h), freed on destruction. Nothing watches
  // a group's collectives, so each fails with a CollectiveTimeout after
  // `timeout`.
  MpiCommunicator(int comm_handle, std::chrono::milliseconds timeout);
  ~MpiCommunicator() override;

  int rank() const override;
  int size() const override;
  std::string backend() const override { return "mpi"; }
  void all_reduce(at::Tensor& t, ReduceOp op) override;
  std::unique_ptr<PendingOp> all_reduce_async(at::Tensor& t, ReduceOp op) override;
  void broadcast(at::Tensor& t, int root) override;
  std::vector<at::Tensor> all_gather(const at::Tensor& t) override;
  void reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) override;
  // Completes before returning, async or not: OpenMPI progresses a
  // nonblocking collective only inside MPI calls, so it would not overlap.
  void all_gather_into(at::Tensor& output, const at::Tensor& input) override;
  void barrier() override;
  // MPI_Isend and MPI_Irecv of the bits, unconverted.
  std::unique_ptr<PendingOp> isend(const at::Tensor& t, int to, int tag) override;
  std::unique_ptr<PendingOp> irecv(at::Tensor& t, int from, int tag) override;

 private:
  friend class MpiPendingOp;
  friend class MpiTransfer;
  // A point-to-point peer is a rank of the group other than this one.
  void check_peer(int peer, const char* what) const;
  // Waits for `request`, failing after timeout_ when there is one.
  void wait(void* request, const char* operation) const;

  int comm_handle_;
  int rank_ = 0;
  int size_ = 1;
  bool initialised_here_ = false;
  bool owns_comm_ = false;
  std::chrono::milliseconds timeout_{0};  // 0: no deadline
};

}  // namespace accel
