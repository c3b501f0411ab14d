#include "engine/comm/mpi_communicator.h"

#include <ATen/ATen.h>

// The C API only: OpenMPI's C++ bindings would need libmpi_cxx at run time.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <limits>
#include <string>
#include <thread>

#include "engine/comm/flat_collective_args.h"

namespace accel {
namespace {

void check(int code, const char* operation) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw CollectiveError(std::string("mpi ") + operation + " failed: " + std::string(text, length));
}

MPI_Datatype mpi_type(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kLong: return MPI_INT64_T;
    case at::kInt: return MPI_INT32_T;
    case at::kShort: return MPI_INT16_T;
    case at::kChar: return MPI_INT8_T;
    case at::kByte: return MPI_UINT8_T;
    default:
      TORCH_CHECK(false, "the mpi backend has no type for ", type);
  }
}

// An unsigned type as wide as `t`'s elements: a gather moves bits, so it
// carries every dtype (bfloat16, bool) unconverted.
MPI_Datatype bits_type(const at::Tensor& t) {
  switch (t.element_size()) {
    case 1: return MPI_UINT8_T;
    case 2: return MPI_UINT16_T;
    case 4: return MPI_UINT32_T;
    case 8: return MPI_UINT64_T;
    default:
      TORCH_CHECK(false, "the mpi backend cannot gather ", t.scalar_type(), " (", t.element_size(),
                  "-byte elements)");
  }
}

// MPI counts elements in an int.
int mpi_count(int64_t count, const char* operation) {
  TORCH_CHECK(count <= std::numeric_limits<int>::max(), "mpi ", operation, ": ", count,
              " elements per rank are more than MPI can count (", std::numeric_limits<int>::max(), ")");
  return static_cast<int>(count);
}

// MPI has no bfloat16, float16 or bool: such tensors travel as float32 or
// uint8 and are converted back.
at::ScalarType wire_type(at::ScalarType type) {
  if (type == at::kBFloat16 || type == at::kHalf) return at::kFloat;
  if (type == at::kBool) return at::kByte;
  return type;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Average:
      return MPI_SUM;
    case ReduceOp::Max:
      return MPI_MAX;
    case ReduceOp::Min:
      return MPI_MIN;
  }
  TORCH_CHECK(false, "unknown reduce op");
}

}  // namespace

// An all-reduce in flight: the communicator waits for it (with its deadline),
// then the result leaves the wire type and is averaged.
class MpiPendingOp final : public PendingOp {
 public:
  MpiPendingOp(const MpiCommunicator& comm, MPI_Request request, at::Tensor target, at::Tensor wire,
               int average_over)
      : comm_(comm), request_(request), target_(std::move(target)), wire_(std::move(wire)),
        average_over_(average_over) {}
  void wait() override {
    comm_.wait(&request_, "all_reduce");
    if (!wire_.is_same(target_)) target_.copy_(wire_);
    if (average_over_ > 1) target_.div_(average_over_);
  }

 private:
  const MpiCommunicator& comm_;
  MPI_Request request_;
  at::Tensor target_;
  at::Tensor wire_;
  int average_over_;
};

// A send or receive in flight; it holds its tensor until it completes.
class MpiTransfer final : public PendingOp {
 public:
  MpiTransfer(const MpiCommunicator& comm, MPI_Request request, at::Tensor held, const char* operation)
      : comm_(comm), request_(request), held_(std::move(held)), operation_(operation) {}
  void wait() override { comm_.wait(&request_, operation_); }

 private:
  const MpiCommunicator& comm_;
  MPI_Request request_;
  at::Tensor held_;
  const char* operation_;
};

namespace {

MPI_Comm comm_of(int handle) { return MPI_Comm_f2c(handle); }

}  // namespace

