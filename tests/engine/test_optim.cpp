// Optimizers against PyTorch 1.13 (torch.optim, single-tensor path, the CPU
// default), on the problem of optim_problem.h.
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/optim/adam.h"
#include "engine/optim/sgd.h"
#include "tests/engine/optim_problem.h"

using accel::optim::Adam;
using accel::optim::AdamW;
using accel::optim::Optimizer;
using accel::optim::OptionMap;
using accel::optim::ParamGroup;
using accel::optim::SGD;
using accel::optim::StateDict;

using accel::optim::testing::check_params;
using accel::optim::testing::keys;
using accel::optim::testing::Problem;

namespace {

const at::Tensor* find(const StateDict& dict, const std::string& key) {
  for (const auto& [k, t] : dict)
    if (k == key) return &t;
  return nullptr;
}

StateDict without(const StateDict& dict, const std::string& key) {
  StateDict out;
  for (const auto& entry : dict)
    if (entry.first != key) out.push_back(entry);
  return out;
}

StateDict replaced(const StateDict& dict, const std::string& key, const at::Tensor& value) {
  StateDict out = dict;
  for (auto& entry : out)
    if (entry.first == key) entry.second = value;
  return out;
}

}  // namespace

TEST_CASE("SGD matches PyTorch", "[optim][sgd]") {
  Problem problem;
  SECTION("plain") {
    // run(lambda a, b: O.SGD([a, b], lr=0.1), 3)
    SGD opt(problem.params(), {{"lr", 0.1}});
    problem.run(opt, 0, 3);
    check_params(problem, {0.325599998, -0.593600035, -0.0208000019, 1.48399997, -0.191199988,
                           0.291200042, 0.16960001, -0.135200009, 0.383999974, 1.08159995});
  }
  SECTION("momentum, dampening and weight decay") {
    // run(lambda a, b: O.SGD([a, b], lr=0.1, momentum=0.9, dampening=0.1,
    //                        weight_decay=0.01), 4)
    SGD opt(problem.params(),
            {{"lr", 0.1}, {"momentum", 0.9}, {"dampening", 0.1}, {"weight_decay", 0.01}});
    problem.run(opt, 0, 4);
    check_params(problem, {0.0434340127, 0.364690751, -0.532292366, 0.654382706, 0.610227287,
                           -0.993928552, 0.274252087, 0.280037522, -0.43870607, 0.408846051});
  }
  SECTION("nesterov") {
    // run(lambda a, b: O.SGD([a, b], lr=0.05, momentum=0.9, nesterov=True,
    //                        weight_decay=0.05), 4)
    SGD opt(problem.params(),
            {{"lr", 0.05}, {"momentum", 0.9}, {"nesterov", 1}, {"weight_decay", 0.05}});
    problem.run(opt, 0, 4);
    check_params(problem, {0.154802382, -0.0681550577, -0.310480744, 0.991594553, 0.240751117,
                           -0.427730888, 0.213427484, 0.0843742341, -0.0836756751, 0.682688355});
  }
  SECTION("maximize") {
    // run(lambda a, b: O.SGD([a, b], lr=0.05, momentum=0.5, maximize=True), 3)
    SGD opt(problem.params(), {{"lr", 0.05}, {"momentum", 0.5}, {"maximize", 1}});
    problem.run(opt, 0, 3);
    check_params(problem, {0.657800078, -1.78780019, 0.597600043, 2.48399997, -1.19459999,
                           1.86360002, 0.0247999877, -0.661599994, 1.38399994, 1.89080012});
  }
  SECTION("parameter groups with their own lr and momentum") {
    // run(lambda a, b: O.SGD([{'params': [a]}, {'params': [b], 'lr': 0.01, 'momentum': 0.5}],
    //                        lr=0.1, momentum=0.9), 4)
    SGD opt(std::vector<ParamGroup>{{{problem.p0}, {}},
                                    {{problem.p1}, {{"lr", 0.01}, {"momentum", 0.5}}}},
            {{"lr", 0.1}, {"momentum", 0.9}});
    problem.run(opt, 0, 4);
    check_params(problem, {0.0235199966, 0.417279989, -0.569060028, 0.607500017, 0.655559957,
                           -1.07765996, 0.116078369, -0.336464107, 0.773705721, 1.39743447});
    CHECK(opt.option(0, "lr") == 0.1);
    CHECK(opt.option(1, "lr") == 0.01);
    CHECK(opt.option(1, "momentum") == 0.5);
  }
}

