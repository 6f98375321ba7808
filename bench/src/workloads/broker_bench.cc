#include "workloads/broker_bench.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <thread>

#include <boost/json.hpp>

#include "support/latency.h"
#include "support/process_usage.h"
#include "peers/system_under_test.h"

namespace txmq::bench {
namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

// How long the end of a run may wait for answers still in flight before it counts them lost.
constexpr auto k_drain_limit = 60s;
// Open-loop sends are one request each; the PostgreSQL driver needs a connection per request
// in flight, and 32 cover 10,000 msg/s at 3 ms per commit.
constexpr std::size_t k_rate_connections = 32;

struct figures {
  double messages_per_s = 0;
  percentiles latency;
  std::uint64_t errors = 0;
  double broker_cpu_s = 0;
  double broker_rss_mib = 0;
  std::uint64_t messages = 0;
};

std::int64_t to_ns(clock_type::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// A body of the configured size whose first 8 bytes carry a steady-clock time (the consumer
// runs in this process, so publish -> delivery needs no clock sync); the rest is one repeated
// byte, or with `random` bytes of a xorshift generator (incompressible).
std::string make_body(std::size_t bytes, clock_type::time_point sent, bool random = false) {
  std::string body(std::max(bytes, sizeof(std::int64_t)), 'x');
  const auto ns = to_ns(sent);
  std::memcpy(body.data(), &ns, sizeof ns);
  if (random) {
    thread_local std::uint64_t state = 0x9e3779b97f4a7c15u;
    for (std::size_t i = sizeof ns; i < body.size(); i += sizeof state) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      std::memcpy(body.data() + i, &state, std::min(sizeof state, body.size() - i));
    }
  }
  return body;
}

clock_type::time_point body_time(std::string_view body) {
  std::int64_t ns = 0;
  if (body.size() >= sizeof ns) std::memcpy(&ns, body.data(), sizeof ns);
  return clock_type::time_point(std::chrono::nanoseconds(ns));
}

// The broker's CPU time over the measured part of a run, and its memory at the end of it.
class usage_meter {
 public:
  explicit usage_meter(std::vector<int> pids) : pids_(std::move(pids)) {}
  void start() { before_ = sum(); }
  void stop(figures& f) const {
    if (pids_.empty()) return;
    const auto after = sum();
    f.broker_cpu_s = after.cpu_s - before_.cpu_s;
    f.broker_rss_mib = after.rss_mib;
  }

 private:
  // Every broker of a cluster together: CPU per message over the whole cluster.
  [[nodiscard]] process_usage sum() const {
    process_usage total;
    for (int pid : pids_) {
      const auto u = process_tree_usage(pid);
      total.cpu_s += u.cpu_s;
      total.rss_mib += u.rss_mib;
    }
    return total;
  }
  std::vector<int> pids_;
  process_usage before_;
};

void wait_until_answered(publisher& pub, std::uint64_t& errors) {
  const auto limit = clock_type::now() + k_drain_limit;
  while (pub.outstanding() > 0 && clock_type::now() < limit) pub.poll(10ms);
  errors += pub.outstanding();
}

void poll_until(publisher& pub, clock_type::time_point until) {
  for (auto now = clock_type::now(); now < until; now = clock_type::now()) {
    pub.poll(std::min<clock_type::duration>(until - now, 10ms));
  }
}

// Closed loop: `in_flight` messages outstanding in batches of `batch`; latency = batch sent ->
// batch acknowledged, counted once per message.
figures publish_closed(publisher& pub, const broker_bench_options& o, usage_meter& meter) {
  latency_recorder lat;
  figures f;
  bool measuring = false, stopping = false;
  std::function<void(std::size_t)> issue = [&](std::size_t n) {
    const auto start = clock_type::now();
    std::vector<std::string> bodies;
    for (std::size_t i = 0; i < n; ++i) bodies.push_back(make_body(o.message_bytes, start, o.random_bodies));
    pub.send(std::move(bodies), [&, n, start](bool ok) {
      if (!ok) f.errors += n;
      if (measuring) {
        f.messages += n;
        const auto d = clock_type::now() - start;
        for (std::size_t i = 0; i < n; ++i) lat.add(d);
      }
      if (!stopping) issue(n);
    });
  };
  const std::size_t batch = std::clamp<std::size_t>(o.batch, 1, std::max<std::size_t>(o.in_flight, 1));
  for (std::size_t left = std::max<std::size_t>(o.in_flight, 1); left > 0;) {
    const std::size_t n = std::min(batch, left);
    issue(n);
    left -= n;
  }
  poll_until(pub, clock_type::now() + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(o.warmup)));
  measuring = true;
  meter.start();
  const auto t0 = clock_type::now();
  poll_until(pub, t0 + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(o.seconds)));
  measuring = false;
  const double elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
  meter.stop(f);
  stopping = true;
  wait_until_answered(pub, f.errors);
  f.messages_per_s = static_cast<double>(f.messages) / elapsed;
  f.latency = lat.compute();
  return f;
}

