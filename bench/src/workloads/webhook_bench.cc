#include "workloads/webhook_bench.h"

#include <atomic>
#include <condition_variable>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <boost/program_options.hpp>

#include "support/options.h"
#include "support/token_options.h"
#include "support/latency.h"
#include "txmq/client/connection.h"
#include "txmq/protocol/message_id.h"

namespace txmq::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace po = boost::program_options;
using tcp = asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

struct webhook_bench_options {
  std::string broker = "127.0.0.1:7878";
  std::string auth_token;  // --token, --token-file, TXMQ_TOKEN (a broker with auth)
  std::string topic = "bench-webhook";
  std::size_t messages = 20'000;   // throughput phase
  std::size_t message_bytes = 256;
  std::size_t batch = 100;         // throughput: messages per produce request
  std::size_t in_flight = 20;      // throughput: produce requests in flight
  double rate = 200;               // latency phase: messages per second
  double seconds = 3;              // latency phase: duration
  std::uint32_t concurrency = 64;  // the subscription's requests in flight
  std::uint32_t partitions = 4;
  int runs = 3;
  bool json = false;
};

// Answers every POST with 200 at once; notes when each webhook-id first arrived.
class receiver {
 public:
  receiver() : acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    asio::co_spawn(io_, accept(), asio::detached);
    thread_ = std::thread([this] { io_.run(); });
  }
  ~receiver() {
    io_.stop();
    thread_.join();
  }
  [[nodiscard]] std::string url() const {
    return "http://127.0.0.1:" + std::to_string(acceptor_.local_endpoint().port()) + "/hook";
  }
  // Waits until `n` distinct ids arrived since reset(); false at the deadline.
  bool wait_for(std::size_t n, std::chrono::milliseconds deadline) {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, deadline, [&] { return first_.size() >= n; });
  }
  void reset() {
    std::lock_guard lk(mu_);
    first_.clear();
    requests_ = 0;
  }
  std::unordered_map<std::string, clock_type::time_point> first() {
    std::lock_guard lk(mu_);
    return first_;
  }
  std::uint64_t requests() {
    std::lock_guard lk(mu_);
    return requests_;
  }

 private:
  asio::awaitable<void> accept() {
    for (;;) {
      auto socket = co_await acceptor_.async_accept(asio::use_awaitable);
      socket.set_option(tcp::no_delay(true));
      asio::co_spawn(io_, session(std::move(socket)), asio::detached);
    }
  }
  asio::awaitable<void> session(tcp::socket socket) {
    beast::tcp_stream stream(std::move(socket));
    beast::flat_buffer buffer;
    http::response<http::empty_body> ok{http::status::ok, 11};
    ok.keep_alive(true);
    ok.prepare_payload();
    for (;;) {
      http::request<http::string_body> req;
      auto [ec, n] = co_await http::async_read(stream, buffer, req, asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      const auto now = clock_type::now();
      {
        std::lock_guard lk(mu_);
        ++requests_;
        first_.emplace(std::string(req["webhook-id"]), now);
      }
      cv_.notify_all();
      auto [wec, wn] = co_await http::async_write(stream, ok, asio::as_tuple(asio::use_awaitable));
      if (wec) co_return;
    }
  }

  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, clock_type::time_point> first_;
  std::uint64_t requests_ = 0;
};

v1::Frame produce_frame(const std::string& topic, std::size_t count, std::size_t bytes, std::vector<std::string>& ids) {
  v1::Frame f;
  auto* p = f.mutable_produce();
  p->set_topic(topic);
  const std::string body(bytes, 'x');
  for (std::size_t i = 0; i < count; ++i) {
    auto* m = p->add_messages();
    const auto id = protocol::uuid::make_v7();
    m->set_id(std::string(id.raw()));
    m->set_body(body);
    ids.push_back(id.to_string());
  }
  return f;
}

struct run_result {
  double deliveries_per_s = 0;
  percentiles latency;     // produce acknowledged -> first attempt received
  percentiles end_to_end;  // produce sent -> first attempt received (includes the fsync)
  std::uint64_t attempts = 0;
  std::size_t lost = 0;
};