TEST_CASE("Adam and AdamW match PyTorch", "[optim][adam]") {
  Problem problem;
  SECTION("Adam") {
    // run(lambda a, b: O.Adam([a, b], lr=0.01), 5)
    Adam opt(problem.params(), {{"lr", 0.01}});
    problem.run(opt, 0, 5);
    check_params(problem, {0.449777067, -1.15026724, 0.249814987, 1.94986665, -0.65033251,
                           1.04990804, 0.14275457, -0.350803226, 0.849866748, 1.44984436});
  }
  SECTION("Adam with weight decay, amsgrad, betas and eps") {
    // run(lambda a, b: O.Adam([a, b], lr=0.02, betas=(0.8, 0.99), eps=1e-6,
    //                         weight_decay=0.1, amsgrad=True), 5)
    Adam opt(problem.params(), {{"lr", 0.02},
                                {"beta1", 0.8},
                                {"beta2", 0.99},
                                {"eps", 1e-6},
                                {"weight_decay", 0.1},
                                {"amsgrad", 1}});
    problem.run(opt, 0, 5);
    check_params(problem, {0.398897529, -1.10112703, 0.199316755, 1.89958572, -0.601409853,
                           0.999714851, 0.172559813, -0.303219169, 0.799566209, 1.39949286});
  }
  SECTION("Adam maximize") {
    // run(lambda a, b: O.Adam([a, b], lr=0.01, maximize=True), 3)
    Adam opt(problem.params(), {{"lr", 0.01}, {"maximize", 1}});
    problem.run(opt, 0, 3);
    check_params(problem, {0.530029476, -1.22996533, 0.330049008, 2.03003955, -0.72995764,
                           1.13002861, 0.0704919472, -0.429909587, 0.930039525, 1.53004444});
  }
  SECTION("AdamW with its default weight decay") {
    // run(lambda a, b: O.AdamW([a, b], lr=0.01), 5)
    AdamW opt(problem.params(), {{"lr", 0.01}});
    CHECK(opt.option(0, "weight_decay") == 1e-2);
    problem.run(opt, 0, 5);
    check_params(problem, {0.449537069, -1.14967799, 0.24967511, 1.94887733, -0.649992943,
                           1.04936826, 0.142698184, -0.350614011, 0.849427044, 1.44910491});
  }
  SECTION("AdamW amsgrad") {
    // run(lambda a, b: O.AdamW([a, b], lr=0.05, weight_decay=0.1, amsgrad=True), 5)
    AdamW opt(problem.params(), {{"lr", 0.05}, {"weight_decay", 0.1}, {"amsgrad", 1}});
    problem.run(opt, 0, 5);
    check_params(problem, {0.240276992, -0.925685823, 0.0451060906, 1.70320654, -0.438768387,
                           0.825332701, 0.245798036, -0.152716398, 0.630304217, 1.2155652});
  }
  SECTION("parameter groups with their own lr and weight decay") {
    // run(lambda a, b: O.Adam([{'params': [a]},
    //                          {'params': [b], 'lr': 0.001, 'weight_decay': 0.2}], lr=0.03), 4)
    Adam opt(std::vector<ParamGroup>{{{problem.p0}, {}},
                                     {{problem.p1}, {{"lr", 0.001}, {"weight_decay", 0.2}}}},
             {{"lr", 0.03}});
    problem.run(opt, 0, 4);
    check_params(problem, {0.379707128, -1.08059311, 0.179816887, 1.87988043, -0.580745161,
                           0.979921699, 0.103754103, -0.396028399, 0.895992398, 1.49599159});
  }
  SECTION("lr set by name between steps, as a scheduler does") {
    // run(lambda a, b: O.Adam([a, b], lr=0.01), 4,
    //     before=lambda k, o: k == 2 and o.param_groups[0].update(lr=0.05))
    Adam opt(problem.params(), {{"lr", 0.01}});
    problem.run(opt, 0, 4, [](int k, Optimizer& o) {
      if (k == 2) o.set_option(0, "lr", 0.05);
    });
    check_params(problem, {0.379522949, -1.08072722, 0.179626539, 1.87973738, -0.58090663,
                           0.979821205, 0.201254308, -0.282200277, 0.779737294, 1.37969029});
  }
}

