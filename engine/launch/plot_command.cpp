#include "engine/launch/plot_command.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ostream>
#include <set>
#include <sstream>

#include "engine/launch/gnuplot_script.h"

extern char** environ;

namespace accel {
namespace {

// The most charts one page holds: 2,500 metrics drew a 32000x21000 image.
constexpr size_t kMaxCharts = 36;
// The largest image side --size takes, in pixels (or characters).
constexpr int kMaxSide = 10000;

struct PlotOptions {
  std::vector<std::string> runs;
  std::vector<std::string> metrics;
  plot::Chart chart;
  bool help = false;
};

int positive(const std::string& option, const std::string& text) {
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value < 1) {
    throw plot::PlotError(option + " takes a positive integer, got '" + text + "'");
  }
  return value;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

PlotOptions parse(const std::vector<std::string>& args) {
  PlotOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&]() -> const std::string& {
      if (i + 1 >= args.size()) throw plot::PlotError(arg + " needs a value");
      return args[++i];
    };
    if (arg == "-h" || arg == "--help") {
      o.help = true;
    } else if (arg == "-o" || arg == "--output") {
      o.chart.output = value();
      if (!ends_with(o.chart.output, ".png") && !ends_with(o.chart.output, ".svg")) {
        throw plot::PlotError("-o names a .png or .svg file, got '" + o.chart.output + "'");
      }
    } else if (arg == "--metric") {
      o.metrics.push_back(value());
    } else if (arg == "--smooth") {
      o.chart.smooth = positive(arg, value());
    } else if (arg == "--size") {
      const std::string& size = value();
      const size_t comma = size.find_first_of(",x");
      if (comma == std::string::npos) throw plot::PlotError("--size takes W,H, got '" + size + "'");
      o.chart.width = positive("--size", size.substr(0, comma));
      o.chart.height = positive("--size", size.substr(comma + 1));
      if (o.chart.width > kMaxSide || o.chart.height > kMaxSide) {
        throw plot::PlotError("--size takes at most " + std::to_string(kMaxSide) + " on each side, got '" + size + "'");
      }
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw plot::PlotError("unknown option '" + arg + "'");
    } else {
      o.runs.push_back(arg);
    }
  }
  if (!o.help && o.runs.empty()) throw plot::PlotError("name at least one run folder");
  return o;
}

// Every metric asked for (each must be in some run), else every metric of
// every run, by name.
std::vector<std::string> every_chosen_metric(const PlotOptions& o, const std::vector<plot::RunMetrics>& runs) {
  std::set<std::string> known;
  for (const auto& run : runs) {
    for (const auto& [name, points] : run.series) known.insert(name);
  }
  if (known.empty()) throw plot::PlotError("the runs hold no metrics yet");
  if (o.metrics.empty()) return {known.begin(), known.end()};
  for (const std::string& name : o.metrics) {
    if (!known.count(name)) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      throw plot::PlotError("no run has a metric '" + name + "' (they have: " + list + ")");
    }
  }
  return o.metrics;
}

// The metrics to draw: those asked for (each must be in some run), else
// every metric of every run, by name; at most kMaxCharts of them, the
// others named on `err` as left out.
std::vector<std::string> chosen_metrics(const PlotOptions& o, const std::vector<plot::RunMetrics>& runs,
                                        std::ostream& err) {
  std::vector<std::string> all = every_chosen_metric(o, runs);
  if (all.size() <= kMaxCharts) return all;
  std::string left_out;
  for (size_t i = kMaxCharts; i < all.size() && i < kMaxCharts + 20; ++i) {
    left_out += (left_out.empty() ? "" : ", ") + all[i];
  }
  if (all.size() > kMaxCharts + 20) left_out += ", ...";
  err << "accel-run plot: " << all.size() - kMaxCharts << " of " << all.size() << " metrics are not drawn (a page holds "
      << kMaxCharts << " charts; choose them with --metric): " << left_out << "\n";
  all.resize(kMaxCharts);
  return all;
}

// Says which metrics of which runs have values that are not finite, drawn as gaps.
void say_gaps(const std::vector<std::string>& metrics, const std::vector<plot::RunMetrics>& runs, std::ostream& err) {
  for (const auto& run : runs) {
    for (const std::string& metric : metrics) {
      auto found = run.non_finite.find(metric);
      if (found == run.non_finite.end()) continue;
      std::ostringstream step;
      step << found->second.first_step;
      err << "accel-run plot: " << run.name << ": '" << metric << "' has " << found->second.count
          << (found->second.count == 1 ? " value that is" : " values that are") << " NaN or infinite (the first at step "
          << step.str() << "), drawn as gaps\n";
    }
  }
}

// Runs gnuplot with `script` on its stdin; returns its exit status, or -1
// when it could not start (errno says why).
int run_gnuplot(const std::string& script) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[0], STDIN_FILENO);
  char name[] = "gnuplot";
  char* argv[] = {name, nullptr};
  pid_t pid = 0;
  const int spawned = ::posix_spawnp(&pid, "gnuplot", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[0]);
  if (spawned != 0) {
    ::close(fds[1]);
    errno = spawned;
    return -1;
  }
  // gnuplot exiting early must be an exit status here, not a SIGPIPE.
  struct sigaction ignore {}, previous {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &previous);
  size_t done = 0;
  while (done < script.size()) {
    ssize_t n = ::write(fds[1], script.data() + done, script.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fds[1]);
  ::sigaction(SIGPIPE, &previous, nullptr);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

std::string plot_usage_text() {
  return "usage: accel-run plot RUN_DIR... [-o FILE.png|FILE.svg] [--metric NAME]... [--smooth K] [--size W,H]\n"
         "  Draws the scalars trackers logged (RUN_DIR/metrics.jsonl, Accelerator{log_with = \"jsonl\"}),\n"
         "  one chart per metric, the runs overlaid and named. A run still being written can be plotted.\n"
         "  -o FILE      write a PNG or SVG image (default: text charts on stdout)\n"
         "  --metric M   draw metric M only (repeatable; default: every metric)\n"
         "  --smooth K   draw each point as the mean of it and the K-1 before it\n"
         "  --size W,H   the image's size in pixels (characters for text)\n";
}

int run_plot_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::string script;
  try {
    PlotOptions o = parse(args);
    if (o.help) {
      out << plot_usage_text();
      return 0;
    }
    std::vector<plot::RunMetrics> runs;
    for (const std::string& run : o.runs) runs.push_back(plot::read_run_metrics(run));
    const std::vector<std::string> metrics = chosen_metrics(o, runs, err);
    say_gaps(metrics, runs, err);
    script = plot::gnuplot_script(o.chart, metrics, runs);
  } catch (const plot::PlotError& e) {
    err << "accel-run plot: error: " << e.what() << "\n";
    return 2;
  }
  out.flush();  // text charts follow what was printed before
  const int status = run_gnuplot(script);
  if (status < 0) {
    err << "accel-run plot: cannot run gnuplot: " << std::strerror(errno)
        << " (Debian's gnuplot-nox provides it: scripts/setup.sh installs it)\n";
    return 1;
  }
  if (status != 0) {
    err << "accel-run plot: gnuplot failed (exit status " << status << ")\n";
    return 1;
  }
  return 0;
}

}  // namespace accel
