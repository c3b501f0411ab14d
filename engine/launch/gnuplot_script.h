// The gnuplot script accel-run plot runs: one chart per metric, laid out in
// a grid on one page, every run a line of its own colour, named in the key.
//
// Nothing read from a file becomes gnuplot code: the points are numbers
// this code formats, inside data blocks; run and metric names go in
// single-quoted strings (where gnuplot expands neither `command` nor
// @macro), split at their quotes (each written as sprintf('%c', 39)), with
// control characters and bytes that are not UTF-8 replaced, and the
// terminal is noenhanced so no markup applies. Values that are not finite
// are gaps in their line.
#pragma once
#include <string>
#include <vector>

#include "engine/launch/run_metrics.h"

namespace accel::plot {

struct Chart {
  std::string output;  // FILE.png, FILE.svg, or empty for text on stdout
  int width = 0;       // pixels (characters for text); 0: a default per chart
  int height = 0;
  int smooth = 1;      // points averaged into each one drawn (a trailing mean)
};

// The colours lines take, run by run (repeating past the last).
extern const char* const kSeriesColours[];
extern const int kSeriesColourCount;

// `text` as a gnuplot string expression: single-quoted literals joined by
// sprintf('%c', 39) where the text has quotes, parenthesised.
std::string gnuplot_string(const std::string& text);

// The script drawing `metrics` (each a chart) of `runs`.
std::string gnuplot_script(const Chart& chart, const std::vector<std::string>& metrics,
                           const std::vector<RunMetrics>& runs);

}  // namespace accel::plot
