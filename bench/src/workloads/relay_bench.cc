#include "workloads/relay_bench.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <stop_token>
#include <thread>
#include <unordered_map>

#include <boost/json.hpp>
#include <boost/program_options.hpp>

#include "support/options.h"
#include "support/token_options.h"
#include "support/latency.h"
#include "support/process_usage.h"
#include "txmq/client/admin.h"
#include "txmq/pg/pg.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/outbox_writer.h"
#include "txmq/producer/pg_schema.h"
#include "txmq/producer/producer.h"

extern char** environ;

namespace txmq::bench {
namespace {

using clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class T>
T must(client::result<T> r, const std::string& what) {
  if (!r) throw failure(what + ": " + r.error().to_string());
  return std::move(r).value();
}

void must(client::result<void> r, const std::string& what) {
  if (!r) throw failure(what + ": " + r.error().to_string());
}

std::string relay_binary(const relay_bench_options& o) {
  if (!o.relay.empty()) return o.relay;
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "txmq-relay").string();
}

// A txmq-relay process for one step of the run; SIGTERM (a clean stop) when it goes.
class relay_child {
 public:
  relay_child(const relay_bench_options& o, const std::string& id) {
    const std::string bin = relay_binary(o);
    // The bench's pid in the name: two benches on one machine keep their relays' logs apart.
    log_ = (std::filesystem::temp_directory_path() / ("txmq-bench-" + std::to_string(::getpid()) + "-" + id + ".log")).string();
    std::vector<std::string> args{bin, "--pg", o.pg, "--broker", o.broker, "--batch", std::to_string(o.batch),
                                  "--relay-id", id, "--http", "127.0.0.1:0"};
    // The token goes to the relay in its environment (TXMQ_TOKEN), not on its command line.
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::string_view(*e).starts_with("TXMQ_TOKEN=")) continue;
      env.emplace_back(*e);
    }
    if (!o.auth_token.empty()) env.push_back("TXMQ_TOKEN=" + o.auth_token);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, log_.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    const int rc = posix_spawn(&pid_, bin.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw failure("cannot start " + bin + " (--relay PATH names it): error " + std::to_string(rc));
  }
  ~relay_child() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  relay_child(const relay_child&) = delete;
  relay_child& operator=(const relay_child&) = delete;
  [[nodiscard]] pid_t pid() const noexcept { return pid_; }

 private:
  pid_t pid_ = -1;
  std::string log_;
};

std::string scalar(PGconn* c, const std::string& sql) {
  auto r = must(pg::exec(c, sql), sql);
  return PQntuples(r.get()) ? PQgetvalue(r.get(), 0, 0) : "";
}

void create_topic(const relay_bench_options& o, const std::string& topic) {
  client::connection_options co;
  co.address = o.broker;
  co.auth_token = o.auth_token;
  client::admin admin(std::make_shared<client::connection>(co));
  auto r = admin.create_topic({topic, 4});
  if (!r && !r.error().is(protocol::errc::topic_exists)) throw failure("create topic " + topic + ": " + r.error().to_string());
}

struct backlog_figures {
  double rows_per_s = 0;
  double relay_cpu_us_per_row = 0;
  double broker_cpu_us_per_row = 0;  // 0 without --broker-pid
};

