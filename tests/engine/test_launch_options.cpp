// accel-run's command line: defaults, both value spellings, options on either
// side of the recipe, recipe arguments after `--`, and errors that name the
// option or value at fault.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/protocol/launch_options.h"

namespace {

using accel::LaunchOptions;
using accel::LaunchOptionsError;
using accel::parse_launch_options;
using Args = std::vector<std::string>;

constexpr int kCores = 8;

LaunchOptions parse(const Args& args) { return parse_launch_options(args, kCores); }

// The message of the error parsing `args` raises; fails the test if none.
std::string error_of(const Args& args) {
  try {
    parse(args);
  } catch (const LaunchOptionsError& error) {
    return error.what();
  }
  FAIL("no error for the command line");
  return {};
}

}  // namespace

TEST_CASE("a bare recipe gets the defaults", "[launch_options]") {
  LaunchOptions o = parse({"train.lua"});
  CHECK(o.recipe == "train.lua");
  CHECK(o.recipe_args.empty());
  CHECK(o.nproc == 1);
  CHECK(o.threads == kCores);
  CHECK(o.master_addr == "127.0.0.1");
  CHECK(o.master_port == 0);
  CHECK(o.backend == "gloo");
  CHECK(o.grace_period_s == 5);
  CHECK(o.nnodes == 1);
  CHECK(o.node_rank == 0);
  CHECK(o.timeout_s == 1800);
  CHECK(o.stall_report_s == 60);
  CHECK(o.max_restarts == 0);
  CHECK_FALSE(o.debug);
  CHECK(o.log_dir.empty());
  CHECK(o.mixed_precision.empty());
  CHECK(o.gradient_accumulation_steps == 0);
  CHECK_FALSE(o.use_deepspeed);
  CHECK(o.zero_stage == 0);
  CHECK_FALSE(o.use_fsdp);
  CHECK(o.fsdp.sharding_strategy.empty());
  CHECK(o.fsdp.cpu_offload.empty());
  CHECK_FALSE(o.help);
}

TEST_CASE("the launcher's own options", "[launch_options]") {
  LaunchOptions o = parse({"train.lua", "--nnodes", "2", "--node-rank=1", "--master-port", "29500",
                           "--debug", "--timeout", "5", "--stall-report", "2.5", "--max-restarts",
                           "3", "--log-dir", "logs", "--mixed-precision", "bf16",
                           "--gradient-accumulation-steps", "4", "--rdzv-timeout", "30"});
  CHECK(o.nnodes == 2);
  CHECK(o.node_rank == 1);
  CHECK(o.debug);
  CHECK(o.timeout_s == 5);
  CHECK(o.stall_report_s == 2.5);
  CHECK(o.max_restarts == 3);
  CHECK(o.log_dir == "logs");
  CHECK(o.mixed_precision == "bf16");
  CHECK(o.gradient_accumulation_steps == 4);
  CHECK(o.rdzv_timeout_s == 30);
  CHECK(o.origins.at("--debug") == "command line");
  // --num-processes counts every node's processes, as Accelerate does.
  CHECK(parse({"train.lua", "--num-processes", "6", "--nnodes", "3", "--master-port", "1"}).nproc == 2);
}

TEST_CASE("subcommands parse options without a recipe", "[launch_options]") {
  LaunchOptions o = parse_launch_options({"--nproc", "2"}, kCores, accel::RecipeRule::none);
  CHECK(o.recipe.empty());
  CHECK(o.nproc == 2);
}

TEST_CASE("options go before or after the recipe, with a space or '='", "[launch_options]") {
  LaunchOptions o = parse({"--nproc", "4", "train.lua", "--master-addr=10.0.0.2",
                           "--master-port", "29500", "--threads=3", "--grace-period", "0.5",
                           "--backend=gloo"});
  CHECK(o.recipe == "train.lua");
  CHECK(o.nproc == 4);
  CHECK(o.master_addr == "10.0.0.2");
  CHECK(o.master_port == 29500);
  CHECK(o.threads == 3);
  CHECK(o.grace_period_s == 0.5);
  CHECK(o.backend == "gloo");
}

TEST_CASE("the last of a repeated option wins", "[launch_options]") {
  CHECK(parse({"--nproc", "2", "train.lua", "--nproc=3"}).nproc == 3);
}

TEST_CASE("everything after -- belongs to the recipe", "[launch_options]") {
  LaunchOptions o = parse({"train.lua", "--nproc", "2", "--", "--lr", "0.1", "extra", "--"});
  CHECK(o.nproc == 2);
  CHECK(o.recipe_args == Args{"--lr", "0.1", "extra", "--"});
}

