// A flood of silent and slow connections against the broker and its admin HTTP server
// (issue 13 item 6, docs/operations.md "Connection floods"): 5,000 TCP connections to the
// broker that never say Hello, 5,000 to the admin HTTP server that never send a request, 200
// slowloris senders (one byte a second: 100 dribbling a Hello, 100 dribbling a frame after
// Hello) and 200 dribbling an HTTP request. Closed sockets are reopened for the whole flood,
// so the pressure holds. Meanwhile a well-behaved client is served with p99 under 50 ms more
// than a control broker's (requests on its connection, new connections with Hello, /healthz;
// p99_bound() says how a busy machine widens it); the silent broker
// connections are closed after hello_timeout (2 s here) and not before; the slow ones after
// hello_timeout or frame_read_timeout (3 s here); the admin server holds at most its 64
// connections; the broker's RSS stays bounded. Prints a FAULT-COUNTS line with the figures.

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <atomic>
#include <map>
#include <thread>
#include <unordered_map>

#include <gtest/gtest.h>

#include "broker_process.h"
#include "eventually.h"
#include "fault_support.h"
#include "raw_client.h"
#include "txmq/protocol/frame_codec.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

enum kind { idle_broker, idle_http, slow_hello, slow_frame, slow_http, kinds };
const char* const k_kind_names[kinds] = {"idle_broker", "idle_http", "slow_hello", "slow_frame", "slow_http"};

std::string frame_header(std::uint32_t length) {
  return {static_cast<char>(length >> 24), static_cast<char>(length >> 16), static_cast<char>(length >> 8),
          static_cast<char>(length)};
}

std::string hello_bytes() {
  v1::Frame f;
  f.set_correlation_id(1);
  f.mutable_hello()->set_protocol_version(1);
  f.mutable_hello()->set_client_id("slowloris");
  std::string out;
  (void)protocol::encode_frame(f, out);
  return out;
}

// Every flood socket, on one epoll in one thread: opened non-blocking, counted open once the
// connect completes, and its lifetime recorded when the server closes it.
class flood {
 public:
  flood(std::uint16_t broker_port, std::uint16_t http_port) : ports_{broker_port, http_port} {
    ep_ = epoll_create1(EPOLL_CLOEXEC);
  }
  ~flood() {
    for (auto& [fd, s] : sockets_) ::close(fd);
    ::close(ep_);
  }

  struct stats {
    std::vector<ms> lifetimes[kinds];  // connect to the server's close, per kind
    std::size_t opened[kinds] = {};
    std::size_t failed = 0;            // connects that did not complete
    std::size_t max_open_http = 0;     // our HTTP sockets open at once (accepted or still queued)
  };

  // Keeps `want` sockets of each kind open until `until`, then waits until `drain_until` for
  // the broker's to close (HTTP ones left open are closed by us).
  stats run(const std::size_t (&want)[kinds], clock_type::time_point until, clock_type::time_point drain_until) {
    auto next_dribble = clock_type::now() + 1s;
    while (true) {
      const auto now = clock_type::now();
      const bool flooding = now < until;
      if (flooding) {
        // The broker's kinds are reopened as they close (each lives hello_timeout or
        // frame_read_timeout, so the flood holds ~5,000 at a time); the HTTP ones are opened
        // once: the admin server closes them down to its limit at once, and reopening those at
        // full speed would be a connection-rate flood, another attack.
        for (int k = 0; k < kinds; ++k) {
          const bool once = k == idle_http || k == slow_http;
          while (once ? st_.opened[k] < want[k] : open_[k] < want[k]) open(static_cast<kind>(k));
        }
      } else if (open_[idle_broker] + open_[slow_hello] + open_[slow_frame] == 0 || now >= drain_until) {
        break;
      }
      if (now >= next_dribble) {
        dribble();
        next_dribble += 1s;
      }
      epoll_event events[256];
      const int n = epoll_wait(ep_, events, 256, 50);
      for (int i = 0; i < n; ++i) handle(events[i]);
      st_.max_open_http = std::max(st_.max_open_http, open_[idle_http] + open_[slow_http]);
    }
    return st_;
  }

  [[nodiscard]] std::size_t still_open(kind k) const { return open_[k]; }

