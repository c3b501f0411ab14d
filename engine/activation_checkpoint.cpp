#include "engine/activation_checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/SequenceNumber.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include "engine/compat.h"
#include "engine/gpu.h"
#include "engine/tensor_description.h"

namespace accel {
namespace {

using torch::autograd::Edge;
using torch::autograd::edge_list;
using torch::autograd::Node;
using torch::autograd::variable_list;

thread_local int recomputing = 0;
std::atomic<int64_t> recomputations{0};
std::atomic<int64_t> recomputations_elsewhere{0};

// The generators a block may draw from: the CPU one and the CUDA ones of
// its inputs' devices (as torch.utils.checkpoint picks them).
struct RandomState {
  at::Tensor cpu;
  std::vector<std::pair<int, at::Tensor>> cuda;

  static RandomState capture(const std::vector<int>& cuda_devices) {
    RandomState s;
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      s.cpu = gen.get_state();
    }
    for (int device : cuda_devices) s.cuda.emplace_back(device, gpu::rng_state(device));
    return s;
  }

  void restore() const {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(cpu);
    }
    for (const auto& [device, state] : cuda) gpu::set_rng_state(device, state);
  }
};

// The generators as the first run found them while the recomputation runs,
// then as backward found them: recomputing draws nothing for the recipe.
class ForkedRandomState {
 public:
  explicit ForkedRandomState(const RandomState& first_run) : now_(capture_like(first_run)) { first_run.restore(); }
  ~ForkedRandomState() { now_.restore(); }
  ForkedRandomState(const ForkedRandomState&) = delete;
  ForkedRandomState& operator=(const ForkedRandomState&) = delete;

 private:
  static RandomState capture_like(const RandomState& s) {
    std::vector<int> devices;
    for (const auto& entry : s.cuda) devices.push_back(entry.first);
    return RandomState::capture(devices);
  }
  RandomState now_;
};

struct AutocastState {
  bool cpu = false;
  bool cuda = false;
  at::ScalarType cpu_dtype = at::kBFloat16;
  at::ScalarType cuda_dtype = at::kHalf;

  static AutocastState capture() {
    return {compat::autocast_enabled(c10::DeviceType::CPU), compat::autocast_enabled(c10::DeviceType::CUDA),
            compat::autocast_dtype(c10::DeviceType::CPU), compat::autocast_dtype(c10::DeviceType::CUDA)};
  }
  void apply() const {
    compat::set_autocast_enabled(c10::DeviceType::CPU, cpu);
    compat::set_autocast_enabled(c10::DeviceType::CUDA, cuda);
    compat::set_autocast_dtype(c10::DeviceType::CPU, cpu_dtype);
    compat::set_autocast_dtype(c10::DeviceType::CUDA, cuda_dtype);
  }
};

// Autocast as `state` says, without its cache of cast weights, while it
// lives. Without the cache each run casts the weights it uses itself: a
// cast cached by the first run would be a node of the graph it drops, and a
// use of that weight after the block would backpropagate into it; one cached
// before the block would tie the recomputation to it.
class AutocastScope {
 public:
  explicit AutocastScope(const AutocastState& state)
      : previous_(AutocastState::capture()), cache_was_enabled_(at::autocast::is_autocast_cache_enabled()) {
    state.apply();
    at::autocast::set_autocast_cache_enabled(false);
  }
  ~AutocastScope() {
    at::autocast::set_autocast_cache_enabled(cache_was_enabled_);
    previous_.apply();
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  AutocastState previous_;
  bool cache_was_enabled_;
};

struct RecomputingScope {
  RecomputingScope() { ++recomputing; }
  ~RecomputingScope() { --recomputing; }
};

// The inputs as the block gets them: tensors of their own, so that its
// graph ends at them and not in the graph that made them.
std::vector<at::Tensor> detached(const std::vector<at::Tensor>& inputs) {
  std::vector<at::Tensor> out;
  out.reserve(inputs.size());
  for (const at::Tensor& t : inputs) {
    at::Tensor d = t.detach();
    if (t.requires_grad()) d.requires_grad_(true);
    out.push_back(std::move(d));
  }
  return out;
}

// A block's graph, walked from its outputs: the gradient accumulators it
// ends at other than its inputs' (the parameters it uses: where its
// gradients leave it), and the nodes the block made, whose saved tensors
// are its activations. A node is the block's when this thread made it from
// the sequence number the block started at (autograd numbers nodes per
// thread). A node made before (a tensor the block took from a table or an
// upvalue, not as an argument) is walked through, down to the leaves: its
// part of the gradients is computed with the block's, inside the node.
struct BlockGraph {
  edge_list leaves;
  std::vector<std::shared_ptr<Node>> made;
  bool reaches_older_nodes = false;