TEST_CASE("default threads split the cores between the ranks, at least one each",
          "[launch_options]") {
  CHECK(parse({"train.lua", "--nproc", "2"}).threads == 4);
  CHECK(parse({"train.lua", "--nproc", "3"}).threads == 2);
  CHECK(parse({"train.lua", "--nproc", "16"}).threads == 1);
  CHECK(parse({"train.lua", "--nproc", "16", "--threads", "2"}).threads == 2);
  CHECK(parse_launch_options({"train.lua"}).threads >= 1);  // the machine's own count
}

TEST_CASE("--help needs no recipe, and lists every option", "[launch_options]") {
  CHECK(parse({"-h"}).help);
  CHECK(parse({"train.lua", "--help"}).help);
  std::string usage = accel::usage_text();
  for (const char* option : {"--nproc N", "--threads N", "--master-addr HOST",
                             "--master-port PORT", "--backend NAME", "--grace-period SECONDS",
                             "--nnodes N", "--node-rank K", "--num-processes N", "--debug",
                             "--timeout SECONDS", "--stall-report SECONDS", "--max-restarts K",
                             "--log-dir DIR", "--config FILE", "--mixed-precision MODE",
                             "--use-deepspeed", "--zero-stage N", "--use-fsdp",
                             "--fsdp-sharding-strategy STRATEGY", "--fsdp-auto-wrap-policy POLICY",
                             "--fsdp-transformer-layer-cls-to-wrap NAMES", "--fsdp-min-num-params N",
                             "--fsdp-offload-params true|false", "--fsdp-state-dict-type TYPE",
                             "--gradient-accumulation-steps N", "--rdzv-timeout SECONDS",
                             "accel-run config", "accel-run env", "accel-run test",
                             "-h, --help", "RECIPE.lua"}) {
    INFO(option);
    CHECK(usage.find(option) != std::string::npos);
  }
}

TEST_CASE("errors name the option or value at fault", "[launch_options]") {
  using Catch::Matchers::Contains;
  CHECK_THAT(error_of({"--bogus", "train.lua"}), Contains("unknown option '--bogus'"));
  CHECK_THAT(error_of({"train.lua", "--bogus=1"}), Contains("unknown option '--bogus'"));
  CHECK_THAT(error_of({"train.lua", "--nproc"}), Contains("--nproc needs a value (N)"));
  CHECK_THAT(error_of({"train.lua", "--master-addr", "--nproc", "2"}),
             Contains("--master-addr needs a value"));
  CHECK_THAT(error_of({"train.lua", "--nproc", "abc"}),
             Contains("--nproc expects an integer from 1 to 4096, got 'abc'"));
  CHECK_THAT(error_of({"train.lua", "--nproc", "-1"}), Contains("got '-1'"));
  CHECK_THAT(error_of({"train.lua", "--nproc=0"}), Contains("got '0'"));
  CHECK_THAT(error_of({"train.lua", "--nproc=2x"}), Contains("got '2x'"));
  CHECK_THAT(error_of({"train.lua", "--nproc="}), Contains("--nproc expects an integer"));
  CHECK_THAT(error_of({"train.lua", "--master-port", "70000"}),
             Contains("--master-port expects an integer from 0 to 65535, got '70000'"));
  CHECK_THAT(error_of({"train.lua", "--grace-period", "soon"}),
             Contains("--grace-period expects a number of seconds"));
  CHECK_THAT(error_of({"train.lua", "--grace-period=nan"}), Contains("got 'nan'"));
  CHECK_THAT(error_of({"train.lua", "--backend", "ucc"}),
             Contains("unsupported --backend 'ucc' (supported: gloo"));
  CHECK_THAT(error_of({"train.lua", "--backend", "glo"}), Contains("(did you mean 'gloo'?)"));
  CHECK_THAT(error_of({"train.lua", "--nprocs", "2"}),
             Contains("unknown option '--nprocs' (did you mean '--nproc'?)"));
  CHECK_THAT(error_of({"train.lua", "--num_processes", "2"}),
             Contains("(did you mean '--num-processes'?)"));
  CHECK_THAT(error_of({"train.lua", "--debug=yes"}), Contains("--debug takes no value"));
  CHECK_THAT(error_of({"train.lua", "--num-processes", "1048576"}),
             Contains("--num-processes 1048576 is 1048576 processes on each of 1 machine(s); a machine runs at most "
                      "4096 (as --nproc)"));
  CHECK_NOTHROW(parse({"train.lua", "--num-processes", "8192", "--nnodes", "2", "--master-port", "1234"}));
  // More processes than cores: allowed, with a warning the launcher prints.
  CHECK(parse({"train.lua", "--nproc", "8"}).warnings.empty());
  const LaunchOptions crowded = parse({"train.lua", "--nproc", "16"});
  REQUIRE(crowded.warnings.size() == 1);
  CHECK_THAT(crowded.warnings[0], Contains("16 processes on this machine's 8 CPU core(s)"));
  CHECK_THAT(error_of({"train.lua", "--rdzv-token", std::string(1020, 's')}),
             Contains("--rdzv-token has 1020 bytes; the store takes tokens of at most 1019"));
  CHECK_NOTHROW(parse({"train.lua", "--rdzv-token", std::string(1019, 's')}));
  CHECK_THAT(error_of({"train.lua", "--mixed-precision", "fp4"}),
             Contains("unsupported --mixed-precision 'fp4' (supported: no, bf16, fp16, fp8)"));
  CHECK_THAT(error_of({"train.lua", "--timeout", "0"}),
             Contains("--timeout expects a number of seconds from 0.1 to 100000000, got '0'"));
  CHECK_THAT(error_of({"train.lua", "--nnodes", "2", "--node-rank", "2", "--master-port", "1"}),
             Contains("--node-rank is 2, but with --nnodes 2 node ranks go from 0 to 1"));
  CHECK_THAT(error_of({"train.lua", "--backend", "mpi", "--log-dir", "x"}),
             Contains("--log-dir does not apply to --backend mpi"));
  CHECK_THAT(error_of({"train.lua", "--nnodes", "2"}),
             Contains("every node's launcher must know the store's port: give --master-port"));
  CHECK_THAT(error_of({"train.lua", "--help=yes"}), Contains("--help takes no value"));
  CHECK_THAT(error_of({"--nproc", "2"}), Contains("no recipe given"));
  CHECK_THAT(error_of({}), Contains("no recipe given"));
  CHECK_THAT(error_of({"--", "train.lua"}), Contains("no recipe given"));
}

