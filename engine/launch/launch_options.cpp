#include "engine/launch/launch_options.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <sstream>

namespace accel {
namespace {

enum class ValueKind { none, integer, seconds, text };

// An option's value, converted according to its row's kind.
struct Value {
  std::string text;
  long long integer = 0;
  double number = 0;
};

struct OptionRow {
  const char* name;      // "--nproc"
  const char* alias;     // "-h", or nullptr
  ValueKind kind;
  const char* metavar;   // how --help names the value
  double min, max;       // accepted range of integer and seconds values
  const char* choices;   // accepted text values, space-separated; nullptr: any
  const char* help;
  void (*apply)(LaunchOptions&, const Value&);
};

// Every option accel-run knows. A new option is a new row.
const OptionRow kOptions[] = {
    {"--nproc", nullptr, ValueKind::integer, "N", 1, 4096, nullptr,
     "worker processes to start on this machine (default 1)",
     [](LaunchOptions& o, const Value& v) { o.nproc = static_cast<int>(v.integer); }},
    {"--threads", nullptr, ValueKind::integer, "N", 1, 4096, nullptr,
     "intra-op threads per rank (default: CPU cores / nproc, at least 1)",
     [](LaunchOptions& o, const Value& v) { o.threads = static_cast<int>(v.integer); }},
    {"--master-addr", nullptr, ValueKind::text, "HOST", 0, 0, nullptr,
     "address of the rendezvous store (default 127.0.0.1)",
     [](LaunchOptions& o, const Value& v) { o.master_addr = v.text; }},
    {"--master-port", nullptr, ValueKind::integer, "PORT", 0, 65535, nullptr,
     "port of the rendezvous store (default 0: a free port)",
     [](LaunchOptions& o, const Value& v) { o.master_port = static_cast<int>(v.integer); }},
    {"--backend", nullptr, ValueKind::text, "NAME", 0, 0, "gloo",
     "collective backend (default gloo)",
     [](LaunchOptions& o, const Value& v) { o.backend = v.text; }},
    {"--grace-period", nullptr, ValueKind::seconds, "SECONDS", 0, 3600, nullptr,
     "time the workers get between SIGTERM and SIGKILL when a run stops (default 5)",
     [](LaunchOptions& o, const Value& v) { o.grace_period_s = v.number; }},
    {"--help", "-h", ValueKind::none, nullptr, 0, 0, nullptr, "show this help and exit",
     [](LaunchOptions& o, const Value&) { o.help = true; }},
};

constexpr const char* kUsage = "accel-run RECIPE.lua [options] [-- recipe args]";

const OptionRow* find_option(const std::string& name) {
  for (const OptionRow& row : kOptions) {
    if (name == row.name || (row.alias && name == row.alias)) return &row;
  }
  return nullptr;
}

std::string format_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

[[noreturn]] void bad_value(const OptionRow& row, const std::string& text, const char* expected) {
  throw LaunchOptionsError(std::string(row.name) + " expects " + expected + " from " +
                           format_number(row.min) + " to " + format_number(row.max) +
                           ", got '" + text + "'");
}

Value convert(const OptionRow& row, const std::string& text) {
  Value value;
  value.text = text;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (row.kind == ValueKind::integer) {
    auto [stop, error] = std::from_chars(begin, end, value.integer);
    if (text.empty() || error != std::errc() || stop != end || value.integer < row.min ||
        value.integer > row.max) {
      bad_value(row, text, "an integer");
    }
  } else if (row.kind == ValueKind::seconds) {
    auto [stop, error] = std::from_chars(begin, end, value.number);
    // The negated test also rejects NaN.
    if (text.empty() || error != std::errc() || stop != end ||
        !(value.number >= row.min && value.number <= row.max)) {
      bad_value(row, text, "a number of seconds");
    }
  } else if (row.kind == ValueKind::text && row.choices) {
    std::istringstream choices(row.choices);
    std::string choice;
    bool accepted = false;
    while (choices >> choice) accepted = accepted || choice == text;
    if (!accepted) {
      throw LaunchOptionsError("unsupported " + std::string(row.name) + " '" + text +
                               "' (supported: " + row.choices + ")");
    }
  }
  return value;
}

bool looks_like_option(const std::string& arg) { return arg.size() > 1 && arg[0] == '-'; }

// Whether `arg` is "--" or one of the options, so it cannot be the value of
// the option before it; anything else can (`--nproc -1` is a bad value, not a
// missing one).
bool is_known_option(const std::string& arg) {
  return arg == "--" || find_option(arg.substr(0, arg.find('='))) != nullptr;
}

}  // namespace

LaunchOptions parse_launch_options(const std::vector<std::string>& args, int cpu_cores) {
  LaunchOptions options;
  options.threads = 0;  // not given yet
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      options.recipe_args.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (!looks_like_option(arg)) {
      if (!options.recipe.empty()) {
        throw LaunchOptionsError("unexpected argument '" + arg + "' after the recipe '" +
                                 options.recipe + "'; recipe arguments go after '--', as in: " +
                                 "accel-run " + options.recipe + " -- " + arg);
      }
      options.recipe = arg;
      continue;
    }
    size_t equals = arg.rfind("--", 0) == 0 ? arg.find('=') : std::string::npos;
    std::string name = arg.substr(0, equals);
    const OptionRow* row = find_option(name);
    if (!row) throw LaunchOptionsError("unknown option '" + name + "'");
    std::string text;
    if (row->kind == ValueKind::none) {
      if (equals != std::string::npos) throw LaunchOptionsError(name + " takes no value");
    } else if (equals != std::string::npos) {
      text = arg.substr(equals + 1);
    } else if (i + 1 < args.size() && !is_known_option(args[i + 1])) {
      text = args[++i];
    } else {
      throw LaunchOptionsError(name + " needs a value (" + row->metavar + ")");
    }
    row->apply(options, convert(*row, text));
  }
  if (options.recipe.empty() && !options.help) {
    throw LaunchOptionsError(std::string("no recipe given; usage: ") + kUsage);
  }
  if (options.threads == 0) options.threads = std::max(1, cpu_cores / options.nproc);
  return options;
}

std::string usage_text() {
  std::ostringstream out;
  out << "usage: " << kUsage << "\n\n"
      << "Runs a Lua training recipe on worker processes and supervises them.\n\n"
      << "options:\n";
  for (const OptionRow& row : kOptions) {
    std::string names = row.alias ? std::string(row.alias) + ", " + row.name : row.name;
    if (row.metavar) names += std::string(" ") + row.metavar;
    out << "  " << names << std::string(names.size() < 24 ? 24 - names.size() : 1, ' ')
        << row.help << '\n';
  }
  return out.str();
}

}  // namespace accel
