#include "engine/comm/checked_communicator.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "engine/protocol/rank_list.h"
#include "engine/tensor_description.h"

namespace accel {
namespace {

enum class Op : int8_t { all_reduce = 1, broadcast, all_gather, barrier, reduce_scatter, all_gather_into };

constexpr int32_t kMagic = 0x61636364;  // tells a descriptor from stray bytes
constexpr int kMaxDims = 12;

// What one rank is about to do; 256 bytes on the wire.
struct Descriptor {
  int32_t magic = kMagic;
  int8_t op = 0;
  int8_t reduce = -1;  // ReduceOp of an all_reduce or reduce_scatter
  int8_t dtype = -1;   // c10::ScalarType; -1 without a tensor
  int8_t ndim = -1;    // -1 without a tensor
  int32_t root = -1;   // broadcast's source
  int32_t unused = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t numel = 0;
  char where[136] = {};  // recipe file:line, cut to fit
};
static_assert(sizeof(Descriptor) == 256, "the descriptor's size is part of the wire format");

const char* op_name(int8_t op) {
  switch (static_cast<Op>(op)) {
    case Op::all_reduce: return "all_reduce";
    case Op::broadcast: return "broadcast";
    case Op::all_gather: return "all_gather";
    case Op::barrier: return "barrier";
    case Op::reduce_scatter: return "reduce_scatter";
    case Op::all_gather_into: return "all_gather_into";
  }
  return "an unknown collective";
}

Descriptor describe(Op op, const at::Tensor* t, int8_t reduce, int32_t root) {
  Descriptor d;
  d.op = static_cast<int8_t>(op);
  d.reduce = reduce;
  d.root = root;
  if (t) {
    d.dtype = static_cast<int8_t>(t->scalar_type());
    d.ndim = static_cast<int8_t>(std::min<int64_t>(t->dim(), 127));
    for (int64_t i = 0; i < std::min<int64_t>(t->dim(), kMaxDims); ++i) d.sizes[i] = t->size(i);
    d.numel = t->numel();
  }
  std::string where = current_call_site();
  std::memcpy(d.where, where.data(), std::min(where.size(), sizeof(d.where) - 1));
  return d;
}

// What a rank passed, as messages show it: "all_gather of float32[2, 3]".
std::string signature(const Descriptor& d) {
  std::string text = op_name(d.op);
  if (d.ndim >= 0) {
    text += " of " + dtype_text(static_cast<c10::ScalarType>(d.dtype)) + "[";
    for (int i = 0; i < std::min<int>(d.ndim, kMaxDims); ++i) {
      text += (i ? ", " : "") + std::to_string(d.sizes[i]);
    }
    if (d.ndim > kMaxDims) text += ", ...";
    text += "]";
  }
  if (d.reduce >= 0) text += std::string(" (") + reduce_op_name(static_cast<ReduceOp>(d.reduce)) + ")";
  if (static_cast<Op>(d.op) == Op::broadcast) text += " from rank " + std::to_string(d.root);
  return text;
}

// Exchanges `mine` with every rank, counting the exchange in `checks`, and
// throws CollectiveMismatch when any rank's call differs in what matters for
// the operation.
void check_agreement(Communicator& inner, CollectiveCounts& checks, const Descriptor& mine) {
  at::Tensor bytes = at::empty({static_cast<int64_t>(sizeof(Descriptor))}, at::kByte);
  std::memcpy(bytes.data_ptr(), &mine, sizeof(Descriptor));
  ++checks.all_gather;
  std::vector<at::Tensor> parts = inner.all_gather(bytes);
  std::vector<Descriptor> all(parts.size());
  for (size_t r = 0; r < parts.size(); ++r) {
    std::memcpy(&all[r], parts[r].contiguous().data_ptr(), sizeof(Descriptor));
  }
  // Ranks grouped by what they passed; the line each called from is shown,
  // but differing lines alone are no error.
  std::map<std::string, std::vector<int>> groups;
  std::map<std::string, std::string> where;
  bool same_op = true;
  for (size_t r = 0; r < all.size(); ++r) {
    const Descriptor& d = all[r];
    std::string sig = d.magic == kMagic ? signature(d) : "something that is not a collective check";
    groups[sig].push_back(static_cast<int>(r));
    where.emplace(sig, std::string(d.where, strnlen(d.where, sizeof(d.where))));
    same_op = same_op && d.magic == kMagic && d.op == all[0].op;
  }
  if (groups.size() == 1) return;
  std::string message = same_op ? std::string(op_name(all[0].op)) + ": ranks passed different tensors or arguments: "
                                : "ranks called different collectives: ";
  bool first = true;
  for (const auto& [sig, ranks] : groups) {
    message += (first ? "" : "; ") + rank_list(ranks) + " called " + sig;
    if (!where[sig].empty()) message += " at " + where[sig];
    first = false;
  }
  throw CollectiveMismatch(message + " (checked because of --debug)");
}

}  // namespace

CheckedCommunicator::CheckedCommunicator(std::unique_ptr<Communicator> inner)
    : inner_(std::move(inner)) {}

void CheckedCommunicator::all_reduce(at::Tensor& t, ReduceOp op) {
  check_agreement(*inner_, checks_, describe(Op::all_reduce, &t, static_cast<int8_t>(op), -1));
  inner_->all_reduce(t, op);
}

std::unique_ptr<PendingOp> CheckedCommunicator::all_reduce_async(at::Tensor& t, ReduceOp op) {
  check_agreement(*inner_, checks_, describe(Op::all_reduce, &t, static_cast<int8_t>(op), -1));
  return inner_->all_reduce_async(t, op);
}

void CheckedCommunicator::broadcast(at::Tensor& t, int root) {
  check_agreement(*inner_, checks_, describe(Op::broadcast, &t, -1, root));
  inner_->broadcast(t, root);
}

std::vector<at::Tensor> CheckedCommunicator::all_gather(const at::Tensor& t) {
  check_agreement(*inner_, checks_, describe(Op::all_gather, &t, -1, -1));
  return inner_->all_gather(t);
}

void CheckedCommunicator::reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) {
  check_agreement(*inner_, checks_, describe(Op::reduce_scatter, &output, static_cast<int8_t>(op), -1));
  inner_->reduce_scatter(output, input, op);
}

void CheckedCommunicator::all_gather_into(at::Tensor& output, const at::Tensor& input) {
  check_agreement(*inner_, checks_, describe(Op::all_gather_into, &input, -1, -1));
  inner_->all_gather_into(output, input);
}

std::unique_ptr<PendingOp> CheckedCommunicator::all_gather_into_async(at::Tensor& output,
                                                                      const at::Tensor& input) {
  check_agreement(*inner_, checks_, describe(Op::all_gather_into, &input, -1, -1));
  return inner_->all_gather_into_async(output, input);
}

void CheckedCommunicator::barrier() {
  check_agreement(*inner_, checks_, describe(Op::barrier, nullptr, -1, -1));
  inner_->barrier();
}

}  // namespace accel