// Publishes `count` messages with `in_flight` outstanding in batches of `batch`.
figures publish_count(publisher& pub, const broker_bench_options& o, std::size_t count) {
  figures f;
  std::size_t issued = 0;
  const std::size_t batch = std::clamp<std::size_t>(o.batch, 1, std::max<std::size_t>(o.in_flight, 1));
  std::function<void()> issue = [&] {
    if (issued >= count) return;
    const std::size_t n = std::min(batch, count - issued);
    issued += n;
    const auto now = clock_type::now();
    std::vector<std::string> bodies;
    for (std::size_t i = 0; i < n; ++i) bodies.push_back(make_body(o.message_bytes, now, o.random_bodies));
    pub.send(std::move(bodies), [&, n](bool ok) {
      if (!ok) f.errors += n;
      f.messages += n;
      issue();
    });
  };
  const auto t0 = clock_type::now();
  for (std::size_t i = 0; i < std::max<std::size_t>(1, o.in_flight / batch); ++i) issue();
  wait_until_answered(pub, f.errors);
  f.messages_per_s = static_cast<double>(f.messages) / std::chrono::duration<double>(clock_type::now() - t0).count();
  return f;
}

// Open loop: one message per send at a steady rate, latency from its scheduled send time (so a
// stalled system is charged for the messages it held back). With `consume`, a consumer on its
// own thread reads along and the latency is scheduled send -> delivery.
figures publish_rate(system_under_test& sys, publisher& pub, const broker_bench_options& o, bool consume, usage_meter& meter) {
  figures f;
  latency_recorder publish_lat, deliver_lat;
  if (!o.latency_log.empty()) {
    publish_lat.keep_times();
    deliver_lat.keep_times();
  }
  const auto interval = std::chrono::duration<double>(1.0 / o.rate);
  const auto start = clock_type::now();
  const auto measure_from = start + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(o.warmup));
  const auto measure_to = measure_from + std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(o.seconds));
  auto measured = [&](clock_type::time_point t) { return t >= measure_from && t < measure_to; };

  std::atomic<bool> stop_consumer = false;
  std::atomic<std::uint64_t> delivered = 0;
  std::uint64_t delivered_measured = 0;
  std::string consumer_error;
  std::thread reader;
  if (consume) {
    auto c = sys.make_consumer();
    reader = std::thread([&, c = std::move(c)] {
      try {
        while (!stop_consumer) {
          delivered += c->poll(10ms, [&](std::string_view body) {
            const auto sent = body_time(body);
            if (measured(sent)) {
              deliver_lat.add(clock_type::now() - sent, to_ns(sent));
              ++delivered_measured;
            }
          });
        }
        c->drain();
      } catch (const std::exception& e) {
        consumer_error = e.what();
      }
    });
  }

  std::uint64_t sent = 0;
  bool metering = false;
  for (auto now = clock_type::now(); now < measure_to; now = clock_type::now()) {
    if (!metering && now >= measure_from) {
      meter.start();
      metering = true;
    }
    // Messages 0..k are due once message k's scheduled time (start + k * interval) has come:
    // k + 1 of them. Counting k left the next one's time always in the past, so the wait below
    // was always zero: the generator spun a whole core between sends (1.3 million epoll_wait
    // calls a second at 10,000/s, on the 2 cores the system under test runs on), and sent each
    // message one interval late.
    const auto due = static_cast<std::uint64_t>(std::chrono::duration<double>(now - start) / interval) + 1;
    for (; sent < due; ++sent) {
      const auto scheduled = start + std::chrono::duration_cast<clock_type::duration>(interval * static_cast<double>(sent));
      std::vector<std::string> one;
      one.push_back(make_body(o.message_bytes, scheduled, o.random_bodies));
      pub.send(std::move(one), [&, scheduled](bool ok) {
        if (!ok) ++f.errors;
        if (measured(scheduled)) {
          ++f.messages;
          publish_lat.add(clock_type::now() - scheduled, to_ns(scheduled));
        }
      });
    }
    const auto next = start + std::chrono::duration_cast<clock_type::duration>(interval * static_cast<double>(sent));
    pub.poll(std::clamp<clock_type::duration>(next - clock_type::now(), clock_type::duration::zero(), 1ms));
  }
  meter.stop(f);
  wait_until_answered(pub, f.errors);
  if (consume) {
    const auto limit = clock_type::now() + k_drain_limit;
    while (delivered < sent && clock_type::now() < limit && consumer_error.empty()) std::this_thread::sleep_for(1ms);
    stop_consumer = true;
    reader.join();
    if (!consumer_error.empty()) throw std::runtime_error(consumer_error);
    if (delivered < sent) f.errors += sent - delivered;
    f.messages = delivered_measured;
  }
  auto& lat = consume ? deliver_lat : publish_lat;
  if (!o.latency_log.empty() && !lat.write_log(o.latency_log)) {
    throw std::runtime_error("cannot write the latency log " + o.latency_log);
  }
  f.latency = lat.compute();
  f.messages_per_s = static_cast<double>(f.messages) / o.seconds;
  return f;
}