// One run on a new topic and subscription. Errors go to stderr; nullopt then.
std::optional<run_result> run_once(client::connection& conn, receiver& rx, const webhook_bench_options& o, int run) {
  const std::string topic = o.topic + "-" + std::to_string(::getpid()) + "-" + std::to_string(run);
  v1::Frame ct;
  ct.mutable_create_topic()->set_name(topic);
  ct.mutable_create_topic()->set_partitions(o.partitions);
  if (auto r = conn.request(ct); !r) {
    std::cerr << "txmq-bench webhook: creating topic " << topic << " failed: " << r.error().to_string() << "\n";
    return std::nullopt;
  }
  v1::Frame wc;
  auto* w = wc.mutable_webhook_create()->mutable_webhook();
  w->set_topic(topic);
  w->set_url(rx.url());
  w->set_concurrency(o.concurrency);
  if (auto r = conn.request(wc); !r) {
    std::cerr << "txmq-bench webhook: creating the webhook failed: " << r.error().to_string() << "\n";
    return std::nullopt;
  }
  rx.reset();
  run_result out;

  // Throughput: keep `in_flight` produce requests of `batch` messages going.
  const auto started = clock_type::now();
  {
    std::mutex mu;
    std::condition_variable cv;
    std::size_t sent = 0, open = 0;
    bool failed = false;
    std::unique_lock lk(mu);
    while (sent < o.messages && !failed) {
      cv.wait(lk, [&] { return open < o.in_flight || failed; });
      const std::size_t n = std::min(o.batch, o.messages - sent);
      std::vector<std::string> ids;
      auto f = produce_frame(topic, n, o.message_bytes, ids);
      sent += n;
      ++open;
      lk.unlock();
      conn.async_request(std::move(f), [&](client::result<v1::Frame> r) {
        std::lock_guard g(mu);
        --open;
        if (!r) {
          failed = true;
          std::cerr << "txmq-bench webhook: produce failed: " << r.error().to_string() << "\n";
        }
        cv.notify_all();
      });
      lk.lock();
    }
    cv.wait(lk, [&] { return open == 0; });
    if (failed) return std::nullopt;
  }
  if (!rx.wait_for(o.messages, std::chrono::seconds(120))) {
    out.lost = o.messages - rx.first().size();
    std::cerr << "txmq-bench webhook: " << out.lost << " messages never reached the receiver\n";
    return out;
  }
  {
    auto first = rx.first();
    clock_type::time_point last = started;
    for (auto& [id, at] : first) last = std::max(last, at);
    out.deliveries_per_s = static_cast<double>(o.messages) / std::chrono::duration<double>(last - started).count();
    out.attempts = rx.requests();
  }

  // Latency: one message per request at a steady rate; ack time per id.
  rx.reset();
  const auto count = static_cast<std::size_t>(o.rate * o.seconds);
  struct sample {
    std::string id;
    clock_type::time_point sent, acked;
  };
  std::vector<sample> acked;
  acked.reserve(count);
  const auto gap = std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(1.0 / o.rate));
  auto next = clock_type::now();
  for (std::size_t i = 0; i < count; ++i) {
    std::this_thread::sleep_until(next);  // pacing the load, not synchronising
    next += gap;
    std::vector<std::string> ids;
    auto f = produce_frame(topic, 1, o.message_bytes, ids);
    const auto sent = clock_type::now();
    auto r = conn.request(std::move(f));
    if (!r) {
      std::cerr << "txmq-bench webhook: produce failed: " << r.error().to_string() << "\n";
      return std::nullopt;
    }
    acked.push_back({ids[0], sent, clock_type::now()});
  }
  if (!rx.wait_for(count, std::chrono::seconds(30))) {
    out.lost = count - rx.first().size();
    std::cerr << "txmq-bench webhook: " << out.lost << " paced messages never reached the receiver\n";
    return out;
  }
  auto first = rx.first();
  latency_recorder rec, e2e;
  const auto since = [](clock_type::time_point from, clock_type::time_point to) {
    return to > from ? std::chrono::duration_cast<std::chrono::nanoseconds>(to - from) : std::chrono::nanoseconds(0);
  };
  for (auto& a : acked) {
    const auto at = first.find(a.id)->second;
    rec.add(since(a.acked, at));
    e2e.add(since(a.sent, at));
  }
  out.latency = rec.compute();
  out.end_to_end = e2e.compute();

  v1::Frame wd;
  // The subscription of this run is done: later runs must not share the receiver with it.
  v1::Frame list;
  list.mutable_webhook_list();
  if (auto r = conn.request(list)) {
    for (auto& x : r.value().webhook_list_response().webhooks()) {
      if (x.topic() == topic) wd.mutable_webhook_delete()->set_id(x.id());
    }
    if (wd.has_webhook_delete()) (void)conn.request(wd);
  }
  return out;
}

}  // namespace

