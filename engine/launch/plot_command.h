// `accel-run plot RUN_DIR... [-o FILE.png|FILE.svg] [--metric NAME]...
//  [--smooth K] [--size W,H]`: the scalars trackers logged to metrics.jsonl,
// one chart per metric, the runs overlaid and named in each chart's key.
// Without -o the charts are drawn as text on stdout.
//
// Drawn by gnuplot (Debian's gnuplot-nox), run as a program with the
// script on its stdin: a maintained tool with PNG (pngcairo) and SVG
// output, and nothing for the launcher to link.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

namespace accel {

// `args` are those after "plot". Returns 0, 1 when gnuplot fails, 2 for a
// bad command line or unreadable runs.
int run_plot_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// What `accel-run plot --help` prints.
std::string plot_usage_text();

}  // namespace accel
