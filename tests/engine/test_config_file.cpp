// accel-run's config file under the command line: keys applied through the
// option table, the command line winning, the file in force found by
// --config, $ACCEL_CONFIG_FILE or the default path, and every mistake (bad
// YAML, unknown key, wrong type or value, settings that do not fit together)
// refused with the file, the line and the key, with a did-you-mean for
// near misses. Real files in a scratch directory.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/protocol/config_file.h"
#include "engine/protocol/launch_options.h"
#include "engine/protocol/near_miss.h"

namespace {

using accel::ConfigLookup;
using accel::LaunchOptions;
using Catch::Matchers::Contains;
using Args = std::vector<std::string>;

constexpr int kCores = 8;

class Scratch {
 public:
  Scratch() {
    const char* tmpdir = std::getenv("TMPDIR");
    dir_ = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/accel-config-XXXXXX";
    REQUIRE(mkdtemp(dir_.data()) != nullptr);
  }
  ~Scratch() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  // Writes `text` to `name` and returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
};

LaunchOptions resolve(const Args& args, const std::string& config) {
  return accel::resolve_launch_options(args, ConfigLookup{config, ""}, kCores);
}

// The message resolving `args` over `config` raises; fails the test if none.
std::string error_of(const Args& args, const std::string& config) {
  try {
    resolve(args, config);
  } catch (const accel::LaunchOptionsError& error) {
    return error.what();
  }
  FAIL("no error for the config file");
  return {};
}

}  // namespace

TEST_CASE("config keys set options; the command line wins", "[config]") {
  Scratch scratch;
  std::string config = scratch.write("c.yaml",
                                     "num_processes: 3\n"
                                     "num_threads: 2\n"
                                     "backend: gloo\n"
                                     "mixed_precision: bf16\n"
                                     "gradient_accumulation_steps: 4\n"
                                     "debug: true\n"
                                     "timeout: 12.5\n"
                                     "stall_report: 0\n"
                                     "max_restarts: 2\n"
                                     "log_dir: logs\n"
                                     "main_process_port: 29555\n");
  LaunchOptions o = resolve({"train.lua"}, config);
  CHECK(o.nproc == 3);
  CHECK(o.threads == 2);
  CHECK(o.mixed_precision == "bf16");
  CHECK(o.gradient_accumulation_steps == 4);
  CHECK(o.debug);
  CHECK(o.timeout_s == 12.5);
  CHECK(o.stall_report_s == 0);
  CHECK(o.max_restarts == 2);
  CHECK(o.log_dir == "logs");
  CHECK(o.master_port == 29555);
  CHECK(o.config_in_force == config);
  CHECK(o.origins.at("--threads") == config + ":2");

  LaunchOptions over = resolve({"train.lua", "--nproc", "2", "--threads=1", "--timeout", "3",
                                "--mixed-precision", "no"},
                               config);
  CHECK(over.nproc == 2);
  CHECK(over.threads == 1);
  CHECK(over.timeout_s == 3);
  CHECK(over.mixed_precision == "no");
  CHECK(over.max_restarts == 2);  // what the command line leaves unsaid still comes from the file
  CHECK(over.origins.at("--threads") == "command line");
}

TEST_CASE("num_processes counts all machines, as in Accelerate", "[config]") {
  Scratch scratch;
  std::string config = scratch.write("c.yaml",
                                     "num_processes: 6\nnum_machines: 3\nmachine_rank: 2\n"
                                     "main_process_ip: 10.1.2.3\nmain_process_port: 29500\n");
  LaunchOptions o = resolve({"train.lua"}, config);
  CHECK(o.nproc == 2);
  CHECK(o.nnodes == 3);
  CHECK(o.node_rank == 2);
  CHECK(o.master_addr == "10.1.2.3");
  CHECK(o.threads == kCores / 2);
  CHECK(resolve({"train.lua", "--nproc", "4"}, config).nproc == 4);

  std::string uneven = scratch.write("u.yaml",
                                     "num_processes: 5\nnum_machines: 2\nmain_process_port: 1\n");
  CHECK_THAT(error_of({"train.lua"}, uneven),
             Contains("key 'num_processes' (" + uneven + ":1) is 5, which does not split evenly over 2 machines"));
}

