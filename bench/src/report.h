#pragma once

// `txmq-bench report`: turns the JSON lines of a peers run (scripts/bench-peers.sh) into the
// Markdown tables of docs/BENCHMARKS.md and a data file for gnuplot: medians per system and
// workload over the rounds, and the ratios the goals of issue #7 ask for.

#include <string>
#include <vector>

namespace txmq::bench {

struct report_options {
  std::vector<std::string> inputs;  // files of JSON lines; lines that do not parse are skipped
  std::string markdown;             // where the tables go ("-" = stdout)
  std::string plot_data;            // gnuplot data (empty = none)
};

// Returns 0, or 2 when no input line could be read.
int run_report(const report_options& options);

}  // namespace txmq::bench
