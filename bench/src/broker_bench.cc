#include "broker_bench.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <boost/json.hpp>

#include "latency.h"
#include "txmq/protocol/message_id.h"
#include "wire_client.h"

namespace txmq::bench {
namespace {

namespace asio = boost::asio;
using clock_type = std::chrono::steady_clock;

struct figures {
  double messages_per_s = 0;
  percentiles latency;
  std::uint64_t errors = 0;
};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch()).count();
}

// Resident memory (KiB) and CPU seconds of a process, from /proc.
std::pair<double, double> process_usage(int pid) {
  double rss_mib = 0, cpu_s = 0;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) rss_mib = std::stod(line.substr(6)) / 1024.0;
  }
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  auto close = content.rfind(')');
  if (close != std::string::npos) {
    std::istringstream rest(content.substr(close + 2));
    std::string field;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14 || i == 15) cpu_s += std::stod(field) / static_cast<double>(::sysconf(_SC_CLK_TCK));
    }
  }
  return {rss_mib, cpu_s};
}

class harness {
 public:
  explicit harness(const broker_bench_options& o) : o_(o), body_(o.message_bytes, 'x') {
    for (std::size_t i = 0; i < std::max<std::size_t>(o.connections, 1); ++i) {
      auto c = std::make_shared<wire_connection>(io_, o.host, o.port);
      c->connect_blocking("txmq-bench-" + std::to_string(i));
      conns_.push_back(std::move(c));
    }
    v1::Frame f;
    f.mutable_create_topic()->set_name(o.topic);
    f.mutable_create_topic()->set_partitions(o.partitions);
    bool done = false;
    conns_[0]->request(f, [&](const v1::Frame& r) {
      if (r.has_error()) throw std::runtime_error("create topic: " + r.error().message());
      done = true;
    });
    while (!done) io_.run_one();
  }

  v1::Frame produce_request(std::size_t n) {
    v1::Frame f;
    auto* p = f.mutable_produce();
    p->set_topic(o_.topic);
    const auto sent = now_ns();
    for (std::size_t i = 0; i < n; ++i) {
      auto* m = p->add_messages();
      m->set_id(std::string(protocol::uuid::make_v7().raw()));
      std::string body = body_;
      std::memcpy(body.data(), &sent, std::min(sizeof sent, body.size()));
      m->set_body(std::move(body));
    }
    return f;
  }

  // Closed loop: `in_flight` messages outstanding in requests of `batch`.
  figures publish() {
    latency_recorder lat;
    std::uint64_t done_msgs = 0, errors = 0;
    bool measuring = false, stopping = false;
    std::size_t outstanding = 0;
    std::function<void(std::size_t, std::size_t)> issue = [&](std::size_t conn, std::size_t n) {
      ++outstanding;
      const auto start = clock_type::now();
      conns_[conn]->request(produce_request(n), [&, conn, n, start](const v1::Frame& r) {
        --outstanding;
        if (r.has_error()) ++errors;
        if (measuring) {
          done_msgs += n;
          const auto d = clock_type::now() - start;
          for (std::size_t i = 0; i < n; ++i) lat.add(d);
        }
        if (!stopping) issue(conn, n);
      });
    };
    const std::size_t batch = std::max<std::size_t>(1, std::min(o_.batch, o_.in_flight));
    std::size_t left = o_.in_flight, k = 0;
    while (left > 0) {
      const std::size_t n = std::min(batch, left);
      issue(k++ % conns_.size(), n);
      left -= n;
    }
    run_for(o_.warmup);
    measuring = true;
    const auto t0 = clock_type::now();
    run_for(o_.seconds);
    measuring = false;
    const double elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
    stopping = true;
    while (outstanding > 0) io_.run_one();
    return {static_cast<double>(done_msgs) / elapsed, lat.compute(), errors};
  }

