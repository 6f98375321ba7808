// txmq over its wire protocol: a produce request per batch (acknowledged after fsync), and a
// consumer group fetching up to 1,000 deliveries at a time with one pipelined ack request each.

#include <unistd.h>

#include <deque>
#include <iostream>
#include <optional>
#include <stdexcept>

#include "peers/system_under_test.h"
#include "txmq/protocol/message_id.h"
#include "support/wire_client.h"
#include "txmq/common/address.h"
#include "txmq/common/tls.h"

namespace txmq::bench::detail {
namespace {

namespace asio = boost::asio;

// Where the broker is, with --tls the context and the name its certificate must show, and the
// token its Hello carries (empty: a broker without auth).
struct address {
  common::host_port at;
  std::shared_ptr<asio::ssl::context> tls;
  std::string server_name;
  std::string token;
};

address parse_address(const system_options& o) {
  auto parsed = common::parse_host_port(o.address);
  if (!parsed) throw std::invalid_argument("txmq: " + parsed.error().message);
  address out{std::move(parsed).value(), nullptr, o.tls.server_name, o.auth_token};
  if (o.tls.enabled) {
    auto ctx = common::make_client_tls_context({o.tls.ca_file, o.tls.cert_file, o.tls.key_file});
    if (!ctx) throw std::invalid_argument("txmq: " + ctx.error().message);
    out.tls = std::move(ctx).value();
    if (out.server_name.empty()) out.server_name = out.at.host;
  }
  return out;
}

// Runs one ready handler (waiting up to max_wait for it), then every other ready one.
void run_ready(asio::io_context& io, std::chrono::nanoseconds max_wait) {
  io.restart();
  io.run_one_for(max_wait);
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

class txmq_publisher final : public publisher {
 public:
  txmq_publisher(const address& a, std::string topic) : topic_(std::move(topic)) {
    conn_ = connect(io_, a, "txmq-bench-publisher");
  }

  void send(std::vector<std::string> bodies, completion done) override {
    v1::Frame f;
    auto* p = f.mutable_produce();
    p->set_topic(topic_);
    for (auto& b : bodies) {
      auto* m = p->add_messages();
      m->set_id(std::string(protocol::uuid::make_v7().raw()));
      m->set_body(std::move(b));
    }
    ++outstanding_;
    waiting_.emplace_back(std::move(f), std::move(done));
    pump();
  }

  void poll(std::chrono::nanoseconds max_wait) override { run_ready(io_, max_wait); }
  [[nodiscard]] std::size_t outstanding() const override { return outstanding_; }

 private:
  // The broker refuses more than 1,024 requests in flight on one connection; beyond that the
  // requests wait here, as they would in a client library, and their latency includes the wait.
  static constexpr std::size_t k_max_requests_in_flight = 1024;

  void pump() {
    while (!waiting_.empty() && conn_->pending() < k_max_requests_in_flight) {
      auto [frame, done] = std::move(waiting_.front());
      waiting_.pop_front();
      conn_->request(std::move(frame), [this, done = std::move(done)](const v1::Frame& r) {
        --outstanding_;
        // The figures count refusals; the first one's reason goes to stderr so a person can act.
        if (r.has_error() && !reported_) {
          std::cerr << "txmq-bench: produce to " << topic_ << " refused: " << r.error().message() << "\n";
          reported_ = true;
        }
        done(!r.has_error());
        pump();
      });
    }
  }

  asio::io_context io_;
  std::shared_ptr<wire_connection> conn_;
  std::string topic_;
  std::deque<std::pair<v1::Frame, completion>> waiting_;
  std::size_t outstanding_ = 0;
  bool reported_ = false;
};

class txmq_consumer final : public consumer {
 public:
  txmq_consumer(const address& a, std::string topic) : topic_(std::move(topic)) {
    conn_ = connect(io_, a, "txmq-bench-consumer");
    group_ = "bench-" + std::to_string(::getpid()) + "-" + topic_;
  }

  std::size_t poll(std::chrono::nanoseconds max_wait, const delivery& on_message) override {
    if (!fetching_) fetch(max_wait);
    io_.restart();
    const auto deadline = std::chrono::steady_clock::now() + max_wait;
    while (!ready_ && io_.run_one_until(deadline) > 0) {
    }
    if (!ready_) return 0;
    auto r = std::move(*ready_);
    ready_.reset();
    if (r.has_error()) throw std::runtime_error("txmq fetch: " + r.error().message());
    const auto& ds = r.fetch_response().deliveries();
    if (ds.empty()) return 0;
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
    // The ack is pipelined with the next fetch, as a consumer-lib user's acks are.
    ++acks_;
    conn_->request(std::move(ack), [this](const v1::Frame& a) {
      --acks_;
      if (a.has_error()) ack_error_ = a.error().message();
    });
    fetch(max_wait);
    return static_cast<std::size_t>(ds.size());
  }

  void drain() override {
    io_.restart();
    while (acks_ > 0) io_.run_one();
    if (!ack_error_.empty()) throw std::runtime_error("txmq ack: " + ack_error_);
  }

 private:
  void fetch(std::chrono::nanoseconds max_wait) {
    v1::Frame f;
    f.mutable_fetch()->set_group(group_);
    f.mutable_fetch()->add_topics(topic_);
    f.mutable_fetch()->set_max_messages(1000);
    f.mutable_fetch()->set_max_wait_ms(
        static_cast<std::uint32_t>(std::max<std::int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(max_wait).count())));
    f.mutable_fetch()->set_ack_deadline_ms(600'000);
    fetching_ = true;
    conn_->request(std::move(f), [this](const v1::Frame& r) {
      fetching_ = false;
      ready_ = r;
    });
  }

  asio::io_context io_;
  std::shared_ptr<wire_connection> conn_;
  std::string topic_, group_;
  bool fetching_ = false;
  std::optional<v1::Frame> ready_;
  std::size_t acks_ = 0;
  std::string ack_error_;
};

class txmq_system final : public system_under_test {
 public:
  explicit txmq_system(const system_options& o) : address_(parse_address(o)), topic_(o.name) {
    asio::io_context io;
    auto c = connect(io, address_, "txmq-bench-admin");
    v1::Frame f;
    f.mutable_create_topic()->set_name(topic_);
    f.mutable_create_topic()->set_partitions(o.partitions);
    const auto r = call(io, *c, std::move(f));
    if (r.has_error()) throw std::runtime_error("txmq: create topic " + topic_ + ": " + r.error().message());
  }

  std::unique_ptr<publisher> make_publisher(std::size_t) override {
    return std::make_unique<txmq_publisher>(address_, topic_);
  }
  std::unique_ptr<consumer> make_consumer() override { return std::make_unique<txmq_consumer>(address_, topic_); }
  std::string durability() const override { return "produce answered after the WAL fsync (group commit)"; }

 private:
  address address_;
  std::string topic_;
};

}  // namespace

std::unique_ptr<system_under_test> open_txmq(const system_options& options) {
  return std::make_unique<txmq_system>(options);
}

}  // namespace txmq::bench::detail