// The foreach path runs the for-loop's operations on whole lists, so every
// value and every state tensor is the same, bit for bit; a parameter without
// a gradient at one step is skipped by both.
TEST_CASE("foreach steps equal the for-loop's exactly", "[optim][foreach]") {
  using accel::optim::Implementation;
  using Make = std::function<std::unique_ptr<Optimizer>(std::vector<at::Tensor>)>;
  const std::vector<std::pair<std::string, Make>> cases = {
      {"Adam", [](auto p) { return std::make_unique<Adam>(p, OptionMap{{"lr", 0.01}}); }},
      {"Adam with weight decay and amsgrad",
       [](auto p) {
         return std::make_unique<Adam>(p, OptionMap{{"lr", 0.02}, {"weight_decay", 0.1}, {"amsgrad", 1}});
       }},
      {"Adam maximize", [](auto p) { return std::make_unique<Adam>(p, OptionMap{{"lr", 0.01}, {"maximize", 1}}); }},
      {"AdamW", [](auto p) { return std::make_unique<AdamW>(p, OptionMap{{"lr", 0.05}}); }},
      {"AdamW amsgrad",
       [](auto p) { return std::make_unique<AdamW>(p, OptionMap{{"lr", 0.05}, {"amsgrad", 1}}); }},
      {"SGD", [](auto p) { return std::make_unique<SGD>(p, OptionMap{{"lr", 0.1}}); }},
      {"SGD with momentum, dampening and weight decay",
       [](auto p) {
         return std::make_unique<SGD>(
             p, OptionMap{{"lr", 0.1}, {"momentum", 0.9}, {"dampening", 0.2}, {"weight_decay", 0.05}});
       }},
      {"SGD nesterov maximize",
       [](auto p) {
         return std::make_unique<SGD>(p, OptionMap{{"lr", 0.1}, {"momentum", 0.9}, {"nesterov", 1}, {"maximize", 1}});
       }},
  };
  for (const auto& [name, make] : cases) {
    SECTION(name) {
      Problem loop_problem;
      Problem foreach_problem = loop_problem.copy();
      auto loop = make(loop_problem.params());
      auto foreach = make(foreach_problem.params());
      loop->set_implementation(Implementation::ForLoop);
      foreach->set_implementation(Implementation::Foreach);
      // p1 has no gradient at step 2: it is skipped, and its state lags p0's.
      auto drop_p1 = [](Problem& problem) {
        return [&problem](int k, Optimizer&) {
          if (k == 2) problem.p1.mutable_grad().reset();
        };
      };
      loop_problem.run(*loop, 0, 5, drop_p1(loop_problem));
      foreach_problem.run(*foreach, 0, 5, drop_p1(foreach_problem));
      CHECK(loop_problem.flat() == foreach_problem.flat());
      const StateDict a = loop->state_dict(), b = foreach->state_dict();
      REQUIRE(a.size() == b.size());
      for (std::size_t i = 0; i < a.size(); ++i) {
        CAPTURE(a[i].first);
        CHECK(a[i].first == b[i].first);
        CHECK(at::equal(a[i].second, b[i].second));
      }
    }
  }
}