  BlockGraph(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs, uint64_t first_node) {
    std::set<const Node*> input_places;
    for (const at::Tensor& d : inputs) {
      if (d.requires_grad()) input_places.insert(torch::autograd::impl::gradient_edge(d).function.get());
    }
    const uint64_t thread = at::RecordFunction::currentThreadId();
    std::set<const Node*> seen;
    edge_list stack;
    for (const at::Tensor& out : outputs) {
      if (out.defined() && out.requires_grad()) stack.push_back(torch::autograd::impl::gradient_edge(out));
    }
    while (!stack.empty()) {
      Edge edge = std::move(stack.back());
      stack.pop_back();
      const Node* n = edge.function.get();
      if (!n || input_places.count(n) || !seen.insert(n).second) continue;
      if (dynamic_cast<const torch::autograd::AccumulateGrad*>(n)) {
        leaves.push_back(std::move(edge));
        continue;
      }
      if (n->sequence_nr() >= first_node && n->thread_id() == thread) {
        made.push_back(edge.function);
      } else {
        reaches_older_nodes = true;
      }
      for (const Edge& next : n->next_edges()) stack.push_back(next);
    }
  }

  void release_saved_tensors() const {
    for (const auto& node : made) node->release_variables();
  }
};

// What a differentiable output was the first time, to check the recomputation.
struct OutputFacts {
  size_t position = 0;  // among the block's tensors
  std::vector<int64_t> sizes;
  at::ScalarType dtype = at::kFloat;
  at::Device device = at::kCPU;
};

// The node of a checkpointed block's outputs. Its next edges are the inputs'
// places (one per input, invalid for one that needs no gradient), then the
// accumulators of the first run's graph.
class CheckpointBackward : public Node {
 public:
  CheckpointBackward(std::vector<at::Tensor> inputs, std::vector<int64_t> input_versions, RandomState random,
                     AutocastState autocast, CheckpointedBlock recompute, size_t num_tensors,
                     bool reaches_older_nodes)
      : num_inputs_(inputs.size()),
        inputs_(std::move(inputs)),
        input_versions_(std::move(input_versions)),
        random_(std::move(random)),
        autocast_(autocast),
        recompute_(std::move(recompute)),
        num_tensors_(num_tensors),
        reaches_older_nodes_(reaches_older_nodes),
        made_on_(std::this_thread::get_id()) {}

  std::string name() const override { return "CheckpointBackward"; }

  void add_output(const at::Tensor& first_run, size_t position) {
    outputs_.push_back({position, first_run.sizes().vec(), first_run.scalar_type(), first_run.device()});
  }

  void release_variables() override {
    inputs_.clear();
    recompute_ = nullptr;
  }

  variable_list apply(variable_list&& grads) override {
    variable_list result(num_outputs());
    const auto defined = [](const at::Tensor& g) { return g.defined(); };
    if (std::none_of(grads.begin(), grads.end(), defined)) return result;  // no gradient reached the block
    TORCH_CHECK(recompute_, "accel.checkpoint: backward ran through a checkpointed block a second time; "
                            "its first backward freed it (pass retain_graph = true to the first)");
    check_inputs_unchanged();
    // The block's inputs again, needing a gradient where the given ones did.
    std::vector<at::Tensor> inputs;
    for (size_t k = 0; k < num_inputs_; ++k) {
      inputs.push_back(inputs_[k].detach().requires_grad_(next_edge(k).is_valid()));
    }
    std::vector<at::Tensor> tensors;
    const uint64_t first_node = at::sequence_number::peek();
    {
      RecomputingScope scope;
      ForkedRandomState random(random_);
      AutocastScope autocast(autocast_);
      at::AutoGradMode grad(true);
      ++recomputations;
      if (std::this_thread::get_id() != made_on_) ++recomputations_elsewhere;
      tensors = recompute_(inputs);
    }
    check_recomputed(tensors);
    edge_list roots;
    variable_list root_grads;
    for (size_t i = 0; i < outputs_.size(); ++i) {
      if (!grads[i].defined()) continue;
      roots.push_back(torch::autograd::impl::gradient_edge(tensors[outputs_[i].position]));
      root_grads.push_back(std::move(grads[i]));
    }
    // The places to take gradients at, and which of this node's edges each is.
    edge_list places;
    std::vector<size_t> edge_of;
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (!inputs[k].requires_grad()) continue;
      places.push_back(torch::autograd::impl::gradient_edge(inputs[k]));
      edge_of.push_back(k);
    }
    for (size_t e = num_inputs_; e < num_outputs(); ++e) {
      places.push_back(next_edge(e));
      edge_of.push_back(e);
    }
    // The nested pass frees what each node saved as it goes, unless it
    // also runs nodes from before the block, which the outer pass still
    // needs: then the recomputed graph's saved tensors go after it.
    variable_list taken = torch::autograd::Engine::get_default_engine().execute(
        roots, root_grads, /*keep_graph=*/reaches_older_nodes_, /*create_graph=*/false, /*accumulate_grad=*/false,
        places);
    if (reaches_older_nodes_) BlockGraph(tensors, inputs, first_node).release_saved_tensors();
    for (size_t j = 0; j < taken.size(); ++j) result[edge_of[j]] = std::move(taken[j]);
    return result;
  }

