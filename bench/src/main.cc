// txmq-bench: load generator for txmq. `txmq-bench storage --help` for the storage workload.

#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>

#include "latency.h"
#include "storage_bench.h"

namespace po = boost::program_options;

namespace {

std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  if (out.empty()) throw std::invalid_argument("empty list");
  return out;
}

int storage_command(int argc, char** argv) {
  txmq::bench::storage_bench_options o;
  std::string writers = "1,16,256", seconds = "5", warmup = "1", dir = "bench-data";
  po::options_description desc("txmq-bench storage [options]");
  desc.add_options()("help,h", "this help")
    ("writers", po::value(&writers)->default_value(writers), "appends in flight, comma-separated list")
    ("seconds", po::value(&seconds)->default_value(seconds), "measured time per run")
    ("warmup", po::value(&warmup)->default_value(warmup), "unmeasured time before each run")
    ("runs", po::value(&o.runs)->default_value(o.runs), "runs per writer count (medians are reported)")
    ("message-bytes", po::value(&o.message_bytes)->default_value(o.message_bytes), "message body size")
    ("messages-per-append", po::value(&o.messages_per_append)->default_value(o.messages_per_append), "messages per append request")
    ("partitions", po::value(&o.partitions)->default_value(o.partitions), "partitions of the topic")
    ("dir", po::value(&dir)->default_value(dir), "where the stores are made (the disk under test)")
    ("json", po::bool_switch(&o.json), "JSON lines instead of a table");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  po::notify(vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  o.writers = parse_list(writers);
  o.seconds = std::chrono::duration<double>(txmq::bench::parse_seconds(seconds)).count();
  o.warmup = std::chrono::duration<double>(txmq::bench::parse_seconds(warmup)).count();
  o.dir = dir;
  return txmq::bench::run_storage_bench(o);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string usage = "usage: txmq-bench storage [options]   (txmq-bench storage --help)\n";
  if (argc < 2) {
    std::cerr << usage;
    return 2;
  }
  const std::string command = argv[1];
  try {
    if (command == "storage") return storage_command(argc - 1, argv + 1);
    if (command == "--help" || command == "-h") {
      std::cout << usage;
      return 0;
    }
    std::cerr << "txmq-bench: unknown workload '" << command << "'\n" << usage;
    return 2;
  } catch (const po::error& e) {
    std::cerr << "txmq-bench: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "txmq-bench: " << e.what() << "\n";
    return 1;
  }
}