int webhook_command(int argc, char** argv) {
  webhook_bench_options o;
  po::options_description desc("txmq-bench webhook [options]");
  desc.add_options()("help,h", "this help")
    ("broker", po::value(&o.broker)->default_value(o.broker), "HOST:PORT of a running txmq broker")
    ("topic", po::value(&o.topic)->default_value(o.topic), "prefix of the topic made for each run")
    ("messages", po::value(&o.messages)->default_value(o.messages), "throughput: messages produced at once")
    ("message-bytes", po::value(&o.message_bytes)->default_value(o.message_bytes), "message body size")
    ("batch", po::value(&o.batch)->default_value(o.batch), "throughput: messages per produce request")
    ("in-flight", po::value(&o.in_flight)->default_value(o.in_flight), "throughput: produce requests in flight")
    ("rate", po::value(&o.rate)->default_value(o.rate), "latency: messages per second")
    ("seconds", po::value(&o.seconds)->default_value(o.seconds), "latency: measured seconds")
    ("concurrency", po::value(&o.concurrency)->default_value(o.concurrency), "the subscription's requests in flight")
    ("partitions", po::value(&o.partitions)->default_value(o.partitions), "partitions of each run's topic")
    ("runs", po::value(&o.runs)->default_value(o.runs), "runs (medians are reported)")
    ("json", po::bool_switch(&o.json), "one JSON line instead of a table");
  add_token_options(desc);
  po::variables_map vm;
  if (!parse_options(argc, argv, desc, vm)) return 0;
  o.auth_token = token_option(vm);
  if (o.messages == 0 || o.batch == 0 || o.in_flight == 0 || o.rate <= 0 || o.seconds <= 0 || o.runs < 1) {
    std::cerr << "txmq-bench webhook: counts, rate and seconds must be positive\n";
    return 2;
  }
  client::connection_options co;
  co.address = o.broker;
  co.auth_token = o.auth_token;
  co.client_id = "txmq-bench-webhook";
  auto conn = client::connection::connect(co);
  if (!conn) {
    std::cerr << "txmq-bench webhook: cannot reach the broker at " << o.broker << ": " << conn.error().to_string() << "\n";
    return 1;
  }
  receiver rx;
  std::vector<double> rates, p50, p90, p99, e50, e99;
  std::uint64_t attempts = 0;
  for (int run = 0; run < o.runs; ++run) {
    auto r = run_once(*conn.value(), rx, o, run);
    if (!r || r->lost) return 1;
    rates.push_back(r->deliveries_per_s);
    p50.push_back(r->latency.p50_ms);
    p90.push_back(r->latency.p90_ms);
    p99.push_back(r->latency.p99_ms);
    e50.push_back(r->end_to_end.p50_ms);
    e99.push_back(r->end_to_end.p99_ms);
    attempts += r->attempts;
    if (!o.json) {
      std::cerr << "run " << run + 1 << ": " << std::fixed << std::setprecision(0) << r->deliveries_per_s
                << " deliveries/s, commit-to-first-attempt p50 " << std::setprecision(2) << r->latency.p50_ms
                << " ms p99 " << r->latency.p99_ms << " ms, send-to-first-attempt p50 " << r->end_to_end.p50_ms
                << " ms p99 " << r->end_to_end.p99_ms << " ms\n";
    }
  }
  if (o.json) {
    boost::json::object j{{"workload", "webhook"},      {"system", "txmq"},
                          {"messages", o.messages},     {"message_bytes", o.message_bytes},
                          {"concurrency", o.concurrency}, {"rate", o.rate},
                          {"runs", o.runs},             {"deliveries_per_s", median(rates)},
                          {"latency_p50_ms", median(p50)}, {"latency_p90_ms", median(p90)},
                          {"latency_p99_ms", median(p99)}, {"send_to_attempt_p50_ms", median(e50)},
                          {"send_to_attempt_p99_ms", median(e99)}, {"attempts", attempts}};
    std::cout << boost::json::serialize(j) << "\n";
  } else {
    std::cout << std::fixed << "webhook  messages " << o.messages << "  concurrency " << o.concurrency << "  runs "
              << o.runs << " (medians)\n"
              << std::setprecision(0) << "  deliveries/s                      " << median(rates) << "\n"
              << std::setprecision(2) << "  commit-to-first-attempt p50 (ms)  " << median(p50) << "\n"
              << "  commit-to-first-attempt p90 (ms)  " << median(p90) << "\n"
              << "  commit-to-first-attempt p99 (ms)  " << median(p99) << "\n"
              << "  send-to-first-attempt p50 (ms)    " << median(e50) << "\n"
              << "  send-to-first-attempt p99 (ms)    " << median(e99) << "\n";
  }
  return 0;
}

}  // namespace txmq::bench
