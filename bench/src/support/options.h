#pragma once

// The command line of a txmq-bench workload: one parse for all of them.

#include <iostream>

#include <boost/program_options.hpp>

namespace txmq::bench {

// Parses argv (argv[0] is the workload's name) against desc into vm. Returns false after
// printing desc when --help was asked for. Throws boost::program_options::error on bad input.
inline bool parse_options(int argc, char** argv, const boost::program_options::options_description& desc,
                          boost::program_options::variables_map& vm) {
  namespace po = boost::program_options;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return false;
  }
  return true;
}

}  // namespace txmq::bench
