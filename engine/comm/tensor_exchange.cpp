#include "engine/comm/tensor_exchange.h"

#include <ATen/ATen.h>

#include <deque>
#include <map>

#include "engine/comm/point_to_point.h"
#include "engine/tensor_description.h"

namespace accel {
namespace {

constexpr int kDescriptionTag = 1;
constexpr int kBytesTag = 2;
// A description: a mark (so that a stray message is not read as one), the
// dtype, the number of dims, the sizes.
constexpr int64_t kMark = 0x61636365'6c703270;  // "accelp2p"
constexpr int kMaxDims = 13;
constexpr int kDescriptionWords = 3 + kMaxDims;

struct Description {
  at::ScalarType dtype;
  std::vector<int64_t> sizes;
  std::string text() const { return dtype_text(dtype) + shape_text(sizes); }
};

at::Tensor description_of(const at::Tensor& t) {
  TORCH_CHECK(t.dim() <= kMaxDims, "send: a tensor of ", t.dim(), " dims; point-to-point sends take at most ",
              kMaxDims);
  at::Tensor words = at::zeros({kDescriptionWords}, at::kLong);
  int64_t* w = words.data_ptr<int64_t>();
  w[0] = kMark;
  w[1] = static_cast<int64_t>(t.scalar_type());
  w[2] = t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) w[3 + d] = t.size(d);
  return words;
}

// The description's fields, or nothing with `problem` set when the words are not one.
std::optional<Description> read_description(const at::Tensor& words, std::string& problem) {
  const int64_t* w = words.data_ptr<int64_t>();
  const int64_t ndim = w[2];
  if (w[0] != kMark || w[1] < 0 || w[1] >= static_cast<int64_t>(at::ScalarType::NumOptions) || ndim < 0 ||
      ndim > kMaxDims) {
    problem = "what arrived is not a tensor's description (the peer sent with something other than send/isend)";
    return std::nullopt;
  }
  Description d{static_cast<at::ScalarType>(w[1]), std::vector<int64_t>(w + 3, w + 3 + ndim)};
  for (int64_t s : d.sizes) {
    if (s < 0) {
      problem = "the description names a negative size";
      return std::nullopt;
    }
  }
  return d;
}

at::Tensor bytes_of(const at::Tensor& t) { return t.reshape({-1}).view(at::kByte); }

// Completes `op`, turning a failure into one naming what waited and on whom.
void complete(PendingOp& op, const std::string& what) {
  try {
    op.wait();
  } catch (const CollectiveTimeout& e) {
    throw CollectiveTimeout(what + " did not complete: " + e.what());
  } catch (const std::exception& e) {
    throw CollectiveError(what + " failed: " + e.what());
  }
}

}  // namespace

struct TensorExchange::Channels {
  std::shared_ptr<Communicator> comm;
  std::string name;
  std::vector<int> ranks;
  std::map<int, std::deque<std::shared_ptr<Receive::State>>> unposted;  // by peer, in start order

  std::string peer_name(int r) const {
    std::string members;
    for (int g : ranks) members += (members.empty() ? "" : ", ") + std::to_string(g);
    return "rank " + std::to_string(r) + " (global rank " + std::to_string(ranks.at(r)) + ") of group '" + name +
           "' (global ranks " + members + ")";
  }
  void check_peer(int peer, const char* what) const {
    TORCH_CHECK(peer >= 0 && peer < static_cast<int>(ranks.size()) && peer != comm->rank(), what, " rank ", peer,
                ": the peer must be another rank of group '", name, "' (", ranks.size(), " ranks, this one ",
                comm->rank(), ")");
  }
};

struct TensorExchange::Receive::State {
  std::shared_ptr<Channels> channels;
  int from;
  std::optional<at::Tensor> into;
  c10::Device device;
  at::Tensor description = at::empty({kDescriptionWords}, at::kLong);
  std::unique_ptr<PendingOp> description_op;
  at::Tensor result;  // defined once the bytes' receive is posted
  std::unique_ptr<PendingOp> bytes_op;
  std::string mismatch;
  bool done = false;

  std::string what() const { return "recv from " + channels->peer_name(from); }