 private:
  void check_inputs_unchanged() const {
    for (size_t k = 0; k < inputs_.size(); ++k) {
      TORCH_CHECK(inputs_[k]._version() == input_versions_[k], "accel.checkpoint: tensor argument ", k + 1, " (",
                  describe_tensor(inputs_[k]),
                  ") was modified in place since the checkpointed call (by the function or after it); "
                  "recomputing the block would read the new values (clone it before changing it)");
    }
  }

  void check_recomputed(const std::vector<at::Tensor>& tensors) const {
    TORCH_CHECK(tensors.size() == num_tensors_, "accel.checkpoint: the recomputation returned ", tensors.size(),
                " tensors, the first run ", num_tensors_,
                "; a checkpointed function must compute the same thing both times");
    for (const OutputFacts& out : outputs_) {
      const at::Tensor& t = tensors[out.position];
      const bool same = t.defined() && t.requires_grad() && t.sizes() == c10::IntArrayRef(out.sizes) &&
                        t.scalar_type() == out.dtype && t.device() == out.device;
      if (same) continue;
      std::ostringstream first;
      first << dtype_text(out.dtype) << shape_text(out.sizes) << " on " << out.device;
      std::ostringstream now;
      if (!t.defined()) {
        now << "nothing";
      } else {
        now << describe_tensor(t) << " on " << t.device() << (t.requires_grad() ? "" : " needing no gradient");
      }
      TORCH_CHECK(false, "accel.checkpoint: tensor result ", out.position + 1, " was ", first.str(),
                  " in the first run and ", now.str(),
                  " when recomputed; a checkpointed function must compute the same thing both times "
                  "(random and autocast state are restored, other state is not)");
    }
  }

  size_t num_inputs_;
  // The arguments' data without their history; their edges say which need a gradient.
  std::vector<at::Tensor> inputs_;
  std::vector<int64_t> input_versions_;
  RandomState random_;
  AutocastState autocast_;
  CheckpointedBlock recompute_;
  size_t num_tensors_;
  bool reaches_older_nodes_;
  std::vector<OutputFacts> outputs_;  // this node's inputs, in order
  std::thread::id made_on_;
};

std::vector<int> cuda_devices_of(const std::vector<at::Tensor>& inputs) {
  std::vector<int> devices;
  for (const at::Tensor& t : inputs) {
    if (!t.is_cuda()) continue;
    const int index = t.device().index();
    if (std::find(devices.begin(), devices.end(), index) == devices.end()) devices.push_back(index);
  }
  return devices;
}

}  // namespace

std::vector<at::Tensor> checkpoint(const std::vector<at::Tensor>& inputs, const CheckpointedBlock& first_run,
                                   CheckpointedBlock recompute) {
  if (!at::GradMode::is_enabled()) return first_run(inputs);
  std::vector<at::Tensor> run_inputs = detached(inputs);
  std::vector<int64_t> versions;
  for (const at::Tensor& t : inputs) versions.push_back(t._version());
  RandomState random = RandomState::capture(cuda_devices_of(inputs));
  const AutocastState autocast = AutocastState::capture();
  const uint64_t first_node = at::sequence_number::peek();
  std::vector<at::Tensor> tensors;
  {
    AutocastScope scope(autocast);
    tensors = first_run(run_inputs);
  }
  BlockGraph graph(tensors, run_inputs, first_node);
  // What the block's graph saved goes now, not when the tensors holding it
  // are collected.
  graph.release_saved_tensors();

  std::vector<at::Tensor> saved;
  for (const at::Tensor& t : inputs) saved.push_back(t.detach());
  auto node = std::shared_ptr<CheckpointBackward>(
      new CheckpointBackward(std::move(saved), std::move(versions), std::move(random), autocast,
                             std::move(recompute), tensors.size(), graph.reaches_older_nodes),
      torch::autograd::deleteNode);
  edge_list edges;
  for (const at::Tensor& t : inputs) {
    edges.push_back(t.requires_grad() ? torch::autograd::impl::gradient_edge(t) : Edge());
  }
  edges.insert(edges.end(), graph.leaves.begin(), graph.leaves.end());
  node->set_next_edges(std::move(edges));

  std::vector<at::Tensor> outputs;
  outputs.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const at::Tensor& t = tensors[i];
    if (!t.defined() || !t.requires_grad()) {
      outputs.push_back(t);
      continue;
    }
    at::Tensor out = t.detach();
    node->add_output(t, i);
    torch::autograd::create_gradient_edge(out, node);
    outputs.push_back(std::move(out));
  }
  return outputs;
}

bool recomputing_activations() { return recomputing > 0; }

RecomputationCounts recomputation_counts() { return {recomputations.load(), recomputations_elsewhere.load()}; }

}  // namespace accel