// Backlog through the relay: rows committed first, then the relay started; rows/s until empty.
backlog_figures relay_backlog(const relay_bench_options& o, PGconn* c, const std::string& topic, int run) {
  must(pg::exec(c, "TRUNCATE txmq_outbox"), "empty the outbox");
  const std::size_t chunk = 100'000;
  // Ids shaped like UUIDv7 (a millisecond count, then a counter), as outbox_writer and the
  // producer make them: the broker's dedupe index is kept in id order, and random ids
  // (gen_random_uuid, the column default) would cost it more than the direct route pays.
  const auto base_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch()).count();
  for (std::size_t done = 0; done < o.rows; done += chunk) {
    const auto n = std::min(chunk, o.rows - done);
    must(pg::exec(c,
                  "INSERT INTO txmq_outbox (id, topic, key, payload) SELECT (lpad(to_hex($4::bigint + i / 1000), 12, '0') "
                  "|| '7000' || '8' || lpad(to_hex(i), 15, '0'))::uuid, $1, 'k' || (i % 1000), "
                  "decode(repeat('ab', $2::int), 'hex') FROM generate_series($5::bigint, $5::bigint + $3::int - 1) i",
                  {topic, std::to_string(o.message_bytes), std::to_string(n), std::to_string(base_ms), std::to_string(done)}),
         "fill the outbox");
  }
  must(pg::exec(c, "VACUUM ANALYZE txmq_outbox"), "vacuum the outbox");
  create_topic(o, topic);
  client::connection_options co;
  co.address = o.broker;
  co.auth_token = o.auth_token;
  client::admin admin(std::make_shared<client::connection>(co));
  // Progress is read from the broker (messages stored in the topic), not from the table: a scan
  // of an outbox full of just-deleted rows would cost PostgreSQL more than the relay's own work.
  auto stored = [&] {
    auto t = admin.describe_topic(topic);
    if (!t) throw failure("describe topic " + topic + ": " + t.error().to_string());
    std::uint64_t n = 0;
    for (const auto& p : t.value().partition_info()) n += p.end_offset() - p.start_offset();
    return n;
  };
  const double broker_cpu = o.broker_pid ? process_tree_usage(o.broker_pid).cpu_s : 0;
  const auto start = clock::now();
  relay_child relay(o, "bench-backlog-" + std::to_string(run));
  while (stored() < o.rows) {
    std::this_thread::sleep_for(20ms);  // polling the broker; the relay runs in its own process
    if (clock::now() - start > 30min) throw failure("the relay did not publish the backlog in 30 minutes");
  }
  const double rows = static_cast<double>(o.rows);
  backlog_figures f;
  f.rows_per_s = rows / std::chrono::duration<double>(clock::now() - start).count();
  // Every row acked is deleted within a round; the table must end empty.
  while (scalar(c, "SELECT EXISTS (SELECT 1 FROM txmq_outbox)") == "t") {
    std::this_thread::sleep_for(200ms);  // polling the table
    if (clock::now() - start > 31min) throw failure("the relay published the backlog but did not delete it");
  }
  f.relay_cpu_us_per_row = process_tree_usage(relay.pid()).cpu_s * 1e6 / rows;
  if (o.broker_pid) f.broker_cpu_us_per_row = (process_tree_usage(o.broker_pid).cpu_s - broker_cpu) * 1e6 / rows;
  return f;
}

producer::outgoing_message event(const std::string& topic, std::size_t i, std::size_t bytes) {
  producer::outgoing_message m;
  m.topic = topic;
  m.key = "k" + std::to_string(i % 1000);
  m.body = std::string(bytes, '\xab');
  return m;
}

// The same events straight from the application: async sends, all acknowledged.
double direct_backlog(const relay_bench_options& o, const std::string& topic) {
  producer::producer_options po;
  po.connection.address = o.broker;
  po.connection.auth_token = o.auth_token;
  producer::producer p(po);
  std::atomic<std::size_t> failed{0};
  const auto start = clock::now();
  for (std::size_t i = 0; i < o.rows; ++i) {
    p.async_send(event(topic, i, o.message_bytes), [&](client::result<producer::send_result> r) {
      if (!r) ++failed;
    });
  }
  must(p.flush(), "flush the producer");
  const double rate = static_cast<double>(o.rows) / std::chrono::duration<double>(clock::now() - start).count();
  if (failed.load()) throw failure(std::to_string(failed.load()) + " direct sends failed");
  return rate;
}

// When each id was committed (or sent) and consumed, joined at the end.
class latency_log {
 public:
  void sent(const protocol::message_id& id, clock::time_point t) {
    std::lock_guard lock(mutex_);
    sent_[id] = t;
  }
  void received(const protocol::message_id& id, clock::time_point t) {
    std::lock_guard lock(mutex_);
    received_.emplace(id, t);
  }
  std::size_t received_count() {
    std::lock_guard lock(mutex_);
    return received_.size();
  }
  std::size_t sent_count() {
    std::lock_guard lock(mutex_);
    return sent_.size();
  }
  percentiles compute(clock::time_point measured_from) {
    std::lock_guard lock(mutex_);
    latency_recorder rec;
    for (const auto& [id, t] : sent_) {
      if (t < measured_from) continue;
      if (auto it = received_.find(id); it != received_.end()) rec.add(it->second - t);
    }
    return rec.compute();
  }

 private:
  std::mutex mutex_;
  std::unordered_map<protocol::message_id, clock::time_point, protocol::uuid_hash> sent_;
  std::unordered_map<protocol::message_id, clock::time_point, protocol::uuid_hash> received_;
};

