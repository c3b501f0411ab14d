// Collectives over MPI (OpenMPI), for runs started by mpirun or srun, or by
// `accel-run --backend mpi`. Rank and size come from MPI itself.
#pragma once
#include <memory>

#include "engine/comm/communicator.h"

namespace accel {

class MpiCommunicator final : public Communicator {
 public:
  // Initialises MPI unless something else in the process already did;
  // finalises it on destruction if it initialised it.
  MpiCommunicator();
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

 private:
  int rank_ = 0;
  int size_ = 1;
  bool initialised_here_ = false;
};

}  // namespace accel