  // Open loop: one message per request at a steady rate; latency from the scheduled send time.
  // With consume, a consumer group reads along and the latency is publish -> delivery.
  figures rate(bool consume) {
    latency_recorder lat;
    std::uint64_t done_msgs = 0, errors = 0, sent = 0;
    bool measuring = false;
    std::size_t outstanding = 0;
    const double interval_ns = 1e9 / o_.rate;
    const auto start = clock_type::now();
    asio::steady_timer ticker(io_);
    bool stop = false;
    std::function<void()> tick = [&] {
      if (stop) return;
      const auto now = clock_type::now();
      const auto due = static_cast<std::uint64_t>(std::chrono::duration<double, std::nano>(now - start).count() / interval_ns);
      while (sent < due) {
        const auto scheduled = start + std::chrono::nanoseconds(static_cast<std::int64_t>(sent * interval_ns));
        ++sent;
        ++outstanding;
        auto f = produce_request(1);
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(scheduled.time_since_epoch()).count();
        std::memcpy(f.mutable_produce()->mutable_messages(0)->mutable_body()->data(), &ns, sizeof ns);
        conns_[sent % conns_.size()]->request(std::move(f), [&, scheduled](const v1::Frame& r) {
          --outstanding;
          if (r.has_error()) ++errors;
          if (!consume && measuring) {
            ++done_msgs;
            lat.add(clock_type::now() - scheduled);
          }
        });
      }
      ticker.expires_after(std::chrono::microseconds(200));
      ticker.async_wait([&](boost::system::error_code) { tick(); });
    };
    std::shared_ptr<wire_connection> consumer;
    std::function<void()> fetch;
    if (consume) {
      consumer = std::make_shared<wire_connection>(io_, o_.host, o_.port);
      consumer->connect_blocking("txmq-bench-consumer");
      const std::string group = "bench-e2e-" + std::to_string(::getpid()) + "-" + std::to_string(now_ns());
      fetch = [&, group] {
        if (stop) return;
        v1::Frame f;
        f.mutable_fetch()->set_group(group);
        f.mutable_fetch()->add_topics(o_.topic);
        f.mutable_fetch()->set_max_messages(1000);
        f.mutable_fetch()->set_max_wait_ms(100);
        consumer->request(std::move(f), [&, group](const v1::Frame& r) {
          if (r.has_error()) {
            ++errors;
          } else if (r.fetch_response().deliveries_size() > 0) {
            const auto now = now_ns();
            v1::Frame ack;
            ack.mutable_ack()->set_group(group);
            for (auto& d : r.fetch_response().deliveries()) {
              std::int64_t sent_ns = 0;
              std::memcpy(&sent_ns, d.message().body().data(), sizeof sent_ns);
              if (measuring && sent_ns > 0) {
                ++done_msgs;
                lat.add(std::chrono::nanoseconds(now - sent_ns));
              }
              auto* ref = ack.mutable_ack()->add_refs();
              ref->set_topic(d.message().topic());
              ref->set_partition(d.message().partition());
              ref->set_offset(d.message().offset());
            }
            consumer->request(std::move(ack), [](const v1::Frame&) {});
          }
          fetch();
        });
      };
      // Join at the end of the topic: start the group at the latest offset.
      v1::Frame g;
      g.mutable_create_group()->set_group(group);
      g.mutable_create_group()->set_topic(o_.topic);
      g.mutable_create_group()->set_from_latest(true);
      bool ready = false;
      consumer->request(g, [&](const v1::Frame&) { ready = true; });
      while (!ready) io_.run_one();
      fetch();
    }
    tick();
    run_for(o_.warmup);
    measuring = true;
    const auto t0 = clock_type::now();
    run_for(o_.seconds);
    measuring = false;
    const double elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
    stop = true;
    ticker.cancel();
    while (outstanding > 0 || (consumer && consumer->pending() > 0)) io_.run_one();
    return {static_cast<double>(done_msgs) / elapsed, lat.compute(), errors};
  }

  // Produces `backlog` messages as fast as 16 requests of 500 in flight allow.
  figures fill() {
    const auto t0 = clock_type::now();
    fill_backlog();
    const double elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
    return {static_cast<double>(o_.backlog) / elapsed, {}, 0};
  }

  void fill_backlog() {
    std::size_t produced = 0, outstanding = 0;
    std::function<void()> fill = [&] {
      if (produced >= o_.backlog) return;
      const std::size_t n = std::min<std::size_t>(500, o_.backlog - produced);
      produced += n;
      ++outstanding;
      conns_[produced % conns_.size()]->request(produce_request(n), [&](const v1::Frame& r) {
        --outstanding;
        if (r.has_error()) throw std::runtime_error("fill: " + r.error().message());
        fill();
      });
    };
    for (int i = 0; i < 16; ++i) fill();
    while (outstanding > 0) io_.run_one();
  }