// Runs `send(i)` at the steady rate on `threads` threads (open loop: a late send does not move
// the next one) for warmup + seconds; consumes the topic meanwhile; waits for every message.
template <class Send>
percentiles steady(const relay_bench_options& o, const std::string& topic, latency_log& log, int threads, Send send) {
  create_topic(o, topic);
  consumer::consumer_options co;
  co.connection.address = o.broker;
  co.connection.auth_token = o.auth_token;
  co.group = topic + "-readers";
  co.topics = {topic};
  co.concurrency = 4;
  co.max_wait = 100ms;
  consumer::consumer c(co);
  std::stop_source stop;
  std::thread reader([&] {
    (void)c.run(
        [&](const consumer::delivery& d) -> consumer::handler_result {
          log.received(d.id(), clock::now());
          return outcome::success();
        },
        stop.get_token());
  });
  const auto start = clock::now() + 200ms;
  const auto total = static_cast<std::size_t>(o.rate * (o.seconds + o.warmup));
  const auto interval = std::chrono::duration<double>(1.0 / o.rate);
  std::vector<std::thread> senders;
  for (int t = 0; t < threads; ++t) {
    senders.emplace_back([&, t] {
      for (std::size_t i = static_cast<std::size_t>(t); i < total; i += static_cast<std::size_t>(threads)) {
        std::this_thread::sleep_until(start + std::chrono::duration_cast<clock::duration>(interval * static_cast<double>(i)));
        send(t, i);
      }
    });
  }
  for (auto& s : senders) s.join();
  const auto until = clock::now() + 60s;
  while (log.received_count() < log.sent_count() && clock::now() < until) std::this_thread::sleep_for(10ms);  // polling a counter
  stop.request_stop();
  reader.join();
  if (log.received_count() < log.sent_count()) {
    throw failure(topic + ": " + std::to_string(log.sent_count() - log.received_count()) + " messages not consumed in 60 s");
  }
  return log.compute(start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o.warmup)));
}

percentiles relay_latency(const relay_bench_options& o, const std::string& topic, int run) {
  constexpr int writers = 4;  // one commit (fsync) per row: one connection alone would not keep the rate
  std::vector<pg::connection_ptr> conns;
  for (int i = 0; i < writers; ++i) conns.push_back(must(pg::connect(o.pg), "connect to PostgreSQL"));
  relay_child relay(o, "bench-latency-" + std::to_string(run));
  latency_log log;
  std::atomic<std::size_t> failed{0};
  auto p = steady(o, topic, log, writers, [&](int t, std::size_t i) {
    const auto m = event(topic, i, o.message_bytes);
    producer::outbox_message row{m.topic, m.key, {}, m.body, protocol::uuid::make_v7()};
    auto done = pg::in_transaction(conns[static_cast<std::size_t>(t)].get(), [&](PGconn* tx) -> client::result<void> {
      auto r = producer::outbox_writer(tx).add(row);
      if (!r) return r.error();
      return outcome::success();
    });
    if (done) {
      log.sent(*row.id, clock::now());
    } else {
      ++failed;
    }
  });
  if (failed.load()) throw failure(std::to_string(failed.load()) + " outbox transactions failed");
  return p;
}

percentiles direct_latency(const relay_bench_options& o, const std::string& topic) {
  producer::producer_options po;
  po.connection.address = o.broker;
  po.connection.auth_token = o.auth_token;
  producer::producer p(po);
  latency_log log;
  std::atomic<std::size_t> failed{0};
  auto result = steady(o, topic, log, 1, [&](int, std::size_t i) {
    auto m = event(topic, i, o.message_bytes);
    m.id = protocol::uuid::make_v7();
    log.sent(*m.id, clock::now());
    p.async_send(std::move(m), [&](client::result<producer::send_result> r) {
      if (!r) ++failed;
    });
  });
  if (failed.load()) throw failure(std::to_string(failed.load()) + " direct sends failed");
  return result;
}

}  // namespace

