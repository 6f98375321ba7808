#pragma once

// Network namespaces for a cluster, made by the test and removed by the destructor, even when
// the test failed (and, at construction, any left by an earlier test process that died before
// its destructor ran). Needs root and `ip`; `tc netem` is not needed (not in this kernel).
//
//   this namespace: bridge txb<pid> 10.78.N.254/24  ── the cluster network
//   member i (1..members): namespace txmqc<pid>-<i>
//     cluster link: veth txc<pid>i<a> (on the bridge) ── inside 10.78.N.i/24
//     client link:  veth txc<pid>i<c> 10.79.N.(4i+1)/30 ── inside 10.79.N.(4i+2)/30
//
// A process of member i is started through exec_prefix(i) and listens on every address of its
// namespace; it reaches the others (and etcd, listening on the bridge address) only through the
// bridge. isolate(i) takes member i's bridge port down: every packet between it and the rest of
// the cluster is dropped without a reset (a pulled cable), while this namespace still reaches
// it through its client link (client_address(i)). No route joins the two networks: inside a
// namespace only the two connected /24 and /30 routes exist, and forwarding is off here.

#include <string>
#include <vector>

namespace txmq::test {

class netns_bridge {
 public:
  explicit netns_bridge(int members);
  ~netns_bridge();
  netns_bridge(const netns_bridge&) = delete;
  netns_bridge& operator=(const netns_bridge&) = delete;

  [[nodiscard]] bool ok() const noexcept { return error_.empty(); }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }
  // The bridge's address in this namespace (etcd listens there).
  [[nodiscard]] std::string bridge_address() const;
  // Member i's address on the cluster network (it advertises this one).
  [[nodiscard]] std::string cluster_address(int i) const;
  // Member i's address on its client link, reachable from here even while it is isolated.
  [[nodiscard]] std::string client_address(int i) const;
  // {"/usr/sbin/ip", "netns", "exec", NAME}: prepend to a command line to run it in member i.
  [[nodiscard]] std::vector<std::string> exec_prefix(int i) const;
  bool isolate(int i);
  bool heal(int i);

 private:
  [[nodiscard]] std::string ns(int i) const;
  [[nodiscard]] std::string port_if(int i) const;
  int members_ = 0;
  std::string tag_, net_, bridge_, error_;
};

}  // namespace txmq::test
