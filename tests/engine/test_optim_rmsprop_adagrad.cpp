// RMSprop and Adagrad against PyTorch 1.13 (torch.optim, single-tensor path, the
// CPU default), on the problem of optim_problem.h.
#include <catch2/catch.hpp>
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "engine/optim/adagrad.h"
#include "engine/optim/rmsprop.h"
#include "tests/engine/optim_problem.h"

using accel::optim::Adagrad;
using accel::optim::Optimizer;
using accel::optim::ParamGroup;
using accel::optim::RMSprop;
using accel::optim::StateDict;

using accel::optim::testing::check_params;
using accel::optim::testing::keys;
using accel::optim::testing::Problem;

TEST_CASE("RMSprop matches PyTorch", "[optim][rmsprop]") {
  Problem problem;
  SECTION("defaults") {
    // run(lambda a, b: O.RMSprop([a, b], lr=0.01), 5)
    RMSprop opt(problem.params(), {{"lr", 0.01}});
    CHECK(opt.option(0, "alpha") == 0.99);
    CHECK(opt.option(0, "eps") == 1e-8);
    problem.run(opt, 0, 5);
    check_params(problem, {0.195241496, -0.904076636, -0.0144399665, 1.68156302, -0.410246313,
                           0.77930361, 0.146848932, -0.14948602, 0.581562877, 1.18306601});
  }
  SECTION("centered, with momentum, weight decay, alpha and eps") {
    // run(lambda a, b: O.RMSprop([a, b], lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.1,
    //                            momentum=0.8, centered=True), 5)
    RMSprop opt(problem.params(), {{"lr", 0.01},
                                   {"alpha", 0.9},
                                   {"eps", 1e-6},
                                   {"weight_decay", 0.1},
                                   {"momentum", 0.8},
                                   {"centered", 1}});
    problem.run(opt, 0, 5);
    check_params(problem, {0.201076195, -0.914703548, 0.000291831733, 1.69995296, -0.418225825,
                           0.799819171, 0.229837105, -0.138878882, 0.599974632, 1.20005977});
  }
  SECTION("maximize with momentum") {
    // run(lambda a, b: O.RMSprop([a, b], lr=0.02, momentum=0.5, maximize=True), 3)
    RMSprop opt(problem.params(), {{"lr", 0.02}, {"momentum", 0.5}, {"maximize", 1}});
    problem.run(opt, 0, 3);
    check_params(problem, {1.27667391, -1.90366936, 1.04503655, 2.7246418, -1.40761364, 1.810027,
                           -0.674788594, -1.12633944, 1.62464166, 2.23302841});
  }
  SECTION("parameter groups with their own lr and centered") {
    // run(lambda a, b: O.RMSprop([{'params': [a]}, {'params': [b], 'lr': 0.001, 'centered': True}],
    //                            lr=0.03), 4)
    RMSprop opt(std::vector<ParamGroup>{{{problem.p0}, {}},
                                        {{problem.p1}, {{"lr", 0.001}, {"centered", 1}}}},
                {{"lr", 0.03}});
    problem.run(opt, 0, 4);
    check_params(problem, {0.0513269827, -0.508707583, -0.331640691, 1.27676308, -0.0429832861,
                           0.329377949, 0.120405436, -0.373669714, 0.871086478, 1.47093129});
  }
  SECTION("lr set by name between steps, as a scheduler does") {
    // run(lambda a, b: O.RMSprop([a, b], lr=0.01), 4,
    //     before=lambda k, o: k == 2 and o.param_groups[0].update(lr=0.05))
    RMSprop opt(problem.params(), {{"lr", 0.01}});
    problem.run(opt, 0, 4, [](int k, Optimizer& o) {
      if (k == 2) o.set_option(0, "lr", 0.05);
    });
    check_params(problem, {0.0472556241, -0.605472386, -0.294888496, 1.35424221, -0.130706832,
                           0.427728027, 0.128283113, 0.0181149803, 0.254242241, 0.872779727});
  }
}

TEST_CASE("Adagrad matches PyTorch", "[optim][adagrad]") {
  Problem problem;
  SECTION("defaults") {
    // run(lambda a, b: O.Adagrad([a, b], lr=0.1), 5)
    Adagrad opt(problem.params(), {{"lr", 0.1}});
    CHECK(opt.option(0, "eps") == 1e-10);
    problem.run(opt, 0, 5);
    check_params(problem, {0.196410894, -0.905315995, -0.0131996982, 1.682827, -0.411459684,
                           0.780579627, 0.147690028, -0.150432751, 0.582826912, 1.18432152});
  }
  SECTION("lr decay, weight decay, initial accumulator and eps") {
    // run(lambda a, b: O.Adagrad([a, b], lr=0.1, lr_decay=0.05, weight_decay=0.1,
    //                            initial_accumulator_value=0.5, eps=1e-6), 5)
    Adagrad opt(problem.params(), {{"lr", 0.1},
                                   {"lr_decay", 0.05},
                                   {"weight_decay", 0.1},
                                   {"initial_accumulator_value", 0.5},
                                   {"eps", 1e-6}});
    problem.run(opt, 0, 5);
    check_params(problem, {0.267681897, -0.928684831, 0.0299717337, 1.71230555, -0.436385453,
                           0.806393921, 0.152724087, -0.18121165, 0.613346338, 1.21762657});
  }
  SECTION("maximize") {
    // run(lambda a, b: O.Adagrad([a, b], lr=0.05, maximize=True), 3)
    Adagrad opt(problem.params(), {{"lr", 0.05}, {"maximize", 1}});
    problem.run(opt, 0, 3);
    check_params(problem, {0.624996483, -1.31400478, 0.420448095, 2.11819506, -0.813964903,
                           1.21679521, -0.0127612706, -0.513747394, 1.01819503, 1.61907363});
  }
  SECTION("parameter groups with their own lr and lr_decay") {
    // run(lambda a, b: O.Adagrad([{'params': [a]}, {'params': [b], 'lr': 0.01, 'lr_decay': 0.5}],
    //                            lr=0.2), 4)
    Adagrad opt(std::vector<ParamGroup>{{{problem.p0}, {}},
                                        {{problem.p1}, {{"lr", 0.01}, {"lr_decay", 0.5}}}},
                {{"lr", 0.2}});
    problem.run(opt, 0, 4);
    check_params(problem, {0.0944960266, -0.709281445, -0.185297698, 1.4837631, -0.224131197,
                           0.567604423, 0.116015956, -0.381292552, 0.880063713, 1.47998583});
  }
}

