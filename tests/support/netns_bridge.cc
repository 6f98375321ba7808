// Network namespaces joined by a bridge (netns_bridge.h).

#include "netns_bridge.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <sstream>

#include "fault_support.h"

namespace txmq::test {

namespace {

// Namespaces and bridges named after a process that no longer runs are left over from a test
// killed before its destructor ran (a ctest timeout): remove them so that they do not pile up.
void remove_leftovers() {
  std::istringstream names(shell_stdout("ip netns list 2>/dev/null"));
  for (std::string line; std::getline(names, line);) {
    if (line.rfind("txmqc", 0) != 0) continue;
    const auto name = line.substr(0, line.find(' '));
    const auto dash = name.find('-');
    if (dash == std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::atoi(name.substr(5, dash - 5).c_str()));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) (void)run_shell("ip netns del " + name);
  }
  std::istringstream links(shell_stdout("ip -o link show type bridge 2>/dev/null"));
  for (std::string line; std::getline(links, line);) {
    const auto a = line.find(": txb");
    if (a == std::string::npos) continue;
    const auto name = line.substr(a + 2, line.find(':', a + 2) - (a + 2));
    const pid_t pid = static_cast<pid_t>(std::atoi(name.substr(3).c_str()));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) (void)run_shell("ip link del " + name);
  }
}

}  // namespace

netns_bridge::netns_bridge(int members) : members_(members) {
  remove_leftovers();
  tag_ = std::to_string(::getpid());
  net_ = std::to_string(::getpid() % 250);
  bridge_ = "txb" + tag_;
  std::vector<std::string> steps = {
      "ip link add " + bridge_ + " type bridge",
      "ip addr add " + bridge_address() + "/24 dev " + bridge_,
      "ip link set " + bridge_ + " up",
  };
  for (int i = 1; i <= members; ++i) {
    const std::string n = ns(i), a = port_if(i), b = "txc" + tag_ + "i" + std::to_string(i) + "b";
    const std::string c = "txc" + tag_ + "c" + std::to_string(i), d = "txc" + tag_ + "d" + std::to_string(i);
    const std::string host_side = "10.79." + net_ + "." + std::to_string(4 * i + 1);
    steps.insert(steps.end(), {
        "ip netns add " + n,
        "ip link add " + a + " type veth peer name " + b,
        "ip link set " + a + " master " + bridge_,
        "ip link set " + a + " up",
        "ip link set " + b + " netns " + n,
        "ip netns exec " + n + " ip addr add " + cluster_address(i) + "/24 dev " + b,
        "ip netns exec " + n + " ip link set " + b + " up",
        "ip link add " + c + " type veth peer name " + d,
        "ip addr add " + host_side + "/30 dev " + c,
        "ip link set " + c + " up",
        "ip link set " + d + " netns " + n,
        "ip netns exec " + n + " ip addr add " + client_address(i) + "/30 dev " + d,
        "ip netns exec " + n + " ip link set " + d + " up",
        "ip netns exec " + n + " ip link set lo up",
    });
  }
  for (const auto& step : steps) {
    std::string out;
    if (run_shell(step, &out) != 0) {
      error_ = step + ": " + out;
      return;
    }
  }
}

netns_bridge::~netns_bridge() {
  // Deleting a namespace deletes the veth ends inside it, and so both pairs of the member.
  for (int i = 1; i <= members_; ++i) (void)run_shell("ip netns del " + ns(i));
  (void)run_shell("ip link del " + bridge_);
}

std::string netns_bridge::ns(int i) const { return "txmqc" + tag_ + "-" + std::to_string(i); }
std::string netns_bridge::port_if(int i) const { return "txc" + tag_ + "i" + std::to_string(i) + "a"; }
std::string netns_bridge::bridge_address() const { return "10.78." + net_ + ".254"; }
std::string netns_bridge::cluster_address(int i) const { return "10.78." + net_ + "." + std::to_string(i); }
std::string netns_bridge::client_address(int i) const {
  return "10.79." + net_ + "." + std::to_string(4 * i + 2);
}

std::vector<std::string> netns_bridge::exec_prefix(int i) const {
  // child_process runs a path, not a name looked up in PATH.
  const char* ip = std::filesystem::exists("/usr/sbin/ip") ? "/usr/sbin/ip" : "/sbin/ip";
  return {ip, "netns", "exec", ns(i)};
}

bool netns_bridge::isolate(int i) { return run_shell("ip link set " + port_if(i) + " down") == 0; }

bool netns_bridge::heal(int i) { return run_shell("ip link set " + port_if(i) + " up") == 0; }

}  // namespace txmq::test