// Fills a backlog, then consumes it with acks; throughput = backlog / time to consume it all.
figures consume_backlog(system_under_test& sys, const broker_bench_options& o, usage_meter& meter) {
  figures f;
  {
    auto pub = sys.make_publisher(o.in_flight / std::max<std::size_t>(o.batch, 1) + 1);
    f.errors += publish_count(*pub, o, o.backlog).errors;
  }
  auto c = sys.make_consumer();
  meter.start();
  const auto t0 = clock_type::now();
  auto progress = t0;
  while (f.messages < o.backlog) {
    const auto n = c->poll(100ms, [](std::string_view) {});
    f.messages += n;
    const auto now = clock_type::now();
    if (n > 0) progress = now;
    if (now - progress > k_drain_limit) break;
  }
  c->drain();
  const double elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
  meter.stop(f);
  if (f.messages < o.backlog) f.errors += o.backlog - f.messages;
  f.messages_per_s = static_cast<double>(f.messages) / elapsed;
  return f;
}

figures run_once(const broker_bench_options& o, int run, system_under_test::replication_shape& shape) {
  system_options so;
  so.system = o.system;
  so.address = o.address;
  so.tls = o.tls;
  so.auth_token = o.auth_token;
  so.partitions = o.partitions;
  so.replicas = o.replicas;
  // A new topic/queue/stream/table for every run and workload, so each starts empty.
  so.name = o.topic + "-" + o.workload + "-" + std::to_string(::getpid()) + "-" + std::to_string(run);
  auto sys = open_system(so);
  shape = sys->replication();
  usage_meter meter(o.broker_pids);
  if (o.workload == "consume") return consume_backlog(*sys, o, meter);
  const std::size_t requests = o.workload == "publish" ? o.in_flight / std::max<std::size_t>(o.batch, 1) + 1 : k_rate_connections;
  auto pub = sys->make_publisher(requests);
  if (o.workload == "publish") return publish_closed(*pub, o, meter);
  if (o.workload == "rate") return publish_rate(*sys, *pub, o, false, meter);
  if (o.workload == "e2e") return publish_rate(*sys, *pub, o, true, meter);
  if (o.workload == "fill") {
    meter.start();
    auto f = publish_count(*pub, o, o.backlog);
    meter.stop(f);
    return f;
  }
  throw std::invalid_argument("unknown workload '" + o.workload + "' (publish, rate, e2e, consume, fill)");
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

}  // namespace

