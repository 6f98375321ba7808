#include "workloads/http_bench.h"

#include <atomic>
#include <functional>
#include <future>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include "support/latency.h"
#include "support/wire_client.h"
#include "txmq/common/address.h"
#include "txmq/protocol/message_id.h"

namespace txmq::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using clock = std::chrono::steady_clock;

namespace {

struct result {
  std::string protocol;
  double messages_per_second = 0;
  double requests_per_second = 0;
  percentiles latency;
  std::uint64_t errors = 0;
};

// Runs a thread's work; an exception there (a broker that died mid-run: the HTTP client's
// read, or wire_connection's lost connection) cannot reach the thread waiting for the run's
// counts, so the run ends here with the reason instead of std::terminate.
template <class Work>
void or_exit(Work&& work) {
  try {
    work();
  } catch (const std::exception& e) {
    std::cerr << "txmq-bench: " << e.what() << "\n";
    std::_Exit(1);
  }
}

std::pair<std::string, std::uint16_t> split(const std::string& address) {
  auto hp = common::parse_host_port(address);
  if (!hp) throw std::runtime_error("bad address '" + address + "': " + hp.error().message);
  return {hp.value().host == "localhost" ? "127.0.0.1" : hp.value().host, hp.value().port};
}

std::string http_body(const http_bench_options& o) {
  // Ids are left out: the broker makes them (UUIDv7), as an HTTP client that does not retry would.
  const std::string payload(o.message_bytes, 'x');
  json::array messages;
  for (std::uint32_t i = 0; i < o.batch; ++i) messages.push_back(json::object{{"body", payload}});
  return json::serialize(json::object{{"messages", std::move(messages)}});
}

result run_http(const http_bench_options& o) {
  auto [host, port] = split(o.http);
  const std::string target = "/v1/topics/" + o.topic + "/messages";
  const std::string body = http_body(o);
  std::atomic<bool> measuring{false}, stop{false};
  std::atomic<std::uint64_t> requests{0}, errors{0};
  std::mutex mu;
  latency_recorder all;
  std::vector<std::thread> threads;
  for (std::uint32_t t = 0; t < o.concurrency; ++t) {
    threads.emplace_back([&, host = host, port = port] { or_exit([&] {
      asio::io_context io;
      beast::tcp_stream stream(io);
      stream.connect(asio::ip::tcp::endpoint(asio::ip::make_address(host), port));
      stream.socket().set_option(asio::ip::tcp::no_delay(true));
      beast::flat_buffer buf;
      latency_recorder mine;
      while (!stop) {
        http::request<http::string_body> req{http::verb::post, target, 11};
        req.set(http::field::host, host);
        req.set(http::field::content_type, "application/json");
        req.body() = body;
        req.prepare_payload();
        const auto started = clock::now();
        http::write(stream, req);
        http::response<http::string_body> res;
        http::read(stream, buf, res);
        if (!measuring) continue;
        if (res.result_int() != 200) {
          ++errors;
          continue;
        }
        mine.add(clock::now() - started);
        ++requests;
      }
      std::lock_guard lk(mu);
      all.merge(mine);
    }); });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));  // unmeasured warm-up
  measuring = true;
  const auto from = clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));  // the measured window
  measuring = false;
  const double secs = std::chrono::duration<double>(clock::now() - from).count();
  const auto n = requests.load();
  stop = true;
  for (auto& t : threads) t.join();
  return {"http", static_cast<double>(n) * o.batch / secs, static_cast<double>(n) / secs, all.compute(), errors.load()};
}

result run_wire(const http_bench_options& o) {
  auto [host, port] = split(o.broker);
  asio::io_context io;
  auto conn = std::make_shared<wire_connection>(io, host, port);
  conn->connect_blocking("txmq-bench-http-compare");
  const std::string payload(o.message_bytes, 'x');
  std::atomic<bool> measuring{false}, stop{false};
  std::uint64_t requests = 0, errors = 0;
  latency_recorder lat;
  std::function<void()> send_one = [&] {
    if (stop) return;
    v1::Frame f;
    auto* p = f.mutable_produce();
    p->set_topic(o.topic);
    for (std::uint32_t i = 0; i < o.batch; ++i) {
      auto* m = p->add_messages();
      m->set_id(std::string(protocol::uuid::make_v7().raw()));
      m->set_body(payload);
    }
    const auto started = clock::now();
    conn->request(std::move(f), [&, started](const v1::Frame& answer) {
      if (measuring) {
        if (answer.has_error()) {
          ++errors;
        } else {
          lat.add(clock::now() - started);
          ++requests;
        }
      }
      send_one();
    });
  };
  for (std::uint32_t i = 0; i < o.concurrency; ++i) asio::post(io, send_one);
  std::thread runner([&] { or_exit([&] { io.run(); }); });
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));  // unmeasured warm-up
  asio::post(io, [&] { measuring = true; });
  const auto from = clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));  // the measured window
  std::promise<std::uint64_t> counted;
  asio::post(io, [&] {
    measuring = false;
    stop = true;
    counted.set_value(requests);
  });
  const auto n = counted.get_future().get();
  const double secs = std::chrono::duration<double>(clock::now() - from).count();
  // Let the requests in flight finish, then stop.
  while (true) {
    std::promise<std::size_t> pending;
    asio::post(io, [&] { pending.set_value(conn->pending()); });
    if (pending.get_future().get() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a count
  }
  io.stop();
  runner.join();
  return {"wire", static_cast<double>(n) * o.batch / secs, static_cast<double>(n) / secs, lat.compute(), errors};
}

}  // namespace

int run_http_bench(const http_bench_options& o) {
  std::vector<result> results;
  results.push_back(run_http(o));
  results.push_back(run_wire(o));
  if (o.json) {
    for (auto& r : results) {
      std::cout << json::serialize(json::object{{"workload", "http-publish"},
                                                {"protocol", r.protocol},
                                                {"batch", o.batch},
                                                {"concurrency", o.concurrency},
                                                {"message_bytes", o.message_bytes},
                                                {"messages_per_second", r.messages_per_second},
                                                {"requests_per_second", r.requests_per_second},
                                                {"p50_ms", r.latency.p50_ms},
                                                {"p99_ms", r.latency.p99_ms},
                                                {"max_ms", r.latency.max_ms},
                                                {"errors", r.errors}})
                << "\n";
    }
    return 0;
  }
  std::printf("produce, %u messages of %u B per request, %u requests in flight, %.0f s each\n", o.batch,
              o.message_bytes, o.concurrency, o.seconds);
  std::printf("%-8s %12s %10s %10s %10s %8s\n", "protocol", "msg/s", "req/s", "p50 ms", "p99 ms", "errors");
  for (auto& r : results) {
    std::printf("%-8s %12.0f %10.0f %10.2f %10.2f %8llu\n", r.protocol.c_str(), r.messages_per_second,
                r.requests_per_second, r.latency.p50_ms, r.latency.p99_ms, static_cast<unsigned long long>(r.errors));
  }
  return 0;
}

}  // namespace txmq::bench
