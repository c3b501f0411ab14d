#include "engine/launch/gnuplot_script.h"

#include <charconv>
#include <cmath>

#include "engine/utf8/utf8.h"

namespace accel::plot {

// Matplotlib's first colours: distinct, and what readers of charts know.
const char* const kSeriesColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
const int kSeriesColourCount = sizeof(kSeriesColours) / sizeof(kSeriesColours[0]);

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void append_number(std::string& out, double value) {
  char digits[32];
  auto result = std::to_chars(digits, digits + sizeof(digits), value);
  out.append(digits, result.ptr);
}

// Each point the mean of it and the smooth - 1 before it, within the
// stretch of finite values it lies in: a value that is not finite (NaN,
// Infinity) stays as it is, a gap, and the mean starts anew after it.
std::vector<std::pair<double, double>> smoothed(const std::vector<std::pair<double, double>>& points,
                                                int smooth) {
  if (smooth <= 1) return points;
  std::vector<std::pair<double, double>> out;
  out.reserve(points.size());
  double sum = 0;
  size_t first = 0;  // the first point of the current finite stretch
  for (size_t i = 0; i < points.size(); ++i) {
    if (!std::isfinite(points[i].second)) {
      out.push_back(points[i]);
      sum = 0;
      first = i + 1;
      continue;
    }
    sum += points[i].second;
    if (i - first >= static_cast<size_t>(smooth)) sum -= points[i - smooth].second;
    const size_t n = std::min(i - first + 1, static_cast<size_t>(smooth));
    out.emplace_back(points[i].first, sum / static_cast<double>(n));
  }
  return out;
}

std::string terminal(const Chart& chart, int rows, int cols) {
  if (chart.output.empty()) {
    const int w = chart.width > 0 ? chart.width : 100;
    const int h = chart.height > 0 ? chart.height : 25 * rows;
    return "set terminal dumb noenhanced size " + std::to_string(w) + "," + std::to_string(h) + "\n";
  }
  const int w = chart.width > 0 ? chart.width : 640 * cols;
  const int h = chart.height > 0 ? chart.height : 420 * rows;
  const std::string size = " size " + std::to_string(w) + "," + std::to_string(h);
  const std::string kind = ends_with(chart.output, ".svg") ? "svg" : "pngcairo";
  return "set terminal " + kind + " noenhanced" + size + (kind == "svg" ? " background '#ffffff'" : "") +
         "\nset output " + gnuplot_string(chart.output) + "\n";
}

}  // namespace

std::string gnuplot_string(const std::string& text) {
  // A quote is never written inside a literal: gnuplot 5.4 ends a
  // single-quoted string at a quote that follows a doubled pair, so a name
  // holding '' (or starting with ') would end its literal early. The text
  // is split at its quotes into literals joined by sprintf('%c', 39), one
  // parenthesised string expression.
  std::string out = "('";
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8::sequence_length(text, i);
    const auto c = static_cast<unsigned char>(text[i]);
    if (n > 1) {
      out.append(text, i, n);  // a character past ASCII: text only
      i += n;
      continue;
    }
    if (c == '\'') {
      out += "' . sprintf('%c', 39) . '";
    } else if (n == 1 && c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      out += '?';  // a control character (a newline would end the string) or a stray byte
    }
    ++i;
  }
  return out + "')";
}

std::string gnuplot_script(const Chart& chart, const std::vector<std::string>& metrics,
                           const std::vector<RunMetrics>& runs) {
  const int count = static_cast<int>(metrics.size());
  const int cols = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(count))));
  const int rows = (count + cols - 1) / cols;
  std::string script = terminal(chart, rows, cols);
  // Data blocks, $m<metric>_<run>, of formatted numbers only.
  for (int m = 0; m < count; ++m) {
    for (size_t r = 0; r < runs.size(); ++r) {
      auto found = runs[r].series.find(metrics[m]);
      if (found == runs[r].series.end()) continue;
      script += "$m" + std::to_string(m) + "_" + std::to_string(r) + " << EOD\n";
      for (const auto& [step, value] : smoothed(found->second, chart.smooth)) {
        if (!std::isfinite(value)) {
          script += '\n';  // a blank line: gnuplot does not join the line across it
          continue;
        }
        append_number(script, step);
        script += ' ';
        append_number(script, value);
        script += '\n';
      }
      script += "EOD\n";
    }
  }
  script += "set multiplot layout " + std::to_string(rows) + "," + std::to_string(cols) + "\n";
  script += "set grid\nset key top right\nset xlabel 'step'\n";
  for (int m = 0; m < count; ++m) {
    const std::string name = gnuplot_string(metrics[m]);
    std::string title = metrics[m];
    if (chart.smooth > 1) title += " (mean of " + std::to_string(chart.smooth) + ")";
    script += "set title " + gnuplot_string(title) + "\nset ylabel " + name + "\nplot ";
    bool first = true;
    for (size_t r = 0; r < runs.size(); ++r) {
      if (!runs[r].series.count(metrics[m])) continue;
      if (!first) script += ", \\\n     ";
      first = false;
      script += "$m" + std::to_string(m) + "_" + std::to_string(r) + " using 1:2 with lines linewidth 2 linecolor rgb '" +
                kSeriesColours[r % kSeriesColourCount] + "' title " + gnuplot_string(runs[r].name);
    }
    script += "\n";
  }
  script += "unset multiplot\n";
  return script;
}

}  // namespace accel::plot