int run_broker_bench(const broker_bench_options& o) {
  std::vector<double> tput, p50, p90, p99, p999, rss;
  std::uint64_t errors = 0, messages = 0;
  double cpu_s = 0;
  system_under_test::replication_shape shape;
  for (int r = 0; r < o.runs; ++r) {
    const auto f = run_once(o, r, shape);
    tput.push_back(f.messages_per_s);
    p50.push_back(f.latency.p50_ms);
    p90.push_back(f.latency.p90_ms);
    p99.push_back(f.latency.p99_ms);
    p999.push_back(f.latency.p999_ms);
    rss.push_back(f.broker_rss_mib);
    errors += f.errors;
    messages += f.messages;
    cpu_s += f.broker_cpu_s;
  }
  const double cpu_us_per_msg = messages ? cpu_s * 1e6 / static_cast<double>(messages) : 0;
  const std::string name = o.label.empty() ? o.system : o.label;
  if (o.json) {
    boost::json::object line{{"system", name}, {"workload", o.workload}, {"message_bytes", o.message_bytes},
                             {"runs", o.runs}, {"in_flight", o.in_flight}, {"batch", o.batch}, {"rate", o.rate},
                             {"messages_per_s", median(tput)}, {"p50_ms", median(p50)}, {"p90_ms", median(p90)},
                             {"p99_ms", median(p99)}, {"p999_ms", median(p999)}, {"errors", errors},
                             {"load1", load_average()}};
    if (o.workload == "consume" || o.workload == "fill") line["backlog"] = o.backlog;
    if (shape.replicas > 0) {
      line["replicas"] = shape.replicas;
      line["min_isr_size"] = shape.min_isr_size;
    }
    boost::json::array all;
    for (double t : tput) all.push_back(t);
    line["messages_per_s_each_run"] = all;
    if (!o.broker_pids.empty()) {
      line["broker_rss_mib"] = *std::max_element(rss.begin(), rss.end());
      line["broker_cpu_s"] = cpu_s;
      line["broker_cpu_us_per_msg"] = cpu_us_per_msg;
    }
    std::cout << boost::json::serialize(line) << std::endl;
  } else {
    std::printf("%-16s %-8s %12s %10s %10s %10s %10s %8s", "system", "workload", "msg/s", "p50 ms", "p90 ms", "p99 ms",
                "p99.9 ms", "errors");
    if (!o.broker_pids.empty()) std::printf(" %10s %10s %12s", "rss MiB", "cpu s", "cpu us/msg");
    std::printf("\n%-16s %-8s %12.0f %10.3f %10.3f %10.3f %10.3f %8llu", name.c_str(), o.workload.c_str(), median(tput),
                median(p50), median(p90), median(p99), median(p999), static_cast<unsigned long long>(errors));
    if (!o.broker_pids.empty()) {
      std::printf(" %10.1f %10.2f %12.1f", *std::max_element(rss.begin(), rss.end()), cpu_s, cpu_us_per_msg);
    }
    std::printf("\n");
  }
  return errors ? 1 : 0;
}

}  // namespace txmq::bench