TEST_CASE("an implementation is chosen as PyTorch's defaults choose, or refused by name", "[optim][foreach]") {
  using accel::optim::Implementation;
  Problem problem;
  Adam adam(problem.params(), {{"lr", 0.01}});
  CHECK(adam.implementation() == Implementation::Auto);
  adam.set_implementation(Implementation::Foreach);
  CHECK(adam.implementation() == Implementation::Foreach);
#if TORCH_VERSION_MAJOR < 2
  CHECK_THROWS_WITH(adam.set_implementation(Implementation::Fused),
                    Catch::Contains("Adam has no fused implementation") && Catch::Contains("LibTorch 2.x"));
#endif
  SGD sgd(problem.params(), {{"lr", 0.1}});
  CHECK_THROWS_WITH(sgd.set_implementation(Implementation::Fused), Catch::Contains("SGD has no fused implementation"));
}

TEST_CASE("parameters without a gradient are skipped", "[optim]") {
  Problem problem;
  const at::Tensor p1_before = problem.p1.detach().clone();
  Adam adam(problem.params(), {{"lr", 0.1}});
  SGD sgd(std::vector<at::Tensor>{problem.p0.detach().clone().requires_grad_()},
          {{"lr", 0.1}, {"momentum", 0.9}});
  problem.p0.mutable_grad() = at::ones_like(problem.p0);
  adam.step();
  sgd.step();

  CHECK(problem.p1.equal(p1_before));
  CHECK_FALSE(problem.p0.equal(Problem().p0));
  const StateDict state = adam.state_dict();
  CHECK(find(state, "state.0.exp_avg") != nullptr);
  CHECK(find(state, "state.1.step") == nullptr);
  CHECK(find(state, "state.1.exp_avg") == nullptr);
  CHECK(find(sgd.state_dict(), "state.0.momentum_buffer") == nullptr);
  // The update happened outside autograd: parameters stay leaves without history.
  CHECK(problem.p0.is_leaf());
  CHECK(problem.p0.requires_grad());
}

TEST_CASE("zero_grad releases or zeroes gradients", "[optim]") {
  Problem problem;
  SGD opt(problem.params(), {{"lr", 0.1}});
  problem.p0.mutable_grad() = at::ones_like(problem.p0);
  problem.p1.mutable_grad() = at::ones_like(problem.p1);

  const void* storage = problem.p1.grad().data_ptr();
  SECTION("set_to_none (the default)") {
    opt.zero_grad();
    CHECK_FALSE(problem.p0.grad().defined());
    CHECK_FALSE(problem.p1.grad().defined());
  }
  SECTION("in place") {
    opt.zero_grad(false);
    REQUIRE(problem.p1.grad().defined());
    CHECK(problem.p1.grad().data_ptr() == storage);
    CHECK(problem.p1.grad().eq(0).all().item<bool>());
    CHECK(problem.p0.grad().eq(0).all().item<bool>());
  }
}

TEST_CASE("options are addressed by name per group", "[optim]") {
  Problem problem;
  SGD opt(std::vector<ParamGroup>{{{problem.p0}, {}}}, {{"lr", 0.1}});
  opt.add_param_group({{problem.p1}, {{"lr", 0.5}, {"momentum", 0.9}}});

  REQUIRE(opt.param_groups().size() == 2);
  CHECK(opt.param_groups()[1].params.size() == 1);
  CHECK(opt.param_groups()[1].options.at("dampening") == 0.0);
  CHECK(opt.option(0, "momentum") == 0.0);
  CHECK(opt.option(1, "lr") == 0.5);
  opt.set_option(0, "lr", 0.25);
  CHECK(opt.option(0, "lr") == 0.25);
  CHECK(opt.option(1, "lr") == 0.5);
  CHECK(opt.defaults().at("lr") == 0.1);

  CHECK_THROWS_WITH(opt.set_option(0, "betas", 0.9),
                    Catch::Contains("no option 'betas'") && Catch::Contains("momentum"));
  CHECK_THROWS_WITH(opt.option(0, "learning_rate"), Catch::Contains("'learning_rate'"));
  CHECK_THROWS_WITH(opt.option(2, "lr"), Catch::Contains("no group 2"));
  CHECK_THROWS_WITH(opt.set_option(0, "lr", -1.0), Catch::Contains("invalid lr -1"));
  CHECK_THROWS_WITH(opt.set_option(0, "nesterov", 2.0),
                    Catch::Contains("'nesterov'") && Catch::Contains("0 or 1"));
  // nesterov needs momentum: group 0 has none, so the change is refused and undone.
  CHECK_THROWS_WITH(opt.set_option(0, "nesterov", 1.0), Catch::Contains("nesterov"));
  CHECK(opt.option(0, "nesterov") == 0.0);
  opt.set_option(1, "nesterov", 1.0);
  CHECK(opt.option(1, "nesterov") == 1.0);
}

