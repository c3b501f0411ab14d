#include "engine/parallel/split_backward.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <stdexcept>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace accel {

using torch::autograd::Edge;
using torch::autograd::edge_list;
using torch::autograd::Node;
using torch::autograd::variable_list;

// The gradient that arrived at an intermediate in B (one per node input).
struct SplitBackward::Capture {
  variable_list grads;
};

namespace {

// Keeps what arrives at a node; weakly, so that a graph kept alive by
// something else does not keep the captures.
struct CaptureHook : torch::autograd::FunctionPreHook {
  explicit CaptureHook(std::weak_ptr<SplitBackward::Capture> into) : into_(std::move(into)) {}
  variable_list operator()(const variable_list& grads) override {
    if (auto capture = into_.lock()) capture->grads = grads;
    return grads;
  }
  std::weak_ptr<SplitBackward::Capture> into_;
};

// Every node reachable from `root`, children before parents.
std::vector<Node*> post_order(Node* root) {
  std::vector<Node*> order;
  std::unordered_set<Node*> seen{root};
  std::vector<std::pair<Node*, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->num_outputs()) {
      Node* child = node->next_edge(next++).function.get();
      if (child != nullptr && seen.insert(child).second) stack.emplace_back(child, 0);
      continue;
    }
    order.push_back(node);
    stack.pop_back();
  }
  return order;
}

}  // namespace

std::unique_ptr<SplitBackward> SplitBackward::input_backward(const at::Tensor& output, const at::Tensor& grad,
                                                             const at::Tensor& input,
                                                             const std::vector<at::Tensor>& params) {
  if (!output.requires_grad() || !output.grad_fn()) {
    throw std::invalid_argument("split backward: the output does not depend on anything that requires grad");
  }
  if (!input.is_leaf() || !input.requires_grad()) {
    throw std::invalid_argument("split backward: the input must be a leaf that requires grad (a stage's input)");
  }
  const Edge input_edge = torch::autograd::impl::gradient_edge(input);
  std::unordered_set<Node*> param_nodes;
  for (const at::Tensor& p : params) {
    if (p.requires_grad()) param_nodes.insert(torch::autograd::impl::gradient_edge(p).function.get());
  }
  // Which nodes reach the input, which reach a parameter.
  const std::vector<Node*> order = post_order(output.grad_fn().get());
  std::unordered_map<Node*, bool> reaches_input;
  std::unordered_map<Node*, bool> reaches_param;
  for (Node* node : order) {
    bool to_input = node == input_edge.function.get();
    bool to_param = param_nodes.count(node) > 0;
    for (const Edge& e : node->next_edges()) {
      if (!e.function) continue;
      to_input = to_input || reaches_input[e.function.get()];
      to_param = to_param || reaches_param[e.function.get()];
    }
    reaches_input[node] = to_input;
    reaches_param[node] = to_param;
  }
  std::unique_ptr<SplitBackward> split(new SplitBackward());
  for (Node* node : order) {
    if (!reaches_input[node]) continue;
    std::vector<size_t> weight_edges;
    for (size_t i = 0; i < node->num_outputs(); ++i) {
      Node* child = node->next_edge(i).function.get();
      if (child != nullptr && reaches_param[child] && !reaches_input[child]) weight_edges.push_back(i);
    }
    if (weight_edges.empty()) continue;
    auto capture = std::make_shared<Capture>();
    node->add_pre_hook(std::make_unique<CaptureHook>(capture));
    split->intermediates_.push_back({node->shared_from_this(), std::move(weight_edges), std::move(capture)});
  }
  at::Tensor seed = grad.defined() ? grad : at::ones_like(output);
  torch::autograd::Engine::get_default_engine().execute({torch::autograd::impl::gradient_edge(output)}, {seed},
                                                        /*keep_graph=*/true, /*create_graph=*/false,
                                                        /*accumulate_grad=*/true, {input_edge});
  // What only the input's gradient needed is done with.
  std::unordered_set<Node*> kept;
  for (const Intermediate& i : split->intermediates_) kept.insert(i.node.get());
  for (Node* node : order) {
    if (reaches_input[node] && kept.count(node) == 0) node->release_variables();
  }
  return split;
}

void SplitBackward::weight_backward() {
  if (done_) throw std::logic_error("split backward: the weight gradient was run already");
  done_ = true;
  edge_list roots;
  variable_list grads;
  for (Intermediate& i : intermediates_) {
    variable_list arrived = std::move(i.capture->grads);
    bool any = false;
    for (const at::Tensor& g : arrived) any = any || g.defined();
    if (!any) continue;  // nothing reached it in B
    // The node's edges into the input's path are cut (B is done with
    // them), so that its backward, which computes only the outputs whose
    // edges are valid (task_should_compute_output), gives the parameters'
    // part alone: a linear's weight gradient, not its input's again.
    std::vector<bool> weight(i.node->num_outputs(), false);
    for (size_t k : i.weight_edges) weight[k] = true;
    for (size_t k = 0; k < weight.size(); ++k) {
      if (!weight[k]) i.node->next_edges()[k] = Edge();  // not set_next_edge: the node has parents
    }
    // Undefined gradients of a node's other outputs are zeros to it.
    variable_list computed = (*i.node)(std::move(arrived));
    for (size_t k : i.weight_edges) {
      if (!computed[k].defined()) continue;
      roots.push_back(i.node->next_edge(k));
      grads.push_back(std::move(computed[k]));
    }
    i.node->release_variables();
  }
  if (!roots.empty()) {
    torch::autograd::Engine::get_default_engine().execute(roots, grads, /*keep_graph=*/false, /*create_graph=*/false,
                                                          /*accumulate_grad=*/true, {});
  }
  intermediates_.clear();
}

SplitBackward::~SplitBackward() = default;

}  // namespace accel