MpiCommunicator::MpiCommunicator() {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    // Collectives come from the training thread only (CPU autograd runs its
    // hooks on the caller), so serialised calls are enough.
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "init");
    initialised_here_ = true;
  }
  comm_handle_ = MPI_Comm_c2f(MPI_COMM_WORLD);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiCommunicator::MpiCommunicator(int comm_handle, std::chrono::milliseconds timeout)
    : comm_handle_(comm_handle), owns_comm_(true), timeout_(timeout) {
  MPI_Comm_rank(comm_of(comm_handle_), &rank_);
  MPI_Comm_size(comm_of(comm_handle_), &size_);
}

MpiCommunicator::~MpiCommunicator() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (finalised) return;
  if (owns_comm_) {
    MPI_Comm comm = comm_of(comm_handle_);
    MPI_Comm_free(&comm);
  }
  if (initialised_here_) MPI_Finalize();
}

void MpiCommunicator::wait(void* pending, const char* operation) const {
  auto* request = static_cast<MPI_Request*>(pending);
  if (timeout_.count() == 0) {
    check(MPI_Wait(request, MPI_STATUS_IGNORE), operation);
    return;
  }
  // MPI has no deadline of its own; polling is what MPI_Wait does anyway.
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (int done = 0;;) {
    check(MPI_Test(request, &done, MPI_STATUS_IGNORE), operation);
    if (done) return;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw CollectiveTimeout("mpi group " + std::string(operation) + " (rank " + std::to_string(rank_) + " of " +
                              std::to_string(size_) + ") did not complete within " +
                              std::to_string(timeout_.count() / 1000) +
                              " s: a member of the group did not take part (--timeout)");
    }
    std::this_thread::yield();
  }
}

int MpiCommunicator::rank() const { return rank_; }
int MpiCommunicator::size() const { return size_; }

std::unique_ptr<PendingOp> MpiCommunicator::all_reduce_async(at::Tensor& t, ReduceOp op) {
  TORCH_CHECK(t.is_contiguous(), "all_reduce needs a contiguous tensor");
  ++counts_.all_reduce;
  at::Tensor wire = t.scalar_type() == wire_type(t.scalar_type()) ? t : t.to(wire_type(t.scalar_type()));
  MPI_Request request;
  check(MPI_Iallreduce(MPI_IN_PLACE, wire.data_ptr(), mpi_count(wire.numel(), "all_reduce"),
                       mpi_type(wire.scalar_type()), mpi_op(op), comm_of(comm_handle_), &request),
        "all_reduce");
  return std::make_unique<MpiPendingOp>(*this, request, t, wire, op == ReduceOp::Average ? size_ : 1);
}

void MpiCommunicator::all_reduce(at::Tensor& t, ReduceOp op) { all_reduce_async(t, op)->wait(); }

void MpiCommunicator::broadcast(at::Tensor& t, int root) {
  TORCH_CHECK(root >= 0 && root < size_, "broadcast from rank ", root, " in a world of ", size_, " ranks");
  TORCH_CHECK(t.is_contiguous(), "broadcast needs a contiguous tensor");
  ++counts_.broadcast;
  at::Tensor wire = t.scalar_type() == wire_type(t.scalar_type()) ? t : t.to(wire_type(t.scalar_type()));
  MPI_Request request;
  check(MPI_Ibcast(wire.data_ptr(), mpi_count(wire.numel(), "broadcast"), mpi_type(wire.scalar_type()), root,
                   comm_of(comm_handle_), &request),
        "broadcast");
  wait(&request, "broadcast");
  if (!wire.is_same(t)) t.copy_(wire);
}

