#include "fault_support.h"

#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "eventually.h"
#include "txmq/common/units.h"

namespace txmq::test {

void print_fault_counts(const std::string& test, std::size_t acknowledged, std::size_t consumed, std::size_t lost,
                        std::size_t invented, const std::string& extra) {
  std::ostringstream os;
  os << "FAULT-COUNTS test=" << test << " acknowledged=" << acknowledged << " consumed=" << consumed << " lost=" << lost
     << " invented=" << invented;
  if (!extra.empty()) os << ' ' << extra;
  std::cerr << os.str() << std::endl;
}

fault_counts count_outcome(const std::set<std::string>& sent, const std::set<std::string>& acknowledged,
                           const std::set<std::string>& consumed) {
  fault_counts c{acknowledged.size(), consumed.size(), 0, 0};
  for (const auto& id : acknowledged) c.lost += consumed.count(id) == 0 ? 1 : 0;
  for (const auto& id : consumed) c.invented += sent.count(id) == 0 ? 1 : 0;
  return c;
}

std::chrono::milliseconds fault_pause(std::chrono::milliseconds fallback, const char* env) {
  const char* v = std::getenv(env);
  if (v == nullptr || *v == '\0') return fallback;
  auto d = common::parse_duration(v);
  if (!d) throw std::runtime_error(std::string(env) + ": " + d.error().message);
  return d.value();
}

bool wait_stopped(pid_t pid, std::chrono::milliseconds deadline) {
  const auto all_stopped = [pid] {
    std::error_code ec;
    for (const auto& t : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
      std::ifstream stat(t.path() / "stat");
      std::string line;
      if (!std::getline(stat, line)) continue;  // the thread ended meanwhile
      const auto close = line.rfind(')');
      if (close == std::string::npos || close + 2 >= line.size()) return false;
      const char state = line[close + 2];
      if (state != 'T' && state != 't') return false;
    }
    return true;  // every thread stopped, or the process is gone (nothing to wait for)
  };
  return eventually(all_stopped, deadline);
}

frozen::frozen(std::vector<pid_t> pids) : pids_(std::move(pids)) {
  for (pid_t p : pids_) ::kill(p, SIGSTOP);
  for (pid_t p : pids_) wait_stopped(p);
}

frozen::~frozen() { thaw(); }

void frozen::thaw() {
  for (pid_t p : pids_) ::kill(p, SIGCONT);
  pids_.clear();
}

std::vector<pid_t> process_tree(pid_t root) {
  std::multimap<pid_t, pid_t> children;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const auto name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    children.emplace(ppid, static_cast<pid_t>(std::stol(name)));
  }
  std::vector<pid_t> out{root};
  for (std::size_t i = 0; i < out.size(); ++i) {
    auto [b, e] = children.equal_range(out[i]);
    for (auto it = b; it != e; ++it) out.push_back(it->second);
  }
  return out;
}

std::uint64_t rss_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  }
  return 0;
}

std::uint64_t raise_own_nofile_limit() {
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) != 0) return 0;
  l.rlim_cur = l.rlim_max;
  (void)setrlimit(RLIMIT_NOFILE, &l);
  getrlimit(RLIMIT_NOFILE, &l);
  return l.rlim_cur;
}

int run_shell(const std::string& command, std::string* out) {
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) {
    if (out) out->append(buf, n);
  }
  const int st = ::pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

std::string shell_stdout(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ::pclose(p);
  return out;
}

tmpfs_mount::tmpfs_mount(const std::filesystem::path& dir, const std::string& size) : dir_(dir) {
  std::filesystem::create_directories(dir);
  const std::string opts = "size=" + size + ",mode=0700";
  mounted_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, opts.c_str()) == 0;
  if (!mounted_) error_ = std::strerror(errno);
}

tmpfs_mount::~tmpfs_mount() {
  if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
}

bool tmpfs_mount::resize(const std::string& size) {
  const std::string opts = "size=" + size + ",mode=0700";
  return ::mount("tmpfs", dir_.c_str(), "tmpfs", MS_REMOUNT, opts.c_str()) == 0;
}

netns_link::netns_link() {
  const auto pid = std::to_string(::getpid());
  const auto net = std::to_string(::getpid() % 250);
  name_ = "txmqf" + pid;
  host_if_ = "txf" + pid + "a";  // interface names: at most 15 characters
  inside_if_ = "txf" + pid + "b";
  inside_ = "10.77." + net + ".2";
  const std::vector<std::string> steps = {
      "ip netns add " + name_,
      "ip link add " + host_if_ + " type veth peer name " + inside_if_,
      "ip link set " + inside_if_ + " netns " + name_,
      "ip addr add 10.77." + net + ".1/30 dev " + host_if_,
      "ip link set " + host_if_ + " up",
      "ip netns exec " + name_ + " ip addr add " + inside_ + "/30 dev " + inside_if_,
      "ip netns exec " + name_ + " ip link set " + inside_if_ + " up",
      "ip netns exec " + name_ + " ip link set lo up",
  };
  for (const auto& step : steps) {
    std::string out;
    if (run_shell(step, &out) != 0) {
      error_ = step + ": " + out;
      return;
    }
  }
}

netns_link::~netns_link() {
  // Deleting the namespace deletes its end of the pair, and so the pair.
  (void)run_shell("ip netns del " + name_);
  (void)run_shell("ip link del " + host_if_);
}

std::vector<std::string> netns_link::exec_prefix() const {
  // child_process runs a path, not a name looked up in PATH.
  const char* ip = std::filesystem::exists("/usr/sbin/ip") ? "/usr/sbin/ip" : "/sbin/ip";
  return {ip, "netns", "exec", name_};
}

bool netns_link::cut() { return run_shell("ip link set " + host_if_ + " down") == 0; }

bool netns_link::restore() {
  // The route of the /30 comes back with the link; so do the connections that survived.
  return run_shell("ip link set " + host_if_ + " up") == 0;
}

}  // namespace txmq::test