TEST_CASE("bad constructor arguments are named", "[optim]") {
  Problem problem;
  CHECK_THROWS_WITH(SGD(problem.params()), Catch::Contains("'lr' is required"));
  CHECK_THROWS_WITH(SGD(problem.params(), {{"lr", 0.1}, {"momentun", 0.9}}),
                    Catch::Contains("no option 'momentun'"));
  CHECK_THROWS_WITH(Adam(problem.params(), {{"beta2", 1.0}}), Catch::Contains("invalid beta2"));
  CHECK_THROWS_WITH(AdamW(problem.params(), {{"eps", -1.0}}),
                    Catch::Contains("AdamW") && Catch::Contains("invalid eps"));
  CHECK_THROWS_WITH(Adam(std::vector<at::Tensor>{}), Catch::Contains("empty parameter list"));
  CHECK_THROWS_WITH(Adam(std::vector<at::Tensor>{problem.p0, problem.p1, problem.p0}),
                    Catch::Contains("parameter 2 appears more than once"));
  CHECK_THROWS_WITH(Adam(std::vector<at::Tensor>{problem.p0 * 2}), Catch::Contains("not a leaf"));
  Adam opt(std::vector<at::Tensor>{problem.p0});
  CHECK_THROWS_WITH(opt.add_param_group({{problem.p0}, {}}), Catch::Contains("more than once"));
  CHECK_THROWS_WITH(opt.add_param_group({{problem.p1}, {{"momentum", 0.9}}}),
                    Catch::Contains("Adam has no option 'momentum'"));
  CHECK(opt.param_groups().size() == 1);
}

TEST_CASE("state_dict has stable keys and 0-dim double hyper-parameters", "[optim]") {
  Problem problem;
  Adam opt(std::vector<ParamGroup>{{{problem.p0}, {}}, {{problem.p1}, {{"amsgrad", 1}}}},
           {{"lr", 0.01}});
  problem.run(opt, 0, 3);
  const StateDict dict = opt.state_dict();
  CHECK(keys(dict) == std::vector<std::string>{"state.0.step",
                                               "state.0.exp_avg",
                                               "state.0.exp_avg_sq",
                                               "state.1.step",
                                               "state.1.exp_avg",
                                               "state.1.exp_avg_sq",
                                               "state.1.max_exp_avg_sq",
                                               "param_groups.0.params",
                                               "param_groups.0.amsgrad",
                                               "param_groups.0.beta1",
                                               "param_groups.0.beta2",
                                               "param_groups.0.eps",
                                               "param_groups.0.lr",
                                               "param_groups.0.maximize",
                                               "param_groups.0.weight_decay",
                                               "param_groups.1.params",
                                               "param_groups.1.amsgrad",
                                               "param_groups.1.beta1",
                                               "param_groups.1.beta2",
                                               "param_groups.1.eps",
                                               "param_groups.1.lr",
                                               "param_groups.1.maximize",
                                               "param_groups.1.weight_decay"});
  const at::Tensor& step = *find(dict, "state.1.step");
  CHECK(step.dim() == 0);
  CHECK(step.scalar_type() == at::kFloat);
  CHECK(step.item<float>() == 3.0f);
  CHECK(find(dict, "state.0.exp_avg")->sizes() == problem.p0.sizes());
  const at::Tensor& lr = *find(dict, "param_groups.1.lr");
  CHECK(lr.dim() == 0);
  CHECK(lr.scalar_type() == at::kDouble);
  CHECK(lr.item<double>() == 0.01);
  CHECK(find(dict, "param_groups.1.amsgrad")->item<double>() == 1.0);
  CHECK(find(dict, "param_groups.1.params")->equal(at::tensor({int64_t{1}})));
}