TEST_CASE("an Accelerate default_config.yaml loads", "[config]") {
  Scratch scratch;
  std::string config = scratch.write("accelerate.yaml",
                                     "compute_environment: LOCAL_MACHINE\n"
                                     "debug: false\n"
                                     "distributed_type: MULTI_CPU\n"
                                     "downcast_bf16: 'no'\n"
                                     "enable_cpu_affinity: false\n"
                                     "machine_rank: 0\n"
                                     "main_training_function: main\n"
                                     "mixed_precision: 'no'\n"
                                     "num_machines: 1\n"
                                     "num_processes: 2\n"
                                     "rdzv_backend: static\n"
                                     "same_network: true\n"
                                     "tpu_env: []\n"
                                     "tpu_use_cluster: false\n"
                                     "tpu_use_sudo: false\n"
                                     "use_cpu: true\n");
  LaunchOptions o = resolve({"train.lua"}, config);
  CHECK(o.nproc == 2);
  CHECK(o.mixed_precision == "no");
  CHECK_FALSE(o.debug);
  CHECK_FALSE(o.use_deepspeed);
  CHECK_FALSE(o.use_fsdp);

  // Older versions write every section, empty where unused.
  std::string sections = scratch.write("sections.yaml",
                                       "distributed_type: MULTI_CPU\n"
                                       "deepspeed_config: {}\n"
                                       "fsdp_config: {}\n");
  CHECK_FALSE(resolve({"train.lua"}, sections).use_fsdp);
}

TEST_CASE("an Accelerate FSDP config sets FSDP's settings; its other keys are ignored",
          "[config]") {
  Scratch scratch;
  // As `accelerate config` writes it (accelerate's tests/test_configs/latest_fsdp.yaml).
  std::string config = scratch.write("fsdp.yaml",
                                     "compute_environment: LOCAL_MACHINE\n"
                                     "debug: false\n"
                                     "distributed_type: FSDP\n"
                                     "downcast_bf16: 'no'\n"
                                     "enable_cpu_affinity: false\n"
                                     "fsdp_config:\n"
                                     "  fsdp_activation_checkpointing: false\n"
                                     "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
                                     "  fsdp_backward_prefetch: BACKWARD_PRE\n"
                                     "  fsdp_cpu_ram_efficient_loading: true\n"
                                     "  fsdp_forward_prefetch: false\n"
                                     "  fsdp_ignored_modules: null\n"
                                     "  fsdp_offload_params: false\n"
                                     "  fsdp_sharding_strategy: FULL_SHARD\n"
                                     "  fsdp_state_dict_type: SHARDED_STATE_DICT\n"
                                     "  fsdp_sync_module_states: true\n"
                                     "  fsdp_transformer_layer_cls_to_wrap: BertLayer\n"
                                     "  fsdp_use_orig_params: true\n"
                                     "machine_rank: 0\n"
                                     "main_training_function: main\n"
                                     "mixed_precision: 'no'\n"
                                     "num_machines: 1\n"
                                     "num_processes: 2\n");
  LaunchOptions o = resolve({"train.lua"}, config);
  CHECK(o.use_fsdp);
  CHECK_FALSE(o.use_deepspeed);
  CHECK(o.nproc == 2);
  CHECK(o.fsdp.sharding_strategy == "FULL_SHARD");
  CHECK(o.fsdp.auto_wrap_policy == "TRANSFORMER_BASED_WRAP");
  CHECK(o.fsdp.transformer_layer_cls == "BertLayer");
  CHECK(o.fsdp.min_num_params.empty());
  CHECK(o.fsdp.cpu_offload == "false");
  CHECK(o.fsdp.state_dict_type == "SHARDED_STATE_DICT");
  CHECK(o.origins.at("--use-fsdp") == config + ":3");
  CHECK(o.origins.at("--fsdp-sharding-strategy") == config + ":14");

  // Older files number the strategy; SIZE_BASED_WRAP takes a parameter count.
  std::string numbered = scratch.write("numbered.yaml",
                                       "distributed_type: FSDP\n"
                                       "fsdp_config:\n"
                                       "  fsdp_sharding_strategy: 3\n"
                                       "  fsdp_auto_wrap_policy: SIZE_BASED_WRAP\n"
                                       "  fsdp_min_num_params: 100000000\n");
  LaunchOptions n = resolve({"train.lua"}, numbered);
  CHECK(n.fsdp.sharding_strategy == "NO_SHARD");
  CHECK(n.fsdp.min_num_params == "100000000");
}