 private:
  struct sock {
    kind k;
    bool connected = false;
    clock_type::time_point since;
    std::string dribble;  // sent one byte a second
    std::size_t sent = 0;
  };

  void open(kind k) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) throw std::runtime_error("socket: out of descriptors?");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(ports_[k == idle_http || k == slow_http ? 1 : 0]);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int r = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    if (r != 0 && errno != EINPROGRESS) {
      ::close(fd);
      ++st_.failed;
      return;
    }
    sock s{k, false, clock_type::now(), {}, 0};
    if (k == slow_hello) s.dribble = hello_bytes();
    if (k == slow_frame) s.dribble = frame_header(100) + std::string(100, 'x');
    if (k == slow_http) s.dribble = "GET /healthz HTTP/1.1\r\nHost: txmq\r\n\r\n";
    epoll_event ev{};
    ev.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
    sockets_.emplace(fd, std::move(s));
    ++open_[k];
    ++st_.opened[k];
  }

  void handle(const epoll_event& e) {
    auto it = sockets_.find(e.data.fd);
    if (it == sockets_.end()) return;
    sock& s = it->second;
    if (!s.connected && (e.events & EPOLLOUT) && !(e.events & EPOLLERR)) {
      s.connected = true;  // lifetimes count from connect(): loopback completes it at once
      if (s.k == slow_frame) {  // Hello at once, then a frame dribbled
        const auto h = hello_bytes();
        (void)::send(e.data.fd, h.data(), h.size(), MSG_NOSIGNAL);
      }
      epoll_event ev{};
      ev.events = EPOLLIN | EPOLLRDHUP;
      ev.data.fd = e.data.fd;
      epoll_ctl(ep_, EPOLL_CTL_MOD, e.data.fd, &ev);
    }
    if (!(e.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))) return;
    // Read what the server said (HelloOk, an Error frame, an HTTP answer) until EOF or empty.
    char buf[4096];
    bool closed = (e.events & (EPOLLHUP | EPOLLERR)) != 0;
    for (;;) {
      const auto n = ::recv(e.data.fd, buf, sizeof buf, 0);
      if (n > 0) continue;
      if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) closed = true;
      break;
    }
    if (!closed) return;
    if (s.connected) {
      st_.lifetimes[s.k].push_back(std::chrono::duration_cast<ms>(clock_type::now() - s.since));
    } else {
      ++st_.failed;
    }
    --open_[s.k];
    ::close(e.data.fd);
    sockets_.erase(it);
  }

  void dribble() {
    for (auto& [fd, s] : sockets_) {
      if (!s.connected || s.sent >= s.dribble.size()) continue;
      (void)::send(fd, s.dribble.data() + s.sent, 1, MSG_NOSIGNAL);
      ++s.sent;
    }
  }

  std::uint16_t ports_[2];
  int ep_ = -1;
  std::unordered_map<int, sock> sockets_;
  std::size_t open_[kinds] = {};
  stats st_;
};