TEST_CASE("RMSprop and Adagrad state dicts name their slots and resume exactly",
          "[optim][rmsprop][adagrad]") {
  SECTION("RMSprop holds momentum_buffer and grad_avg only when asked for") {
    Problem problem;
    RMSprop plain(problem.params(), {{"lr", 0.01}});
    problem.run(plain, 0, 1);
    const std::vector<std::string> plain_keys = keys(plain.state_dict());
    CHECK(std::count(plain_keys.begin(), plain_keys.end(), "state.0.square_avg") == 1);
    CHECK(std::count(plain_keys.begin(), plain_keys.end(), "state.0.momentum_buffer") == 0);
    CHECK(std::count(plain_keys.begin(), plain_keys.end(), "state.0.grad_avg") == 0);

    Problem other;
    RMSprop full(other.params(), {{"lr", 0.01}, {"momentum", 0.9}, {"centered", 1}});
    other.run(full, 0, 1);
    const std::vector<std::string> full_keys = keys(full.state_dict());
    CHECK(std::count(full_keys.begin(), full_keys.end(), "state.1.momentum_buffer") == 1);
    CHECK(std::count(full_keys.begin(), full_keys.end(), "state.1.grad_avg") == 1);
  }
  SECTION("a state dict taken mid-run resumes to PyTorch's uninterrupted result") {
    // The centered RMSprop case above, interrupted after 2 of its 5 steps.
    const accel::optim::OptionMap options{{"lr", 0.01}, {"alpha", 0.9}, {"eps", 1e-6},
                                          {"weight_decay", 0.1}, {"momentum", 0.8}, {"centered", 1}};
    Problem problem;
    RMSprop first(problem.params(), options);
    problem.run(first, 0, 2);
    StateDict saved;
    for (const auto& [key, tensor] : first.state_dict()) saved.emplace_back(key, tensor.clone());
    RMSprop second(problem.params(), {{"lr", 0.5}});
    second.load_state_dict(saved);
    problem.run(second, 2, 3);
    check_params(problem, {0.201076195, -0.914703548, 0.000291831733, 1.69995296, -0.418225825,
                           0.799819171, 0.229837105, -0.138878882, 0.599974632, 1.20005977});
  }
  SECTION("Adagrad resumes with its step count, which drives lr_decay") {
    const accel::optim::OptionMap options{{"lr", 0.1},
                                          {"lr_decay", 0.05},
                                          {"weight_decay", 0.1},
                                          {"initial_accumulator_value", 0.5},
                                          {"eps", 1e-6}};
    Problem problem;
    Adagrad first(problem.params(), options);
    problem.run(first, 0, 3);
    StateDict saved;
    for (const auto& [key, tensor] : first.state_dict()) saved.emplace_back(key, tensor.clone());
    Adagrad second(problem.params());
    second.load_state_dict(saved);
    CHECK(second.option(0, "lr_decay") == 0.05);
    problem.run(second, 3, 2);
    check_params(problem, {0.267681897, -0.928684831, 0.0299717337, 1.71230555, -0.436385453,
                           0.806393921, 0.152724087, -0.18121165, 0.613346338, 1.21762657});
  }
}

TEST_CASE("RMSprop and Adagrad refuse bad options by name", "[optim][rmsprop][adagrad]") {
  Problem problem;
  CHECK_THROWS_WITH(RMSprop(problem.params(), {{"alpha", -0.5}}),
                    Catch::Contains("invalid alpha -0.5"));
  CHECK_THROWS_WITH(RMSprop(problem.params(), {{"momentum", -1}}),
                    Catch::Contains("invalid momentum"));
  CHECK_THROWS_WITH(RMSprop(problem.params(), {{"centered", 2}}),
                    Catch::Contains("'centered' is a flag"));
  CHECK_THROWS_WITH(RMSprop(problem.params(), {{"betas", 0.9}}),
                    Catch::Contains("RMSprop has no option 'betas'"));
  CHECK_THROWS_WITH(Adagrad(problem.params(), {{"lr_decay", -0.1}}),
                    Catch::Contains("invalid lr_decay"));
  CHECK_THROWS_WITH(Adagrad(problem.params(), {{"initial_accumulator_value", -1}}),
                    Catch::Contains("invalid initial_accumulator_value"));
  CHECK_THROWS_WITH(Adagrad(problem.params(), {{"momentum", 0.9}}),
                    Catch::Contains("Adagrad has no option 'momentum'"));
  Adagrad opt(problem.params());
  CHECK_THROWS_WITH(opt.set_option(0, "eps", -1), Catch::Contains("invalid eps"));
  CHECK(opt.option(0, "eps") == 1e-10);
}