TEST_CASE("an Accelerate DeepSpeed config sets the ZeRO stage, by default Accelerate's",
          "[config]") {
  Scratch scratch;
  std::string config = scratch.write("ds.yaml",
                                     "compute_environment: LOCAL_MACHINE\n"
                                     "deepspeed_config:\n"
                                     "  gradient_accumulation_steps: 1\n"
                                     "  offload_optimizer_device: none\n"
                                     "  offload_param_device: none\n"
                                     "  zero3_init_flag: false\n"
                                     "  zero_stage: 3\n"
                                     "distributed_type: DEEPSPEED\n");
  LaunchOptions o = resolve({"train.lua"}, config);
  CHECK(o.use_deepspeed);
  CHECK(o.zero_stage == 3);
  CHECK(o.origins.at("--zero-stage") == config + ":7");
  CHECK(o.origins.at("--use-deepspeed") == config + ":8");
  CHECK(resolve({"train.lua", "--zero-stage", "1"}, config).zero_stage == 1);
  CHECK(resolve({"train.lua"}, scratch.write("bare.yaml", "distributed_type: DEEPSPEED\n")).zero_stage == 2);
}

TEST_CASE("the command line's sharding wins over the file's", "[config]") {
  Scratch scratch;
  std::string fsdp = scratch.write("fsdp.yaml",
                                   "distributed_type: FSDP\n"
                                   "fsdp_config:\n"
                                   "  fsdp_sharding_strategy: FULL_SHARD\n"
                                   "  fsdp_state_dict_type: SHARDED_STATE_DICT\n");
  // Its settings merge with the file's, key by key.
  LaunchOptions merged = resolve({"train.lua", "--fsdp-sharding-strategy", "SHARD_GRAD_OP"}, fsdp);
  CHECK(merged.use_fsdp);
  CHECK(merged.fsdp.sharding_strategy == "SHARD_GRAD_OP");
  CHECK(merged.fsdp.state_dict_type == "SHARDED_STATE_DICT");
  // Another method replaces the file's, settings and all.
  LaunchOptions zero = resolve({"train.lua", "--zero-stage", "1"}, fsdp);
  CHECK(zero.use_deepspeed);
  CHECK(zero.zero_stage == 1);
  CHECK_FALSE(zero.use_fsdp);
  CHECK(zero.fsdp.sharding_strategy.empty());
  CHECK(zero.fsdp.state_dict_type.empty());

  std::string deepspeed = scratch.write("ds.yaml",
                                        "distributed_type: DEEPSPEED\n"
                                        "deepspeed_config:\n"
                                        "  zero_stage: 3\n");
  LaunchOptions f = resolve({"train.lua", "--use-fsdp"}, deepspeed);
  CHECK(f.use_fsdp);
  CHECK_FALSE(f.use_deepspeed);
  CHECK(f.zero_stage == 0);
  // A setting of the method the command line drops is still checked.
  std::string bad = scratch.write("bad.yaml",
                                  "distributed_type: DEEPSPEED\n"
                                  "deepspeed_config:\n"
                                  "  zero_stage: 7\n");
  CHECK_THAT(error_of({"train.lua", "--use-fsdp"}, bad),
             Contains(bad + ":3: key 'deepspeed_config.zero_stage' expects an integer from 1 to 3, got '7'"));
}