  // Waits for the description and posts the bytes' receive: into `into`
  // when it matches, else into scratch of the sender's size.
  void post_bytes() {
    complete(*description_op, what() + " (the tensor's description)");
    std::string problem;
    std::optional<Description> sent = read_description(description, problem);
    if (!sent) throw CollectiveMismatch(what() + ": " + problem);
    const bool matches = !into || (into->scalar_type() == sent->dtype && into->sizes().vec() == sent->sizes);
    if (matches && into) {
      TORCH_CHECK(into->is_contiguous(), what(), ": recv receives into a contiguous tensor");
      result = *into;
    } else {
      result = at::empty(sent->sizes, at::TensorOptions().dtype(sent->dtype).device(into ? into->device() : device));
      if (!matches) {
        mismatch = what() + ": that rank sent " + sent->text() + " but this rank (" +
                   std::to_string(channels->comm->rank()) + ") receives into " + describe_tensor(*into);
      }
    }
    if (result.numel() > 0) {
      at::Tensor bytes = bytes_of(result);
      bytes_op = point_to_point(*channels->comm).irecv(bytes, from, kBytesTag);
    }
  }
};

TensorExchange::TensorExchange(std::shared_ptr<Communicator> comm, std::string name, std::vector<int> ranks)
    : channels_(std::make_shared<Channels>(Channels{std::move(comm), std::move(name), std::move(ranks), {}})) {
  point_to_point(*channels_->comm);  // refuses a communicator without point-to-point transfers now
}

std::string TensorExchange::peer_name(int group_rank) const { return channels_->peer_name(group_rank); }

namespace {

// Both messages of a send; the bytes are held until they have gone.
class PendingSend final : public PendingOp {
 public:
  PendingSend(std::string what, std::unique_ptr<PendingOp> description, std::unique_ptr<PendingOp> bytes)
      : what_(std::move(what)), description_(std::move(description)), bytes_(std::move(bytes)) {}
  void wait() override {
    if (description_) complete(*description_, what_ + " (the tensor's description)");
    if (bytes_) complete(*bytes_, what_);
    description_.reset();
    bytes_.reset();
  }

 private:
  std::string what_;
  std::unique_ptr<PendingOp> description_;
  std::unique_ptr<PendingOp> bytes_;
};

}  // namespace

std::unique_ptr<PendingOp> TensorExchange::isend(const at::Tensor& t, int to) {
  channels_->check_peer(to, "send to");
  PointToPoint& p2p = point_to_point(*channels_->comm);
  at::Tensor description = description_of(t);
  auto description_op = p2p.isend(description, to, kDescriptionTag);
  std::unique_ptr<PendingOp> bytes_op;
  if (t.numel() > 0) {
    at::Tensor values = t.detach().contiguous();
    bytes_op = p2p.isend(bytes_of(values), to, kBytesTag);
  }
  return std::make_unique<PendingSend>("send to " + channels_->peer_name(to), std::move(description_op),
                                       std::move(bytes_op));
}

std::shared_ptr<TensorExchange::Receive> TensorExchange::irecv(int from, const std::optional<at::Tensor>& into,
                                                              c10::Device device) {
  channels_->check_peer(from, "recv from");
  auto state = std::make_shared<Receive::State>(Receive::State{channels_, from, into, device});
  state->description_op = point_to_point(*channels_->comm).irecv(state->description, from, kDescriptionTag);
  channels_->unposted[from].push_back(state);
  return std::make_shared<Receive>(state);
}

at::Tensor TensorExchange::Receive::wait() {
  State& s = *state_;
  if (s.done) {
    if (!s.mismatch.empty()) throw CollectiveMismatch(s.mismatch);
    return s.result;
  }
  // This receive's bytes, and those of every earlier receive from the same
  // peer first: the bytes' messages match in order.
  auto& queue = s.channels->unposted[s.from];
  while (!s.result.defined()) {
    if (queue.empty()) throw CollectiveError(s.what() + ": its description failed to arrive before");
    std::shared_ptr<State> front = queue.front();
    queue.pop_front();
    front->post_bytes();
  }
  if (s.bytes_op) complete(*s.bytes_op, s.what());
  s.bytes_op.reset();
  s.done = true;
  if (!s.mismatch.empty()) throw CollectiveMismatch(s.mismatch);
  return s.result;
}

void TensorExchange::send(const at::Tensor& t, int to) { isend(t, to)->wait(); }

at::Tensor TensorExchange::recv(int from, const std::optional<at::Tensor>& into, c10::Device device) {
  return irecv(from, into, device)->wait();
}

}  // namespace accel