TEST_CASE("sharding: a ZeRO stage picks DeepSpeed; FSDP's settings in their normal spelling",
          "[launch_options]") {
  LaunchOptions zero = parse({"train.lua", "--zero-stage", "3"});
  CHECK(zero.use_deepspeed);
  CHECK(zero.zero_stage == 3);
  CHECK_FALSE(zero.use_fsdp);
  CHECK(zero.origins.at("--use-deepspeed") == "command line");
  // Accelerate's stage when DeepSpeed is asked for without one.
  CHECK(parse({"train.lua", "--use-deepspeed"}).zero_stage == 2);
  CHECK(parse({"train.lua", "--use-deepspeed", "--zero-stage=1"}).zero_stage == 1);

  LaunchOptions fsdp = parse({"train.lua", "--use-fsdp", "--fsdp-sharding-strategy", "2",
                              "--fsdp-auto-wrap-policy", "TRANSFORMER_BASED_WRAP",
                              "--fsdp-transformer-layer-cls-to-wrap", " Block , Attention",
                              "--fsdp-min-num-params", "0100", "--fsdp-offload-params", "yes",
                              "--fsdp-state-dict-type=SHARDED_STATE_DICT"});
  CHECK(fsdp.use_fsdp);
  CHECK_FALSE(fsdp.use_deepspeed);
  CHECK(fsdp.zero_stage == 0);
  CHECK(fsdp.fsdp.sharding_strategy == "SHARD_GRAD_OP");  // Accelerate numbers them from 1
  CHECK(fsdp.fsdp.auto_wrap_policy == "TRANSFORMER_BASED_WRAP");
  CHECK(fsdp.fsdp.transformer_layer_cls == "Block,Attention");
  CHECK(fsdp.fsdp.min_num_params == "100");
  CHECK(fsdp.fsdp.cpu_offload == "true");
  CHECK(fsdp.fsdp.state_dict_type == "SHARDED_STATE_DICT");
  CHECK(parse({"train.lua", "--use-fsdp", "--fsdp-sharding-strategy", "NO_SHARD",
               "--fsdp-offload-params=false"})
            .fsdp.cpu_offload == "false");
  // Only what the launch says is set.
  LaunchOptions bare = parse({"train.lua", "--use-fsdp"});
  CHECK(bare.fsdp.sharding_strategy.empty());
  CHECK(bare.fsdp.auto_wrap_policy.empty());
  CHECK(bare.fsdp.min_num_params.empty());
}