TEST_CASE("sharding mistakes in the file name the file, the line and the key", "[config]") {
  Scratch scratch;
  auto error_for = [&](const std::string& text) {
    return error_of({"train.lua"}, scratch.write("bad.yaml", text));
  };
  std::string file = scratch.path("bad.yaml");
  CHECK(error_for("distributed_type: FSPD\n") ==
        file + ":1: key 'distributed_type' expects DEEPSPEED or FSDP to shard, or another of "
               "Accelerate's types to shard nothing, got 'FSPD' (did you mean 'FSDP'?)");
  CHECK_THAT(error_for("distributed_type: deepspeed\n"), Contains("(did you mean 'DEEPSPEED'?)"));
  CHECK_THAT(error_for("distributed_type: [FSDP]\n"), Contains("got a list"));
  CHECK(error_for("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_stratgy: 1\n") ==
        file + ":3: unknown key 'fsdp_config.fsdp_sharding_stratgy' (did you mean "
               "'fsdp_config.fsdp_sharding_strategy'?)");
  CHECK(error_for("distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: z.json\n") ==
        file + ":3: unknown key 'deepspeed_config.deepspeed_config_file'");
  CHECK(error_for("fsdp_confg:\n  fsdp_offload_params: true\n") ==
        file + ":1: unknown key 'fsdp_confg' (did you mean 'fsdp_config'?)");
  CHECK(error_for("fsdp_config.fsdp_offload_params: true\n") ==
        file + ":1: unknown key 'fsdp_config.fsdp_offload_params'");
  CHECK(error_for("distributed_type: FSDP\nfsdp_config: FULL_SHARD\n") ==
        file + ":2: key 'fsdp_config' expects FSDP's settings, indented below it as key: value "
               "lines, got 'FULL_SHARD'");
  CHECK(error_for("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: HYBRID_SHARD\n") ==
        file + ":3: key 'fsdp_config.fsdp_sharding_strategy' expects one of FULL_SHARD (1), "
               "SHARD_GRAD_OP (2), NO_SHARD (3), got 'HYBRID_SHARD'");
  CHECK(error_for("distributed_type: FSDP\nfsdp_config:\n  fsdp_offload_params: 'true'\n") ==
        file + ":3: key 'fsdp_config.fsdp_offload_params' expects true or false, got the string "
               "'true' (write it without quotes)");
  CHECK(error_for("distributed_type: FSDP\nfsdp_config:\n  fsdp_min_num_params: -5\n") ==
        file + ":3: key 'fsdp_config.fsdp_min_num_params' expects an integer from 0 to "
               "1000000000000000, got '-5'");
  CHECK(error_for("distributed_type: FSDP\nfsdp_config:\n  fsdp_offload_params: true\n"
                  "  fsdp_offload_params: false\n") ==
        file + ":4: key 'fsdp_offload_params' is given twice (first at line 3)");
  CHECK(error_for("fsdp_config:\n  fsdp_state_dict_type: FULL_STATE_DICT\n") ==
        "key 'fsdp_config.fsdp_state_dict_type' (" + file + ":2) is a setting of FSDP, which this "
        "launch does not use: give --use-fsdp (distributed_type: FSDP in the config file)");
  CHECK(error_for("distributed_type: FSDP\ndeepspeed_config:\n  zero_stage: 2\n") ==
        "key 'deepspeed_config.zero_stage' (" + file + ":3) is a setting of DeepSpeed ZeRO, but "
        "this launch shards with FSDP, as key 'distributed_type' (" + file + ":1) says");
  CHECK(error_for("distributed_type: FSDP\nfsdp_config:\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n") ==
        "key 'fsdp_config.fsdp_auto_wrap_policy' (" + file + ":3) is TRANSFORMER_BASED_WRAP, which "
        "needs the classes of the modules to wrap: give --fsdp-transformer-layer-cls-to-wrap NAMES "
        "(fsdp_transformer_layer_cls_to_wrap in fsdp_config), e.g. Block");
}

TEST_CASE("aliases cannot make a small file's sections large", "[config]") {
  Scratch scratch;
  std::string keys = "big: &big {";
  for (int i = 0; i < 100; ++i) keys += (i ? ", k" : "k") + std::to_string(i) + ": 1";
  keys += "}\n";
  for (int i = 0; i < 100; ++i) keys += "a" + std::to_string(i) + ": *big\n";
  CHECK_THAT(error_of({"train.lua"}, scratch.write("aliases.yaml", keys)),
             Contains("nested keys; is it a config file?"));
}