std::vector<at::Tensor> MpiCommunicator::all_gather(const at::Tensor& t) {
  ++counts_.all_gather;
  counts_.all_gather_bytes += static_cast<int64_t>(t.nbytes()) * size_;
  at::Tensor wire = t.to(wire_type(t.scalar_type())).contiguous();
  std::vector<int64_t> shape{size_};
  for (int64_t s : wire.sizes()) shape.push_back(s);
  at::Tensor out = at::empty(shape, wire.options());
  const int count = mpi_count(wire.numel(), "all_gather");
  MPI_Request request;
  check(MPI_Iallgather(wire.data_ptr(), count, mpi_type(wire.scalar_type()), out.data_ptr(), count,
                       mpi_type(wire.scalar_type()), comm_of(comm_handle_), &request),
        "all_gather");
  wait(&request, "all_gather");
  std::vector<at::Tensor> parts;
  for (int r = 0; r < size_; ++r) parts.push_back(out[r].to(t.scalar_type()));
  return parts;
}

void MpiCommunicator::reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) {
  check_reduce_scatter_args(output, input, size_, op);
  ++counts_.reduce_scatter;
  counts_.reduce_scatter_bytes += static_cast<int64_t>(input.nbytes());
  const at::ScalarType wire = wire_type(output.scalar_type());
  at::Tensor wire_input = input.to(wire);
  at::Tensor wire_output =
      wire == output.scalar_type() ? output : at::empty(output.sizes(), output.options().dtype(wire));
  MPI_Request request;
  check(MPI_Ireduce_scatter_block(wire_input.data_ptr(), wire_output.data_ptr(),
                                  mpi_count(output.numel(), "reduce_scatter"), mpi_type(wire), mpi_op(op),
                                  comm_of(comm_handle_), &request),
        "reduce_scatter");
  wait(&request, "reduce_scatter");
  if (!wire_output.is_same(output)) output.copy_(wire_output);
  if (op == ReduceOp::Average) output.div_(size_);
}

void MpiCommunicator::all_gather_into(at::Tensor& output, const at::Tensor& input) {
  const bool in_place = check_all_gather_into_args(output, input, size_, rank_);
  ++counts_.all_gather;
  counts_.all_gather_bytes += static_cast<int64_t>(output.nbytes());
  const int count = mpi_count(input.numel(), "all_gather_into");
  const MPI_Datatype type = bits_type(output);
  MPI_Request request;
  check(MPI_Iallgather(in_place ? MPI_IN_PLACE : input.data_ptr(), count, type, output.data_ptr(), count, type,
                       comm_of(comm_handle_), &request),
        "all_gather_into");
  wait(&request, "all_gather_into");
}

void MpiCommunicator::barrier() {
  ++counts_.barrier;
  MPI_Request request;
  check(MPI_Ibarrier(comm_of(comm_handle_), &request), "barrier");
  wait(&request, "barrier");
}

void MpiCommunicator::check_peer(int peer, const char* what) const {
  TORCH_CHECK(peer >= 0 && peer < size_ && peer != rank_, what, " rank ", peer, " in a group of ", size_,
              " ranks, from its rank ", rank_, ": the peer must be another rank of the group");
}

std::unique_ptr<PendingOp> MpiCommunicator::isend(const at::Tensor& t, int to, int tag) {
  check_peer(to, "send to");
  at::Tensor outgoing = t.contiguous();
  MPI_Request request;
  check(MPI_Isend(outgoing.data_ptr(), mpi_count(outgoing.numel(), "send"), bits_type(outgoing), to, tag,
                  comm_of(comm_handle_), &request),
        "send");
  return std::make_unique<MpiTransfer>(*this, request, std::move(outgoing), "send");
}

std::unique_ptr<PendingOp> MpiCommunicator::irecv(at::Tensor& t, int from, int tag) {
  check_peer(from, "recv from");
  TORCH_CHECK(t.is_contiguous(), "recv receives into a contiguous tensor");
  MPI_Request request;
  check(MPI_Irecv(t.data_ptr(), mpi_count(t.numel(), "recv"), bits_type(t), from, tag, comm_of(comm_handle_),
                  &request),
        "recv");
  return std::make_unique<MpiTransfer>(*this, request, t, "recv");
}

}  // namespace accel