TEST_CASE("sharding mistakes name the option and what it accepts", "[launch_options]") {
  using Catch::Matchers::Contains;
  for (const char* stage : {"0", "4", "two", "-1"}) {
    CHECK(error_of({"train.lua", "--zero-stage", stage}) ==
          std::string("--zero-stage expects an integer from 1 to 3, got '") + stage + "'");
  }
  CHECK(error_of({"train.lua", "--zero-stage", "2", "--use-fsdp"}) ==
        "--zero-stage (DeepSpeed ZeRO) and --use-fsdp (FSDP) both choose how the model is "
        "sharded; give one of them");
  CHECK_THAT(error_of({"train.lua", "--use-fsdp", "--use-deepspeed"}),
             Contains("--use-fsdp (FSDP) and --use-deepspeed (DeepSpeed ZeRO) both choose"));
  CHECK(error_of({"train.lua", "--fsdp-state-dict-type", "FULL_STATE_DICT"}) ==
        "--fsdp-state-dict-type is a setting of FSDP, which this launch does not use: give "
        "--use-fsdp (distributed_type: FSDP in the config file)");
  CHECK(error_of({"train.lua", "--zero-stage", "1", "--fsdp-offload-params", "true"}) ==
        "--fsdp-offload-params is a setting of FSDP, but this launch shards with DeepSpeed ZeRO, "
        "as the command line says");
  CHECK(error_of({"train.lua", "--use-fsdp", "--fsdp-auto-wrap-policy", "TRANSFORMER_BASED_WRAP"}) ==
        "--fsdp-auto-wrap-policy is TRANSFORMER_BASED_WRAP, which needs the classes of the modules "
        "to wrap: give --fsdp-transformer-layer-cls-to-wrap NAMES (fsdp_transformer_layer_cls_to_wrap "
        "in fsdp_config), e.g. Block");
  CHECK(error_of({"train.lua", "--use-fsdp", "--fsdp-sharding-strategy", "4"}) ==
        "unsupported --fsdp-sharding-strategy '4' (supported: FULL_SHARD (1), SHARD_GRAD_OP (2), "
        "NO_SHARD (3))");
  CHECK_THAT(error_of({"train.lua", "--use-fsdp", "--fsdp-sharding-strategy", "FULL_SHRAD"}),
             Contains("(did you mean 'FULL_SHARD'?)"));
  CHECK(error_of({"train.lua", "--use-fsdp", "--fsdp-auto-wrap-policy", "AUTO"}) ==
        "unsupported --fsdp-auto-wrap-policy 'AUTO' (supported: TRANSFORMER_BASED_WRAP, "
        "SIZE_BASED_WRAP, NO_WRAP)");
  CHECK_THAT(error_of({"train.lua", "--use-fsdp", "--fsdp-state-dict-type", "LOCAL_STATE_DICT"}),
             Contains("unsupported --fsdp-state-dict-type 'LOCAL_STATE_DICT' (supported: "
                      "FULL_STATE_DICT, SHARDED_STATE_DICT)"));
  CHECK(error_of({"train.lua", "--use-fsdp", "--fsdp-min-num-params", "1e8"}) ==
        "--fsdp-min-num-params expects an integer from 0 to 1000000000000000, got '1e8'");
  CHECK(error_of({"train.lua", "--use-fsdp", "--fsdp-offload-params", "maybe"}) ==
        "--fsdp-offload-params expects true or false, got 'maybe'");
  CHECK(error_of({"train.lua", "--use-fsdp", "--fsdp-offload-params"}) ==
        "--fsdp-offload-params needs a value (true|false)");
  CHECK(error_of({"train.lua", "--use-fsdp", "--fsdp-transformer-layer-cls-to-wrap", "Block,"}) ==
        "--fsdp-transformer-layer-cls-to-wrap expects names separated by commas (Block,Attention), "
        "got 'Block,'");
  CHECK_THAT(error_of({"train.lua", "--use_fsdp"}), Contains("(did you mean '--use-fsdp'?)"));
  CHECK_THAT(error_of({"train.lua", "--zero_stage", "2"}), Contains("(did you mean '--zero-stage'?)"));
}

TEST_CASE("a stray argument after the recipe points at --", "[launch_options]") {
  using Catch::Matchers::Contains;
  std::string message = error_of({"train.lua", "--nproc", "2", "epochs=3"});
  CHECK_THAT(message, Contains("unexpected argument 'epochs=3' after the recipe 'train.lua'"));
  CHECK_THAT(message, Contains("accel-run train.lua -- epochs=3"));
}
