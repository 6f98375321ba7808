#pragma once

// The command line of a txmq-bench workload: one parse for all of them.

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "txmq/common/manual.h"

namespace txmq::bench {

// Set while txmq-bench --man-page or --bash-completion collects the workloads' option tables:
// parse_options() then records the table it was given instead of parsing (main.cc calls each
// workload with no arguments), so the page lists exactly what each workload parses.
inline std::vector<common::manual::command>*& describe_sink() {
  static std::vector<common::manual::command>* sink = nullptr;
  return sink;
}

// Records desc for describe_sink(): the caption's first line is the synopsis, the rest (and
// `summary` before it) the description.
inline void describe_workload(const std::string& name, const std::string& summary,
                              const boost::program_options::options_description& desc) {
  // options_description has no caption accessor: it is what it prints before the first option.
  std::ostringstream printed;
  printed << desc;
  std::string caption = printed.str().substr(0, printed.str().find("\n  -"));
  if (caption.ends_with(":")) caption.pop_back();
  const auto newline = caption.find('\n');
  std::string synopsis = caption.substr(0, newline);
  if (synopsis.starts_with("txmq-bench ")) synopsis.erase(0, 11);
  std::string text = summary;
  if (newline != std::string::npos) {
    std::string rest = caption.substr(newline + 1);
    while (!rest.empty() && rest.front() == '\n') rest.erase(0, 1);
    if (rest.ends_with("Options")) rest.erase(rest.size() - 7);  // the heading of the option list
    while (!rest.empty() && (rest.back() == '\n' || rest.back() == ' ')) rest.pop_back();
    if (!rest.empty()) text += ". " + rest;
  }
  describe_sink()->push_back({name, synopsis, text, common::manual::options_of(desc)});
}

// Parses argv (argv[0] is the workload's name) against desc into vm. Returns false after
// printing desc when --help was asked for. Throws boost::program_options::error on bad input.
inline bool parse_options(int argc, char** argv, const boost::program_options::options_description& desc,
                          boost::program_options::variables_map& vm) {
  namespace po = boost::program_options;
  if (describe_sink() != nullptr) {
    describe_workload(argc > 0 ? argv[0] : "", "", desc);
    return false;
  }
  po::store(po::parse_command_line(argc, argv, desc), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return false;
  }
  return true;
}

}  // namespace txmq::bench