ms percentile(std::vector<ms> v, double p) {
  if (v.empty()) return ms(-1);
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

// The 1-minute load average (other builds and tests on the machine).
double load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

// The well-behaved client's latencies: a request on its connection, a new connection with
// Hello and a request, a /healthz.
struct latencies {
  std::vector<ms> on_connection, new_connection, healthz;
};

// The p99 bound for one kind of round. The bar is 50 ms; the same rounds against a
// control broker that no flood touches, interleaved with them in the same run, say what the
// machine alone costs at that moment (the former fixed 250 ms bound failed at load 13+ with
// 269-948 ms p99s, old and new binary alike). The flood may add at most 50 ms to the control's
// p99 on a machine with a core for each runnable task. What the flood adds is the flooded
// broker's own work (accepting and closing thousands of sockets), which takes longer in wall
// time when it shares the cores: with a run queue `contention` times the cores (the load
// average over the CPUs, at least 1) the 50 ms grow as much. A clean-clone CI run here read 63
// against 57 ms at load 5.7. A broker the flood blocks (a client waiting out hello_timeout: seconds)
// fails at any load; a finer regression (before the close pacing: p99s of 24-72 ms at load 4-5)
// can show only on a machine with about a core per task, where the margin is the plain 50 ms.
ms p99_bound(const std::vector<ms>& control, double contention) {
  const auto margin = std::chrono::duration_cast<ms>(50ms * std::max(1.0, contention));
  return std::max<ms>(50ms, percentile(control, 0.99) + margin);
}

TEST(connection_flood, silent_and_slow_sockets_do_not_stop_a_well_behaved_client) {
  const double load = load_average();
  const auto limit = raise_own_nofile_limit();
  if (limit < 12000) GTEST_SKIP() << "needs 12,000 descriptors, the hard limit allows " << limit;
  broker_process broker({"--hello-timeout", "2s", "--frame-read-timeout", "3s"});
  broker.start();
  broker_process control_broker({"--hello-timeout", "2s", "--frame-read-timeout", "3s"});
  control_broker.start();
  const auto rss_before = rss_kib(broker.pid());
  for (auto* b : {&broker, &control_broker}) {  // the topic, before the flood
    raw_client c(b->port());
    c.hello();
    ASSERT_TRUE(c.request(produce_frame("flood", {make_message("warm-up")})).has_produce_response());
  }
  raw_client client(broker.port());
  client.hello("well-behaved");
  raw_client control_client(control_broker.port());
  control_client.hello("well-behaved");

  const auto flood_for = 8s;
  std::atomic<bool> flooding{true};
  latencies flooded, control, base;
  std::uint64_t rss_peak = rss_before;
  double connections_peak = 0;
  std::size_t served = 0, not_served = 0;
  // One round of the well-behaved client against broker `b` through its connection `cl`.
  const auto round = [&](broker_process& b, raw_client& cl, latencies& out) {
    auto t = clock_type::now();
    auto p = cl.request(produce_frame("flood", {make_message("m")}), 10s);
    auto f = cl.request(fetch_frame("g", "flood", 10, 0), 10s);
    out.on_connection.push_back(std::chrono::duration_cast<ms>(clock_type::now() - t));
    (p.has_produce_response() && f.has_fetch_response() ? served : not_served)++;
    t = clock_type::now();
    try {
      raw_client fresh(b.port());
      fresh.hello("fresh");
      v1::Frame list;
      list.mutable_list_topics();
      (fresh.request(list, 10s).has_list_topics_response() ? served : not_served)++;
    } catch (const std::exception&) {
      ++not_served;
    }
    out.new_connection.push_back(std::chrono::duration_cast<ms>(clock_type::now() - t));
    t = clock_type::now();
    const auto h = http_get(b.http_port(), "/healthz");
    out.healthz.push_back(std::chrono::duration_cast<ms>(clock_type::now() - t));
    (h.find(" 200 ") != std::string::npos ? served : not_served)++;
  };
  // The same rounds for 3 s before the flood (printed: on a quiet machine a few ms).
  for (const auto base_until = clock_type::now() + 3s; clock_type::now() < base_until;) {
    round(broker, client, base);
    std::this_thread::sleep_for(20ms);  // the client's pace, not a wait for anything
  }
  const auto start = clock_type::now();
  std::thread well_behaved([&] {
    while (flooding.load()) {
      round(broker, client, flooded);
      round(control_broker, control_client, control);
      connections_peak = std::max(connections_peak, metric(http_get(broker.http_port(), "/metrics"), "txmq_connections_open"));
      rss_peak = std::max(rss_peak, rss_kib(broker.pid()));
      std::this_thread::sleep_for(20ms);  // the client's pace, about 20 rounds a second each
    }
  });

  flood f(broker.port(), broker.http_port());
  const std::size_t want[kinds] = {5000, 5000, 100, 100, 200};
  const auto st = f.run(want, start + flood_for, start + flood_for + 10s);
  flooding = false;
  well_behaved.join();
  rss_peak = std::max(rss_peak, rss_kib(broker.pid()));

  // Afterwards the broker holds only the well-behaved connection.
  EXPECT_TRUE(eventually([&] { return metric(http_get(broker.http_port(), "/metrics"), "txmq_connections_open") == 1; }, 10s));
  const auto rss_after = rss_kib(broker.pid());

  std::string figures;
  for (int k = 0; k < kinds; ++k) {
    figures += std::string(" ") + k_kind_names[k] + "_opened=" + std::to_string(st.opened[k]) + " " + k_kind_names[k] +
               "_closed_p50_ms=" + std::to_string(percentile(st.lifetimes[k], 0.5).count()) + " " + k_kind_names[k] +
               "_closed_min_ms=" + std::to_string(percentile(st.lifetimes[k], 0).count());
  }
  figures += " connect_failed=" + std::to_string(st.failed) + " broker_connections_peak=" +
             std::to_string(static_cast<long>(connections_peak)) + " http_open_peak=" + std::to_string(st.max_open_http) +
             " rss_before_kib=" + std::to_string(rss_before) + " rss_peak_kib=" + std::to_string(rss_peak) +
             " rss_after_kib=" + std::to_string(rss_after) + " served=" + std::to_string(served) + " not_served=" +
             std::to_string(not_served) + " rounds=" + std::to_string(flooded.healthz.size());
  const auto p99s = [&](const std::string& prefix, const latencies& l) {
    figures += " " + prefix + "p99_request_ms=" + std::to_string(percentile(l.on_connection, 0.99).count()) + " " + prefix +
               "p99_new_connection_ms=" + std::to_string(percentile(l.new_connection, 0.99).count()) + " " + prefix +
               "p99_healthz_ms=" + std::to_string(percentile(l.healthz, 0.99).count());
  };
  p99s("", flooded);
  p99s("control_", control);
  p99s("base_", base);
  const double load_after = load_average();
  const double cpus = std::max(1u, std::thread::hardware_concurrency());
  const double contention = std::max(load, load_after) / cpus;
  figures += " load_before=" + std::to_string(load) + " load_after=" + std::to_string(load_after) +
             " contention=" + std::to_string(contention) +
             " bound_request_ms=" + std::to_string(p99_bound(control.on_connection, contention).count()) +
             " bound_new_connection_ms=" + std::to_string(p99_bound(control.new_connection, contention).count()) +
             " bound_healthz_ms=" + std::to_string(p99_bound(control.healthz, contention).count());
  print_fault_counts("connection_flood", 0, 0, 0, 0, figures.substr(1));

  EXPECT_EQ(not_served, 0u);
  EXPECT_GT(served, 50u);
  EXPECT_LT(percentile(flooded.on_connection, 0.99), p99_bound(control.on_connection, contention)) << figures;
  EXPECT_LT(percentile(flooded.new_connection, 0.99), p99_bound(control.new_connection, contention)) << figures;
  EXPECT_LT(percentile(flooded.healthz, 0.99), p99_bound(control.healthz, contention)) << figures;
  // The silent ones: closed after hello_timeout (2 s), not before, and not long after.
  ASSERT_FALSE(st.lifetimes[idle_broker].empty());
  EXPECT_GE(percentile(st.lifetimes[idle_broker], 0), 1900ms);
  EXPECT_LT(percentile(st.lifetimes[idle_broker], 0.99), 4000ms);
  EXPECT_EQ(f.still_open(idle_broker), 0u);
  EXPECT_GE(st.opened[idle_broker], 5000u);
  // Slowloris: a dribbled Hello meets hello_timeout; a dribbled frame meets frame_read_timeout.
  EXPECT_GE(percentile(st.lifetimes[slow_hello], 0), 1900ms);
  EXPECT_LT(percentile(st.lifetimes[slow_hello], 0.99), 4000ms);
  EXPECT_GE(percentile(st.lifetimes[slow_frame], 0), 2900ms);  // the first dribbled byte comes after ~1 s
  EXPECT_LT(percentile(st.lifetimes[slow_frame], 0.99), 6000ms);
  EXPECT_EQ(f.still_open(slow_hello) + f.still_open(slow_frame), 0u);
  // The admin server keeps at most max_connections (64) by closing the oldest silent one: of
  // the 5,200 opened, no more are left open (the rest wait for its read_timeout).
  EXPECT_LE(f.still_open(idle_http) + f.still_open(slow_http), 64u);
  // Bounded memory: the flood costs the broker well under 256 MiB, and most of it comes back.
  EXPECT_LT(rss_peak - rss_before, 256u * 1024) << figures;
  EXPECT_EQ(broker.stop(), 0) << broker.log().substr(0, 4000);
  EXPECT_EQ(control_broker.stop(), 0) << control_broker.log().substr(0, 4000);
}

}  // namespace
}  // namespace txmq::test
