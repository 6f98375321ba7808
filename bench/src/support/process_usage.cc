#include "support/process_usage.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace txmq::bench {
namespace {

struct stat_fields {
  int ppid = 0;
  double cpu_s = 0;
};

// Fields after the command name, which may itself hold spaces and parentheses.
std::optional<stat_fields> read_stat(const std::filesystem::path& dir) {
  std::ifstream in(dir / "stat");
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = content.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(content.substr(close + 2));
  std::vector<std::string> f;
  std::string field;
  while (f.size() < 15 && rest >> field) f.push_back(field);
  if (f.size() < 15) return std::nullopt;
  // f[0] is field 3 (state): ppid is field 4; utime, stime, cutime, cstime are fields 14 to 17.
  // Counting the reaped children's time (cutime, cstime) keeps the CPU of short-lived workers.
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  stat_fields s;
  s.ppid = std::stoi(f[1]);
  for (int i = 11; i <= 14; ++i) s.cpu_s += std::stod(f[static_cast<std::size_t>(i)]) / tick;
  return s;
}

// Pss from smaps_rollup (kB), or VmRSS where the kernel has no rollup.
double memory_mib(const std::filesystem::path& dir) {
  for (const auto& [file, key] : {std::pair{"smaps_rollup", "Pss:"}, std::pair{"status", "VmRSS:"}}) {
    std::ifstream in(dir / file);
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind(key, 0) == 0) return std::stod(line.substr(std::string(key).size())) / 1024.0;
    }
  }
  return 0;
}

}  // namespace

process_usage process_tree_usage(int pid) {
  process_usage u;
  if (pid <= 0) return u;
  std::map<int, stat_fields> all;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const auto name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (auto s = read_stat(entry.path())) all.emplace(std::stoi(name), *s);
  }
  std::vector<int> tree{pid};
  for (std::size_t i = 0; i < tree.size(); ++i) {
    for (const auto& [p, s] : all) {
      if (s.ppid == tree[i]) tree.push_back(p);
    }
  }
  for (int p : tree) {
    const auto it = all.find(p);
    if (it == all.end()) continue;
    u.cpu_s += it->second.cpu_s;
    u.rss_mib += memory_mib("/proc/" + std::to_string(p));
  }
  return u;
}

}  // namespace txmq::bench