int run_relay_bench(const relay_bench_options& o) {
  try {
    auto conn = must(pg::connect(o.pg), "connect to PostgreSQL");
    // Installed when missing, upgraded when older (the wake-up of version 4 changes the figures).
    if (auto v = producer::read_schema(conn.get()); !v || v.value().version < producer::pg_schema_version) {
      must(producer::install_schema(conn.get(), v ? v.value().shards : producer::default_outbox_shards), "install the txmq schema");
    }
    std::vector<double> relay_rate, direct_rate, relay_p50, relay_p99, direct_p50, direct_p99, relay_cpu, broker_cpu;
    const std::string prefix = "relay-bench-" + std::to_string(::getpid()) + "-";
    for (int run = 0; run < o.runs; ++run) {
      const auto n = std::to_string(run);
      const auto backlog = relay_backlog(o, conn.get(), prefix + "backlog-" + n, run);
      relay_rate.push_back(backlog.rows_per_s);
      relay_cpu.push_back(backlog.relay_cpu_us_per_row);
      broker_cpu.push_back(backlog.broker_cpu_us_per_row);
      direct_rate.push_back(direct_backlog(o, prefix + "direct-" + n));
      const auto rl = relay_latency(o, prefix + "latency-" + n, run);
      const auto dl = direct_latency(o, prefix + "direct-latency-" + n);
      relay_p50.push_back(rl.p50_ms);
      relay_p99.push_back(rl.p99_ms);
      direct_p50.push_back(dl.p50_ms);
      direct_p99.push_back(dl.p99_ms);
      std::fprintf(stderr, "run %d: relay %.0f rows/s, direct %.0f msg/s; latency relay p50 %.2f p99 %.2f ms, direct p50 %.2f p99 %.2f ms\n",
                   run + 1, relay_rate.back(), direct_rate.back(), rl.p50_ms, rl.p99_ms, dl.p50_ms, dl.p99_ms);
    }
    if (o.json) {
      boost::json::object line{{"workload", "relay"},           {"rows", o.rows},
                               {"message_bytes", o.message_bytes}, {"rate", o.rate},
                               {"runs", o.runs},                 {"relay_rows_per_s", median(relay_rate)},
                               {"direct_msgs_per_s", median(direct_rate)}, {"relay_p50_ms", median(relay_p50)},
                               {"relay_p99_ms", median(relay_p99)}, {"direct_p50_ms", median(direct_p50)},
                               {"direct_p99_ms", median(direct_p99)},
                               {"relay_cpu_us_per_row", median(relay_cpu)},
                               {"errors", 0}};
      if (o.broker_pid) line["broker_cpu_us_per_row"] = median(broker_cpu);
      std::cout << boost::json::serialize(line) << std::endl;
    } else {
      std::printf("%-8s %-8s %12s %10s %10s   (medians of %d runs; %zu rows of %zu bytes; latency at %.0f/s)\n", "workload",
                  "route", "rows/s", "p50 ms", "p99 ms", o.runs, o.rows, o.message_bytes, o.rate);
      std::printf("%-8s %-8s %12.0f %10s %10s\n", "backlog", "relay", median(relay_rate), "-", "-");
      std::printf("%-8s %-8s %12.0f %10s %10s\n", "backlog", "direct", median(direct_rate), "-", "-");
      std::printf("%-8s %-8s %12.0f %10.3f %10.3f\n", "latency", "relay", o.rate, median(relay_p50), median(relay_p99));
      std::printf("%-8s %-8s %12.0f %10.3f %10.3f\n", "latency", "direct", o.rate, median(direct_p50), median(direct_p99));
    }
    return 0;
  } catch (const failure& e) {
    std::cerr << "txmq-bench relay: " << e.what() << "\n";
    return 1;
  }
}

int relay_command(int argc, char** argv) {
  namespace po = boost::program_options;
  relay_bench_options o;
  std::string seconds = "10", warmup = "1";
  po::options_description desc(
      "txmq-bench relay --pg CONN [options]\n\n"
      "Outbox relay vs. straight to the broker, same run: backlog rows/s (N committed rows, then txmq-relay\n"
      "started, until the outbox is empty; beside it the same N events sent with the producer library) and\n"
      "commit-to-consume latency at a steady rate (beside it send-to-consume). Needs a running txmq broker\n"
      "and a database it may fill (TRUNCATEs txmq_outbox; installs the schema when missing).\n\nOptions");
  desc.add_options()("help,h", "this help")
    ("pg", po::value(&o.pg), "libpq connection string of the database (required)")
    ("broker", po::value(&o.broker)->default_value(o.broker), "txmq broker HOST:PORT")
    ("relay", po::value(&o.relay), "path of txmq-relay (default: beside txmq-bench); started and stopped by the bench")
    ("rows", po::value(&o.rows)->default_value(o.rows), "backlog rows")
    ("message-bytes", po::value(&o.message_bytes)->default_value(o.message_bytes), "payload size")
    ("rate", po::value(&o.rate)->default_value(o.rate), "latency: rows (and direct messages) per second")
    ("seconds", po::value(&seconds)->default_value(seconds), "latency: measured time per run")
    ("warmup", po::value(&warmup)->default_value(warmup), "latency: unmeasured time before it")
    ("batch", po::value(&o.batch)->default_value(o.batch), "the relay's --batch")
    ("runs", po::value(&o.runs)->default_value(o.runs), "runs (medians are reported)")
    ("broker-pid", po::value(&o.broker_pid)->default_value(0), "report this process's (and its children's) CPU time per backlog row")
    ("json", po::bool_switch(&o.json), "one JSON line instead of a table");
  add_token_options(desc);
  po::variables_map vm;
  if (!parse_options(argc, argv, desc, vm)) return 0;
  o.auth_token = token_option(vm);
  if (o.pg.empty()) {
    std::cerr << "txmq-bench relay: --pg is required\n" << desc << "\n";
    return 2;
  }
  o.seconds = std::chrono::duration<double>(parse_seconds(seconds)).count();
  o.warmup = std::chrono::duration<double>(parse_seconds(warmup)).count();
  return run_relay_bench(o);
}

}  // namespace txmq::bench