TEST_CASE("state_dict round trip resumes exactly", "[optim]") {
  using Make = std::function<std::unique_ptr<Optimizer>(const Problem&)>;
  const std::vector<std::pair<std::string, Make>> makers = {
      {"SGD nesterov",
       [](const Problem& p) {
         return std::make_unique<SGD>(p.params(),
                                      OptionMap{{"lr", 0.05}, {"momentum", 0.9}, {"nesterov", 1}});
       }},
      {"Adam amsgrad, two groups",
       [](const Problem& p) {
         return std::make_unique<Adam>(
             std::vector<ParamGroup>{{{p.p0}, {}}, {{p.p1}, {{"lr", 0.001}}}},
             OptionMap{{"lr", 0.02}, {"amsgrad", 1}, {"weight_decay", 0.1}});
       }},
      {"AdamW", [](const Problem& p) { return std::make_unique<AdamW>(p.params(), OptionMap{}); }},
  };
  for (const auto& [label, make] : makers) {
    CAPTURE(label);
    Problem original;
    std::unique_ptr<Optimizer> uninterrupted = make(original);
    original.run(*uninterrupted, 0, 2);
    uninterrupted->set_option(0, "lr", 0.03);  // the loaded lr must win over the fresh one

    Problem resumed_problem = original.copy();
    std::unique_ptr<Optimizer> resumed = make(resumed_problem);
    resumed->load_state_dict(uninterrupted->state_dict());
    CHECK(resumed->option(0, "lr") == 0.03);

    original.run(*uninterrupted, 2, 3);
    resumed_problem.run(*resumed, 2, 3);
    CHECK(resumed_problem.p0.equal(original.p0));
    CHECK(resumed_problem.p1.equal(original.p1));
    // Loading copied the state: both optimizers stepped their own buffers.
    const StateDict resumed_dict = resumed->state_dict();
    for (const auto& [key, tensor] : uninterrupted->state_dict()) {
      CAPTURE(key);
      const at::Tensor* loaded = find(resumed_dict, key);
      REQUIRE(loaded != nullptr);
      CHECK(loaded->equal(tensor));
      CHECK_FALSE(loaded->is_same(tensor));
    }
  }
}

TEST_CASE("a state_dict taken mid-run resumes to PyTorch's uninterrupted result", "[optim]") {
  // run(lambda a, b: O.Adam([a, b], lr=0.02, betas=(0.8, 0.99), eps=1e-6,
  //                         weight_decay=0.1, amsgrad=True), 5)
  const OptionMap options = {{"lr", 0.02},  {"beta1", 0.8}, {"beta2", 0.99},
                             {"eps", 1e-6}, {"amsgrad", 1}, {"weight_decay", 0.1}};
  Problem first;
  Adam before(first.params(), options);
  first.run(before, 0, 2);
  Problem second = first.copy();
  Adam after(second.params(), options);
  after.load_state_dict(before.state_dict());
  second.run(after, 2, 3);
  check_params(second, {0.398897529, -1.10112703, 0.199316755, 1.89958572, -0.601409853,
                        0.999714851, 0.172559813, -0.303219169, 0.799566209, 1.39949286});
}

