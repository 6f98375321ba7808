// txmq over its wire protocol: a produce request per batch (acknowledged after fsync), and a
// consumer group fetching up to 1,000 deliveries at a time with one pipelined ack request each.
//
// Against a cluster (--address a bootstrap list, or any node of one: Metadata says cluster =
// true) the driver follows the topic's partition leaders, as the client libraries do: one
// connection per leader node; keyless batches go round-robin over those nodes (each stores a
// batch in a partition it leads, docs/cluster.md), and the consumer fetches from every leader
// and acks on the node that delivered.

#include <unistd.h>

#include <algorithm>
#include <deque>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <boost/asio/steady_timer.hpp>

#include "peers/system_under_test.h"
#include "txmq/protocol/message_id.h"
#include "support/wire_client.h"
#include "txmq/common/address.h"
#include "txmq/common/tls.h"

namespace txmq::bench::detail {
namespace {

namespace asio = boost::asio;

// Where the broker is, with --tls the context and the name its certificate must show, and the
// token its Hello carries (empty: a broker without auth). `at` is the first address of the
// list; `all` every one (a cluster's bootstrap list).
struct address {
  common::host_port at;
  std::shared_ptr<asio::ssl::context> tls;
  std::string server_name;
  std::string token;
  std::vector<common::host_port> all;
};

address parse_address(const system_options& o) {
  std::vector<common::host_port> all;
  std::string_view text = o.address;
  for (;;) {
    const auto comma = text.find(',');
    auto parsed = common::parse_host_port(text.substr(0, comma));
    if (!parsed) throw std::invalid_argument("txmq: " + parsed.error().message);
    all.push_back(std::move(parsed).value());
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  address out{all.front(), nullptr, o.tls.server_name, o.auth_token, all};
  if (o.tls.enabled) {
    auto ctx = common::make_client_tls_context({o.tls.ca_file, o.tls.cert_file, o.tls.key_file});
    if (!ctx) throw std::invalid_argument("txmq: " + ctx.error().message);
    out.tls = std::move(ctx).value();
    if (out.server_name.empty()) out.server_name = out.at.host;
  }
  return out;
}

// Runs one ready handler (waiting up to max_wait for it), then every other ready one. The wait
// is a timer on the context (a timerfd), not run_one_for: that one waits in epoll_wait, whose
// timeout is whole milliseconds, so a steady-rate sender asking for 60 us slept up to 1 ms
// unless an answer came first.
void run_ready(asio::io_context& io, asio::steady_timer& wake, std::chrono::nanoseconds max_wait) {
  io.restart();
  // Under load something is always ready: no timer then (arming and cancelling one is two
  // timerfd_settime calls, on the cores the broker runs on).
  if (io.poll() > 0 || max_wait <= std::chrono::nanoseconds::zero()) return;
  {
    bool woke = false;
    wake.expires_after(max_wait);
    wake.async_wait([&woke](const boost::system::error_code&) { woke = true; });
    io.run_one();
    wake.cancel();
    // The wait's handler refers to `woke`: it has run (expired or cancelled) before returning.
    while (!woke) io.run_one();
  }
  io.poll();
}

// Sends one request and runs the io context until it is answered.
v1::Frame call(asio::io_context& io, wire_connection& c, v1::Frame request) {
  std::optional<v1::Frame> answer;
  c.request(std::move(request), [&](const v1::Frame& r) { answer = r; });
  io.restart();
  while (!answer) io.run_one();
  return *answer;
}

std::shared_ptr<wire_connection> connect(asio::io_context& io, const address& a, const std::string& who) {
  auto c = std::make_shared<wire_connection>(io, a.at.host, a.at.port, a.tls, a.server_name);
  c->connect_blocking(who, a.token);
  return c;
}

// The first address of the list that accepts a connection.
std::shared_ptr<wire_connection> connect_any(asio::io_context& io, const address& a, const std::string& who) {
  std::string failures;
  for (const auto& at : a.all) {
    try {
      auto one = a;
      one.at = at;
      return connect(io, one, who);
    } catch (const std::exception& e) {
      failures += (failures.empty() ? "" : "; ") + at.to_string() + ": " + e.what();
    }
  }
  throw std::runtime_error("txmq: no address of the list answers (" + failures + ")");
}

// The same address aimed at each node (one per leader address), or just `a` on a single broker.
std::vector<address> node_addresses(const address& a, const std::vector<std::string>& leaders) {
  if (leaders.empty()) return {a};
  std::vector<address> out;
  for (const auto& l : leaders) {
    auto parsed = common::parse_host_port(l);
    if (!parsed) throw std::runtime_error("txmq: the cluster advertises an address that is not HOST:PORT: " + l);
    auto one = a;
    one.at = std::move(parsed).value();
    out.push_back(std::move(one));
  }
  return out;
}

class txmq_publisher final : public publisher {
 public:
  txmq_publisher(const std::vector<address>& nodes, std::string topic) : topic_(std::move(topic)) {
    for (const auto& a : nodes) conns_.push_back(connect(io_, a, "txmq-bench-publisher"));
  }

  void send(std::vector<std::string> bodies, completion done) override {
    ++outstanding_;
    // Usually a connection has room: the request is built in the one reused frame and encoded at
    // once. A frame built and freed per request put malloc and free at about 30 % of the
    // generator's samples (five allocations per message), on the cores the broker runs on.
    if (waiting_.empty()) {
      if (auto* conn = next_conn()) {
        fill(reused_, bodies);
        conn->send_encoded_now(reused_, answered(std::move(done)));
        return;
      }
    }
    v1::Frame f;
    fill(f, bodies);
    waiting_.emplace_back(std::move(f), std::move(done));
    pump();
  }

  void poll(std::chrono::nanoseconds max_wait) override { run_ready(io_, wake_, max_wait); }
  [[nodiscard]] std::size_t outstanding() const override { return outstanding_; }

 private:
  // The broker refuses more than 1,024 requests in flight on one connection; beyond that the
  // requests wait here, as they would in a client library, and their latency includes the wait.
  static constexpr std::size_t k_max_requests_in_flight = 1024;

  // The next node (round-robin) with room for another request; nullptr when all are full.
  wire_connection* next_conn() {
    for (std::size_t i = 0; i < conns_.size(); ++i) {
      auto& c = conns_[next_++ % conns_.size()];
      if (c->pending() < k_max_requests_in_flight) return c.get();
    }
    return nullptr;
  }

  // Fills `f` with a ProduceRequest of `bodies`. Clearing a frame keeps its messages and their
  // strings' capacity for the next fill (protobuf reuses cleared elements).
  void fill(v1::Frame& f, std::vector<std::string>& bodies) {
    auto* p = f.mutable_produce();
    p->set_topic(topic_);
    auto* ms = p->mutable_messages();
    ms->Clear();
    for (auto& b : bodies) {
      auto* m = ms->Add();
      const auto id = protocol::uuid::make_v7();
      m->mutable_id()->assign(id.raw());
      m->set_body(std::move(b));
    }
  }

  wire_connection::callback answered(completion done) {
    return [this, done = std::move(done)](const v1::Frame& r) {
      --outstanding_;
      // The figures count refusals; the first one's reason goes to stderr so a person can act.
      if (r.has_error() && !reported_) {
        std::cerr << "txmq-bench: produce to " << topic_ << " refused: " << r.error().message() << "\n";
        reported_ = true;
      }
      done(!r.has_error());
      pump();
    };
  }

  void pump() {
    while (!waiting_.empty()) {
      auto* conn = next_conn();
      if (conn == nullptr) break;
      auto [frame, done] = std::move(waiting_.front());
      waiting_.pop_front();
      conn->request(std::move(frame), answered(std::move(done)));
    }
  }

  asio::io_context io_;
  asio::steady_timer wake_{io_};  // poll()'s wait
  std::vector<std::shared_ptr<wire_connection>> conns_;
  std::size_t next_ = 0;
  std::string topic_;
  std::deque<std::pair<v1::Frame, completion>> waiting_;
  v1::Frame reused_;  // the request being built when a connection has room (see send)
  std::size_t outstanding_ = 0;
  bool reported_ = false;
};

class txmq_consumer final : public consumer {
 public:
  txmq_consumer(const std::vector<address>& nodes, std::string topic) : topic_(std::move(topic)) {
    for (const auto& a : nodes) nodes_.push_back({connect(io_, a, "txmq-bench-consumer")});
    group_ = "bench-" + std::to_string(::getpid()) + "-" + topic_;
  }

  std::size_t poll(std::chrono::nanoseconds max_wait, const delivery& on_message) override {
    for (auto& n : nodes_) {
      if (!n.fetching && !n.ready) fetch(n, max_wait);
    }
    io_.restart();
    const auto deadline = std::chrono::steady_clock::now() + max_wait;
    const auto any_ready = [&] {
      return std::any_of(nodes_.begin(), nodes_.end(), [](const node& n) { return n.ready.has_value(); });
    };
    while (!any_ready() && io_.run_one_until(deadline) > 0) {
    }
    io_.poll();
    std::size_t handed = 0;
    for (auto& n : nodes_) {
      if (!n.ready) continue;
      auto r = std::move(*n.ready);
      n.ready.reset();
      if (r.has_error()) throw std::runtime_error("txmq fetch: " + r.error().message());
      const auto& ds = r.fetch_response().deliveries();
      if (!ds.empty()) {
        v1::Frame ack;
        ack.mutable_ack()->set_group(group_);
        for (const auto& d : ds) {
          on_message(d.message().body());
          auto* ref = ack.mutable_ack()->add_refs();
          ref->set_topic(d.message().topic());
          ref->set_partition(d.message().partition());
          ref->set_offset(d.message().offset());
          ref->set_attempt(d.message().attempt());
        }
        // The ack is pipelined with the next fetch, as a consumer-lib user's acks are; it goes
        // to the node that delivered (that node holds the group's state for it).
        ++acks_;
        n.conn->request(std::move(ack), [this](const v1::Frame& a) {
          --acks_;
          if (a.has_error()) ack_error_ = a.error().message();
        });
        handed += static_cast<std::size_t>(ds.size());
      }
      fetch(n, max_wait);
    }
    return handed;
  }

  void drain() override {
    io_.restart();
    while (acks_ > 0) io_.run_one();
    if (!ack_error_.empty()) throw std::runtime_error("txmq ack: " + ack_error_);
  }

 private:
  struct node {
    std::shared_ptr<wire_connection> conn;
    bool fetching = false;
    std::optional<v1::Frame> ready;
  };

  void fetch(node& n, std::chrono::nanoseconds max_wait) {
    v1::Frame f;
    f.mutable_fetch()->set_group(group_);
    f.mutable_fetch()->add_topics(topic_);
    f.mutable_fetch()->set_max_messages(1000);
    f.mutable_fetch()->set_max_wait_ms(
        static_cast<std::uint32_t>(std::max<std::int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(max_wait).count())));
    f.mutable_fetch()->set_ack_deadline_ms(600'000);
    n.fetching = true;
    n.conn->request(std::move(f), [&n](v1::Frame& r) {
      n.fetching = false;
      n.ready = std::move(r);
    });
  }

  asio::io_context io_;
  std::deque<node> nodes_;  // a deque: the fetch callbacks keep references to its elements
  std::string topic_, group_;
  std::size_t acks_ = 0;
  std::string ack_error_;
};

class txmq_system final : public system_under_test {
 public:
  explicit txmq_system(const system_options& o) : address_(parse_address(o)), topic_(o.name) {
    asio::io_context io;
    auto c = connect_any(io, address_, "txmq-bench-admin");
    v1::Frame f;
    f.mutable_create_topic()->set_name(topic_);
    f.mutable_create_topic()->set_partitions(o.partitions);
    f.mutable_create_topic()->set_replicas(o.replicas);
    const auto r = call(io, *c, std::move(f));
    if (r.has_error()) throw std::runtime_error("txmq: create topic " + topic_ + ": " + r.error().message());
    nodes_ = node_addresses(address_, leaders(io, *c, o.partitions));
  }

  std::unique_ptr<publisher> make_publisher(std::size_t) override {
    return std::make_unique<txmq_publisher>(nodes_, topic_);
  }
  std::unique_ptr<consumer> make_consumer() override { return std::make_unique<txmq_consumer>(nodes_, topic_); }
  replication_shape replication() const override { return shape_; }
  std::string durability() const override {
    if (shape_.replicas > 1) {
      return "produce answered after the WAL fsync of every in-sync replica (" + std::to_string(shape_.replicas) +
             " replicas, smallest ISR " + std::to_string(shape_.min_isr_size) + "); " +
             std::to_string(nodes_.size()) + " leader nodes, following leaders";
    }
    if (nodes_.size() > 1) {
      return "produce answered after the leader's WAL fsync (group commit); a cluster of " +
             std::to_string(nodes_.size()) + " leader nodes, following leaders";
    }
    return "produce answered after the WAL fsync (group commit)";
  }

 private:
  // The distinct leader addresses of the topic's partitions in a cluster, once every partition
  // has one (within 20 s of its creation); empty for a single broker.
  std::vector<std::string> leaders(asio::io_context& io, wire_connection& c, std::uint32_t partitions) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      v1::Frame f;
      f.mutable_metadata()->add_topics(topic_);
      const auto r = call(io, c, std::move(f));
      // A broker older than Metadata (UNKNOWN_REQUEST) is a single broker.
      if (!r.has_metadata_response() || !r.metadata_response().cluster()) return {};
      std::vector<std::string> out;
      std::uint32_t led = 0;
      for (const auto& t : r.metadata_response().topics()) {
        if (t.name() != topic_) continue;
        shape_.replicas = t.replicas();
        shape_.min_isr_size = 0;
        for (const auto& p : t.partition_info()) {
          const auto isr = static_cast<std::uint32_t>(p.isr_size());
          if (shape_.min_isr_size == 0 || isr < shape_.min_isr_size) shape_.min_isr_size = isr;
        }
        for (const auto& p : t.partition_info()) {
          if (p.leader_address().empty()) continue;
          ++led;
          if (std::find(out.begin(), out.end(), p.leader_address()) == out.end()) out.push_back(p.leader_address());
        }
      }
      if (led >= partitions && !out.empty()) return out;
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("txmq: topic " + topic_ + ": " + std::to_string(led) + " of " +
                                 std::to_string(partitions) + " partitions have a leader after 20 s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  address address_;
  std::string topic_;
  std::vector<address> nodes_;
  replication_shape shape_;
};

}  // namespace

std::unique_ptr<system_under_test> open_txmq(const system_options& options) {
  return std::make_unique<txmq_system>(options);
}

}  // namespace txmq::bench::detail