TEST_CASE("a config path that reads without end, or a huge file, is refused", "[config]") {
  CHECK_THAT(error_of({"train.lua"}, "/dev/zero"),
             Contains("the config file '/dev/zero' is larger than 1 MiB; is it a config file?"));
  Scratch scratch;
  std::string big = scratch.write("big.yaml", "# " + std::string(size_t{1} << 20, 'x') + "\n");
  CHECK_THAT(error_of({"train.lua"}, big), Contains("is larger than 1 MiB"));
}

TEST_CASE("config mistakes name the file, the line and the key", "[config]") {
  Scratch scratch;
  auto error_for = [&](const std::string& text) {
    return error_of({"train.lua"}, scratch.write("bad.yaml", text));
  };
  std::string file = scratch.path("bad.yaml");

  CHECK_THAT(error_for("num_processes: 2\nbackend: [gloo\n"),
             Contains(file + ":3:1: malformed YAML"));
  CHECK_THAT(error_for("num_processes: 2\nmixed_precison: bf16\n"),
             Contains(file + ":2: unknown key 'mixed_precison' (did you mean 'mixed_precision'?)"));
  CHECK_THAT(error_for("num-processes: 2\n"),
             Contains(file + ":1: unknown key 'num-processes' (did you mean 'num_processes'?)"));
  CHECK_THAT(error_for("flux_capacitor: 1\n"), Contains(file + ":1: unknown key 'flux_capacitor'"));
  CHECK_THAT(error_for("flux_capacitor: 1\n"), !Contains("did you mean"));
  CHECK_THAT(error_for("\n\nnum_processes: two\n"),
             Contains(file + ":3: key 'num_processes' expects an integer from 1 to 1048576, got 'two'"));
  CHECK_THAT(error_for("num_processes: \"2\"\n"),
             Contains(file + ":1: key 'num_processes' expects an integer from 1 to 1048576, got the string '2' (write it without quotes)"));
  CHECK_THAT(error_for("debug: sometimes\n"),
             Contains(file + ":1: key 'debug' expects true or false, got 'sometimes'"));
  CHECK_THAT(error_for("timeout: -1\n"),
             Contains(file + ":1: key 'timeout' expects a number of seconds from 0.1 to 100000000, got '-1'"));
  CHECK_THAT(error_for("backend: glo\n"),
             Contains(file + ":1: key 'backend' expects one of gloo"));
  CHECK_THAT(error_for("backend: glo\n"), Contains("got 'glo' (did you mean 'gloo'?)"));
  CHECK_THAT(error_for("mixed_precision: [bf16]\n"),
             Contains(file + ":1: key 'mixed_precision' expects one of no, bf16, fp16, fp8, got a list"));
  CHECK_THAT(error_for("num_threads:\n"),
             Contains(file + ":1: key 'num_threads' has no value; it expects an integer"));
  CHECK_THAT(error_for("max_restarts: 1\nmax_restarts: 2\n"),
             Contains(file + ":2: key 'max_restarts' is given twice (first at line 1)"));
  CHECK_THAT(error_for("- num_processes: 2\n"),
             Contains(file + ":1: the config must be a mapping of keys to values"));
  CHECK_THAT(error_for("num_machines: 2\nmachine_rank: 2\nmain_process_port: 1\n"),
             Contains("key 'machine_rank' (" + file + ":2) is 2, but with key 'num_machines' (" +
                      file + ":1) 2 node ranks go from 0 to 1"));
  CHECK_THAT(error_for("num_machines: 2\n"), Contains("give --master-port"));
  CHECK(resolve({"train.lua"}, scratch.write("empty.yaml", "")).config_in_force ==
        scratch.path("empty.yaml"));
}