TEST_CASE("load_state_dict names the bad key and changes nothing", "[optim]") {
  Problem problem;
  Adam source(problem.params(), {{"lr", 0.01}});
  problem.run(source, 0, 2);
  const StateDict good = source.state_dict();

  Problem target_problem = problem.copy();
  Adam target(target_problem.params(), {{"lr", 0.5}});

  CHECK_THROWS_WITH(target.load_state_dict(without(good, "param_groups.0.lr")),
                    Catch::Contains("missing key 'param_groups.0.lr'"));
  CHECK_THROWS_WITH(target.load_state_dict(without(good, "state.1.exp_avg_sq")),
                    Catch::Contains("missing key 'state.1.exp_avg_sq'"));
  StateDict extra = good;
  extra.emplace_back("state.0.momentum_buffer", at::zeros({2, 3}));
  CHECK_THROWS_WITH(target.load_state_dict(extra),
                    Catch::Contains("unexpected key 'state.0.momentum_buffer'"));
  StateDict extra_group = good;
  extra_group.emplace_back("param_groups.1.lr", at::scalar_tensor(0.1, at::kDouble));
  CHECK_THROWS_WITH(target.load_state_dict(extra_group),
                    Catch::Contains("unexpected key 'param_groups.1.lr'") &&
                        Catch::Contains("1 parameter group(s)"));
  CHECK_THROWS_WITH(target.load_state_dict(replaced(good, "state.1.exp_avg", at::zeros({2, 2}))),
                    Catch::Contains("'state.1.exp_avg' has shape [2, 2]") &&
                        Catch::Contains("parameter 1 has shape [4]"));
  CHECK_THROWS_WITH(
      target.load_state_dict(replaced(good, "param_groups.0.params", at::tensor({int64_t{0}}))),
      Catch::Contains("'param_groups.0.params'"));
  CHECK_THROWS_WITH(target.load_state_dict(replaced(good, "param_groups.0.beta1",
                                                    at::scalar_tensor(1.5, at::kDouble))),
                    Catch::Contains("invalid beta1 1.5"));
  StateDict duplicated = good;
  duplicated.push_back(good.front());
  CHECK_THROWS_WITH(target.load_state_dict(duplicated),
                    Catch::Contains("duplicate key '" + good.front().first + "'"));

  // Every failed load left the target as it was: fresh, with its own lr.
  CHECK(target.option(0, "lr") == 0.5);
  CHECK(find(target.state_dict(), "state.0.step") == nullptr);
}

TEST_CASE("loaded state follows the parameter's dtype", "[optim]") {
  at::Tensor p = at::ones({3}, at::kDouble).requires_grad_();
  Adam opt(std::vector<at::Tensor>{p});
  const StateDict dict = {
      {"state.0.step", at::scalar_tensor(4.0, at::kDouble)},
      {"state.0.exp_avg", at::full({3}, 0.5f)},
      {"state.0.exp_avg_sq", at::full({3}, 0.25f)},
      {"param_groups.0.params", at::tensor({int64_t{0}})},
      {"param_groups.0.lr", at::scalar_tensor(0.1, at::kDouble)},
      {"param_groups.0.beta1", at::scalar_tensor(0.9, at::kDouble)},
      {"param_groups.0.beta2", at::scalar_tensor(0.999, at::kDouble)},
      {"param_groups.0.eps", at::scalar_tensor(1e-8, at::kDouble)},
      {"param_groups.0.weight_decay", at::scalar_tensor(0.0, at::kDouble)},
      {"param_groups.0.amsgrad", at::scalar_tensor(0.0, at::kDouble)},
      {"param_groups.0.maximize", at::scalar_tensor(0.0, at::kDouble)},
  };
  opt.load_state_dict(dict);
  const StateDict loaded = opt.state_dict();
  CHECK(find(loaded, "state.0.exp_avg")->scalar_type() == at::kDouble);
  CHECK(find(loaded, "state.0.exp_avg")->equal(at::full({3}, 0.5, at::kDouble)));
  const at::Tensor& step = *find(loaded, "state.0.step");
  CHECK(step.scalar_type() == at::kFloat);
  CHECK(step.item<float>() == 4.0f);
  p.mutable_grad() = at::ones_like(p);
  opt.step();
  CHECK(find(opt.state_dict(), "state.0.step")->item<float>() == 5.0f);
}
