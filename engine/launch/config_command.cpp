#include "engine/launch/config_command.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <istream>
#include <ostream>

#include "engine/protocol/config_file.h"
#include "engine/protocol/launch_options.h"

namespace accel {
namespace {

struct Question {
  const char* key;
  const char* text;
  std::string fallback;  // the default answer
  // Asked only when this holds for the answers so far.
  std::function<bool(const std::vector<std::pair<std::string, std::string>>&)> when;
};

std::string answer_of(const std::vector<std::pair<std::string, std::string>>& answers,
                      const std::string& key) {
  for (const auto& [k, v] : answers) {
    if (k == key) return v;
  }
  return "";
}

bool several_machines(const std::vector<std::pair<std::string, std::string>>& answers) {
  return answer_of(answers, "num_machines") != "1";
}

// Asked when the answer to `key` was `value`.
auto answered(const char* key, const char* value) {
  return [key, value](const std::vector<std::pair<std::string, std::string>>& answers) {
    return answer_of(answers, key) == value;
  };
}

std::vector<Question> questions() {
  auto always = [](const auto&) { return true; };
  return {
      {"num_machines", "How many machines will the run use?", "1", always},
      {"machine_rank", "What is this machine's rank (0 for the main machine)?", "0",
       several_machines},
      {"main_process_ip", "What is the IP address of the main machine?", "127.0.0.1",
       several_machines},
      {"main_process_port", "Which port will the main machine's store listen on?", "29500",
       several_machines},
      {"num_processes", "How many processes in total, on all machines?", "1", always},
      {"backend", "Which collective backend (gloo, mpi)?", "gloo", always},
      {"mixed_precision", "Which mixed precision (no, bf16, fp16, fp8)?", "no", always},
      {"gradient_accumulation_steps", "How many gradient accumulation steps?", "1", always},
      {"distributed_type", "How should the Accelerator shard the model (NO, DEEPSPEED, FSDP)?", "NO",
       always},
      {"deepspeed_config.zero_stage",
       "Which ZeRO stage (1: optimizer state, 2: also gradients, 3: also parameters)?", "2",
       answered("distributed_type", "DEEPSPEED")},
      {"fsdp_config.fsdp_sharding_strategy",
       "Which FSDP sharding strategy (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD)?", "FULL_SHARD",
       answered("distributed_type", "FSDP")},
      {"fsdp_config.fsdp_auto_wrap_policy",
       "Which FSDP auto wrap policy (TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP, NO_WRAP)?", "NO_WRAP",
       answered("distributed_type", "FSDP")},
      {"fsdp_config.fsdp_transformer_layer_cls_to_wrap",
       "Which module classes does it wrap (comma-separated, e.g. Block)?", "",
       answered("fsdp_config.fsdp_auto_wrap_policy", "TRANSFORMER_BASED_WRAP")},
      {"fsdp_config.fsdp_min_num_params", "How many parameters make a wrapped unit?", "100000000",
       answered("fsdp_config.fsdp_auto_wrap_policy", "SIZE_BASED_WRAP")},
      {"fsdp_config.fsdp_offload_params", "Offload parameters and gradients to CPU memory? (yes/no)",
       "no", answered("distributed_type", "FSDP")},
      {"fsdp_config.fsdp_state_dict_type",
       "How should checkpoints hold the model (FULL_STATE_DICT, SHARDED_STATE_DICT)?",
       "FULL_STATE_DICT", answered("distributed_type", "FSDP")},
      {"debug", "Check every collective across ranks (debug mode, slower)? (yes/no)", "no", always},
      {"timeout", "After how many seconds does a collective fail the run?", "1800", always},
      {"max_restarts", "How many times may the workers restart after a failure?", "0", always},
      {"log_dir", "Which directory keeps each rank's log (empty: none)?", "", always},
  };
}

// The value as the file holds it: quoted where YAML would read another type.
std::string yaml_value(const std::string& key, const std::string& value) {
  if (key == "debug" || key == "fsdp_config.fsdp_offload_params") {
    std::string word = value;
    for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return word == "yes" || word == "true" || word == "y" || word == "on" ? "true" : "false";
  }
  if (key == "mixed_precision" || key == "log_dir" || key == "main_process_ip" ||
      key == "distributed_type" || key == "fsdp_config.fsdp_transformer_layer_cls_to_wrap") {
    std::string quoted = "'";
    for (char c : value) quoted += c == '\'' ? std::string("''") : std::string(1, c);
    return quoted + "'";
  }
  return value;
}

}  // namespace

int run_config_command(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
                       std::ostream& err) {
  bool defaults_only = false;
  std::string path;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--default") {
      defaults_only = true;
    } else if (args[i] == "--config" && i + 1 < args.size()) {
      path = args[++i];
    } else if (args[i].rfind("--config=", 0) == 0) {
      path = args[i].substr(9);
    } else {
      err << "accel-run config: unexpected argument '" << args[i]
          << "'\nusage: accel-run config [--default] [--config FILE]\n";
      return 2;
    }
  }
  if (path.empty()) path = default_config_path();

  std::vector<std::pair<std::string, std::string>> answers;
  bool input_ended = defaults_only;
  if (!defaults_only) {
    out << "accel-run config: press Enter to take the default in brackets.\n";
  }
  for (const Question& q : questions()) {
    if (!q.when(answers)) continue;
    std::string answer = q.fallback;
    while (!input_ended) {
      out << q.text << " [" << q.fallback << "]: " << std::flush;
      std::string line;
      if (!std::getline(in, line)) {
        input_ended = true;
        out << '\n';
        break;
      }
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
      while (!line.empty() && line.front() == ' ') line.erase(0, 1);
      if (line.empty()) break;
      std::string problem = config_value_problem(q.key, line);
      if (problem.empty()) {
        answer = line;
        break;
      }
      out << "  " << problem << "; try again\n";
    }
    answers.emplace_back(q.key, answer);
  }

  std::error_code error;
  std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), error);
  // Written beside the target and renamed over it once it reads back with
  // the checks of every launch, so a bad set of answers leaves no bad file.
  const std::string draft = path + ".draft";
  {
    std::ofstream file(draft, std::ios::trunc);
    file << "# accel-run's config, written by `accel-run config`; the keys mirror\n"
         << "# Accelerate's default_config.yaml. Command-line options override it.\n";
    std::string section;  // the mapping the lines go into: "fsdp_config" for "fsdp_config.x"
    for (const auto& [key, value] : answers) {
      if (value.empty()) continue;  // no log directory; no layer classes, which the check refuses
      size_t dot = key.find('.');
      std::string in_section = dot == std::string::npos ? "" : key.substr(0, dot);
      std::string name = dot == std::string::npos ? key : "  " + key.substr(dot + 1);
      if (!in_section.empty() && in_section != section) file << in_section << ":\n";
      section = in_section;
      file << name << ": " << yaml_value(key, value) << '\n';
    }
    if (!file.flush()) {
      err << "accel-run config: cannot write '" << draft << "'\n";
      std::filesystem::remove(draft, error);
      return 2;
    }
  }
  try {
    resolve_launch_options({"--config", draft}, ConfigLookup{}, 1, RecipeRule::none);
  } catch (const LaunchOptionsError& problem) {
    err << "accel-run config: the answers do not fit together: " << problem.what() << '\n';
    std::filesystem::remove(draft, error);
    return 2;
  }
  std::filesystem::rename(draft, path, error);
  if (error) {
    err << "accel-run config: cannot write '" << path << "': " << error.message() << '\n';
    return 2;
  }
  out << "accel-run config: wrote " << path << '\n';
  return 0;
}

}  // namespace accel