TEST_CASE("the file in force: --config, else the variable, else the default if it exists",
          "[config]") {
  Scratch scratch;
  std::string from_flag = scratch.write("flag.yaml", "num_processes: 2\n");
  std::string from_variable = scratch.write("variable.yaml", "num_processes: 3\n");
  std::string by_default = scratch.write("default.yaml", "num_processes: 4\n");
  auto nproc = [&](const Args& args, const ConfigLookup& lookup) {
    return accel::resolve_launch_options(args, lookup, kCores).nproc;
  };
  CHECK(nproc({"t.lua", "--config", from_flag}, {from_variable, by_default}) == 2);
  CHECK(nproc({"t.lua"}, {from_variable, by_default}) == 3);
  CHECK(nproc({"t.lua"}, {"", by_default}) == 4);
  CHECK(nproc({"t.lua"}, {"", scratch.path("absent.yaml")}) == 1);
  // Named explicitly, a file must exist.
  CHECK_THAT(error_of({"t.lua"}, scratch.path("absent.yaml")),
             Contains("cannot read the config file '" + scratch.path("absent.yaml") + "'"));
  // Parsing the command line alone ignores every file.
  CHECK(accel::parse_launch_options({"t.lua"}, kCores).config_in_force.empty());

  CHECK(accel::default_config_path("/x/config", "/home/u") == "/x/config/accel/default_config.yaml");
  CHECK(accel::default_config_path("", "/home/u") == "/home/u/.config/accel/default_config.yaml");
}

TEST_CASE("describe_settings shows each key's value and where it came from", "[config]") {
  Scratch scratch;
  std::string config = scratch.write("c.yaml", "backend: gloo\nmax_restarts: 3\n");
  std::string text = accel::describe_settings(resolve({"t.lua", "--timeout", "9"}, config));
  CHECK_THAT(text, Contains("max_restarts: 3  # " + config + ":2"));
  CHECK_THAT(text, Contains("timeout: 9  # command line"));
  CHECK_THAT(text, Contains("num_machines: 1  # default"));
  CHECK_THAT(text, Contains("distributed_type: 'NO'  # default: no sharding\n"));
  for (const std::string& key : accel::config_keys()) {
    if (key == "deepspeed_config" || key == "fsdp_config") continue;  // with their method only
    INFO(key);
    CHECK_THAT(text, Contains(key + ": "));
  }
}

TEST_CASE("describe_settings shows the sharding in use as its section, with the settings given",
          "[config]") {
  Scratch scratch;
  std::string config = scratch.write("c.yaml",
                                     "distributed_type: FSDP\n"
                                     "fsdp_config:\n"
                                     "  fsdp_sharding_strategy: 2\n"
                                     "  fsdp_offload_params: false\n");
  CHECK_THAT(accel::describe_settings(resolve({"t.lua", "--fsdp-state-dict-type",
                                               "SHARDED_STATE_DICT"},
                                              config)),
             Contains("distributed_type: FSDP  # " + config + ":1\n"
                      "fsdp_config:\n"
                      "  fsdp_sharding_strategy: SHARD_GRAD_OP  # " + config + ":3\n"
                      "  fsdp_offload_params: false  # " + config + ":4\n"
                      "  fsdp_state_dict_type: SHARDED_STATE_DICT  # command line\n"));
  CHECK_THAT(accel::describe_settings(resolve({"t.lua", "--use-fsdp"}, "")),
             Contains("distributed_type: FSDP  # command line\nfsdp_config: {}\n"));
  CHECK_THAT(accel::describe_settings(resolve({"t.lua", "--use-deepspeed"}, "")),
             Contains("distributed_type: DEEPSPEED  # command line\n"
                      "deepspeed_config:\n"
                      "  zero_stage: 2  # default\n"));
}