  // Fills a backlog, then consumes it with acks (one ack request per fetched batch, pipelined).
  figures consume() {
    fill_backlog();
    const std::string group = "bench-consume-" + std::to_string(::getpid()) + "-" + std::to_string(now_ns());
    std::uint64_t consumed = 0, errors = 0;
    std::size_t active = 0;
    latency_recorder lat;  // fetch round trips
    const auto t0 = clock_type::now();
    std::function<void(std::size_t)> fetch = [&](std::size_t conn) {
      if (consumed >= o_.backlog) return;
      ++active;
      v1::Frame f;
      f.mutable_fetch()->set_group(group);
      f.mutable_fetch()->add_topics(o_.topic);
      f.mutable_fetch()->set_max_messages(1000);
      f.mutable_fetch()->set_max_wait_ms(100);
      f.mutable_fetch()->set_ack_deadline_ms(600'000);
      const auto start = clock_type::now();
      conns_[conn]->request(std::move(f), [&, conn, start](const v1::Frame& r) {
        --active;
        lat.add(clock_type::now() - start);
        if (r.has_error()) {
          ++errors;
          return;
        }
        const auto& ds = r.fetch_response().deliveries();
        if (!ds.empty()) {
          v1::Frame ack;
          ack.mutable_ack()->set_group(group);
          for (auto& d : ds) {
            auto* ref = ack.mutable_ack()->add_refs();
            ref->set_topic(d.message().topic());
            ref->set_partition(d.message().partition());
            ref->set_offset(d.message().offset());
            ref->set_attempt(d.message().attempt());
          }
          consumed += static_cast<std::uint64_t>(ds.size());
          ++active;
          conns_[conn]->request(std::move(ack), [&](const v1::Frame& a) {
            --active;
            if (a.has_error()) ++errors;
          });
        }
        fetch(conn);
      });
    };
    for (std::size_t i = 0; i < conns_.size(); ++i) fetch(i);
    while (active > 0) io_.run_one();
    const double elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
    return {static_cast<double>(consumed) / elapsed, lat.compute(), errors};
  }

 private:
  void run_for(double seconds) {
    io_.restart();
    io_.run_for(std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(seconds)));
  }

  const broker_bench_options& o_;
  asio::io_context io_;
  std::vector<std::shared_ptr<wire_connection>> conns_;
  std::string body_;
};

}  // namespace

int run_broker_bench(const broker_bench_options& o) {
  std::vector<double> tput, p50, p90, p99, p999;
  std::uint64_t errors = 0;
  auto usage_before = o.broker_pid ? process_usage(o.broker_pid) : std::pair<double, double>{};
  for (int r = 0; r < o.runs; ++r) {
    broker_bench_options run = o;
    if (o.workload == "consume" || o.workload == "fill") run.topic = o.topic + "-" + std::to_string(r) + "-" + std::to_string(::getpid());
    harness h(run);
    figures f;
    if (o.workload == "publish") f = h.publish();
    else if (o.workload == "rate") f = h.rate(false);
    else if (o.workload == "e2e") f = h.rate(true);
    else if (o.workload == "consume") f = h.consume();
    else if (o.workload == "fill") f = h.fill();
    else throw std::invalid_argument("unknown workload '" + o.workload + "' (publish, rate, e2e, consume)");
    tput.push_back(f.messages_per_s);
    p50.push_back(f.latency.p50_ms);
    p90.push_back(f.latency.p90_ms);
    p99.push_back(f.latency.p99_ms);
    p999.push_back(f.latency.p999_ms);
    errors += f.errors;
  }
  auto usage_after = o.broker_pid ? process_usage(o.broker_pid) : std::pair<double, double>{};
  if (o.json) {
    boost::json::object line{{"workload", o.workload}, {"message_bytes", o.message_bytes}, {"runs", o.runs},
                             {"in_flight", o.in_flight}, {"batch", o.batch}, {"rate", o.rate},
                             {"connections", o.connections}, {"messages_per_s", median(tput)},
                             {"p50_ms", median(p50)}, {"p90_ms", median(p90)}, {"p99_ms", median(p99)},
                             {"p999_ms", median(p999)}, {"errors", errors}};
    boost::json::array all;
    for (double t : tput) all.push_back(t);
    line["messages_per_s_each_run"] = all;
    if (o.broker_pid) {
      line["broker_rss_mib"] = usage_after.first;
      line["broker_cpu_s"] = usage_after.second - usage_before.second;
    }
    std::cout << boost::json::serialize(line) << std::endl;
  } else {
    std::printf("%-8s %12s %10s %10s %10s %10s %8s", "workload", "msg/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms",
                "errors");
    if (o.broker_pid) std::printf(" %10s %10s", "rss MiB", "cpu s");
    std::printf("\n%-8s %12.0f %10.3f %10.3f %10.3f %10.3f %8llu", o.workload.c_str(), median(tput), median(p50),
                median(p90), median(p99), median(p999), static_cast<unsigned long long>(errors));
    if (o.broker_pid) std::printf(" %10.1f %10.2f", usage_after.first, usage_after.second - usage_before.second);
    std::printf("\n");
  }
  return errors ? 1 : 0;
}

}  // namespace txmq::bench