TEST_CASE("the mesh's sizes: Accelerate's parallelism_config keys and options, checked against the processes",
          "[config]") {
  Scratch scratch;
  std::string config = scratch.write("mesh.yaml",
                                     "num_processes: 4\n"
                                     "parallelism_config:\n"
                                     "  parallelism_config_dp_replicate_size: 2\n"
                                     "  parallelism_config_tp_size: 2\n");
  LaunchOptions options = resolve({"t.lua"}, config);
  CHECK(options.parallelism.dp_replicate == 2);
  CHECK(options.parallelism.tp == 2);
  CHECK(options.parallelism.dp_shard == 0);  // not given: the recipe's, else 1
  CHECK_THAT(accel::describe_settings(options),
             Contains("parallelism_config:\n"
                      "  parallelism_config_dp_replicate_size: 2  # " + config + ":3\n"
                      "  parallelism_config_tp_size: 2  # " + config + ":4\n"));
  // The command line wins, key by key.
  LaunchOptions both = resolve({"t.lua", "--parallelism-config-tp-size", "4", "--parallelism-config-dp-replicate-size",
                                "1"}, config);
  CHECK(both.parallelism.tp == 4);
  CHECK(both.parallelism.dp_replicate == 1);
  CHECK(accel::describe_settings(resolve({"t.lua"}, "")).find("parallelism_config: {}\n") != std::string::npos);

  // Sizes that do not multiply to the processes are refused, naming each.
  CHECK(error_of({"t.lua", "--nproc", "2", "--parallelism-config-tp-size", "4"}, "") ==
        "the mesh's sizes multiply to 4 (--parallelism-config-tp-size 4) but the run has 2 process(es) "
        "(--nproc 2 x --nnodes 1); their product must be the number of processes");
  CHECK(error_of({"t.lua", "--nproc", "2"}, config) ==
        "the mesh's sizes multiply to 4 (key 'parallelism_config.parallelism_config_dp_replicate_size' (" + config +
            ":3) 2, key 'parallelism_config.parallelism_config_tp_size' (" + config +
            ":4) 2) but the run has 2 process(es) (--nproc 2 x --nnodes 1); their product must be the number of "
            "processes");
  auto error_for = [&](const std::string& text) { return error_of({"t.lua"}, scratch.write("bad.yaml", text)); };
  std::string bad = scratch.path("bad.yaml");
  CHECK(error_for("parallelism_config:\n  parallelism_config_tp_sise: 2\n") ==
        bad + ":2: unknown key 'parallelism_config.parallelism_config_tp_sise' (did you mean "
              "'parallelism_config.parallelism_config_tp_size'?)");
  CHECK(error_for("parallelism_config:\n  parallelism_config_tp_size: 0\n") ==
        bad + ":2: key 'parallelism_config.parallelism_config_tp_size' expects an integer from 1 to 1048576, got '0'");
  CHECK(error_for("parallelism_config: 2\n") ==
        bad + ":1: key 'parallelism_config' expects the device mesh's settings, indented below it as key: value "
              "lines, got '2'");
  CHECK_THAT(error_of({"t.lua", "--parallelism_config_tp_size", "2"}, ""),
             Contains("did you mean '--parallelism-config-tp-size'?"));
}

TEST_CASE("config_value_problem checks an answer as the file would", "[config]") {
  CHECK(accel::config_value_problem("num_processes", "4").empty());
  CHECK(accel::config_value_problem("debug", "yes").empty());
  CHECK(accel::config_value_problem("num_processes", "0") ==
        "expects an integer from 1 to 1048576, got '0'");
  CHECK_THAT(accel::config_value_problem("mixed_precision", "bf61"),
             Contains("expects one of no, bf16, fp16, fp8, got 'bf61' (did you mean 'bf16'?)"));
  CHECK(accel::config_value_problem("distributed_type", "FSDP").empty());
  CHECK(accel::config_value_problem("distributed_type", "NO").empty());
  CHECK_THAT(accel::config_value_problem("distributed_type", "fsdp"),
             Contains("got 'fsdp' (did you mean 'FSDP'?)"));
  CHECK(accel::config_value_problem("deepspeed_config.zero_stage", "3").empty());
  CHECK(accel::config_value_problem("deepspeed_config.zero_stage", "4") ==
        "expects an integer from 1 to 3, got '4'");
  CHECK(accel::config_value_problem("fsdp_config.fsdp_sharding_strategy", "2").empty());
}

TEST_CASE("edit distance and did-you-mean", "[config]") {
  CHECK(accel::edit_distance("nproc", "nproc") == 0);
  CHECK(accel::edit_distance("nprocs", "nproc") == 1);
  CHECK(accel::edit_distance("mixed_precison", "mixed_precision") == 1);
  CHECK(accel::edit_distance("backned", "backend") == 1);  // a swap is one edit
  CHECK(accel::edit_distance("num-processes", "num_processes") == 0);
  CHECK(accel::edit_distance("", "abc") == 3);
  std::vector<std::string> keys = {"num_processes", "num_machines", "debug"};
  CHECK(accel::nearest_name("num_machine", keys) == "num_machines");
  CHECK_FALSE(accel::nearest_name("verbose", keys));
  CHECK(accel::did_you_mean("debgu", keys) == " (did you mean 'debug'?)");
}
