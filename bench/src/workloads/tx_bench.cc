#include "workloads/tx_bench.h"

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <iomanip>
#include <iostream>
#include <optional>
#include <thread>

#include <boost/json.hpp>
#include <boost/program_options.hpp>

#include "support/options.h"
#include "support/token_options.h"
#include "support/latency.h"
#include "support/process_usage.h"
#include "txmq/pg/pg.h"
#include "txmq/producer/pg_checker.h"
#include "txmq/producer/pg_schema.h"
#include "txmq/producer/transaction.h"
#include "txmq/protocol/message_id.h"
#include "support/wire_client.h"
#include "txmq/client/admin.h"
#include "txmq/common/address.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/producer.h"

namespace txmq::bench {
namespace {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::pair<std::string, std::uint16_t> split_address(const std::string& text) {
  auto address = common::parse_host_port(text);
  if (!address) throw failure("--broker: " + address.error().message);
  return {address.value().host, address.value().port};
}

struct run_figures {
  double tx_per_s = 0;
  percentiles latency;
};

// ---- noop: the broker's side alone, pipelined over the wire ---------------------------------

class noop_driver {
 public:
  noop_driver(const tx_bench_options& o, int run) : o_(o), body_(o.message_bytes, 'x') {
    const auto [host, port] = split_address(o.broker);
    for (std::size_t i = 0; i < std::max<std::size_t>(o.connections, 1); ++i) {
      auto c = std::make_shared<wire_connection>(io_, host, port);
      c->connect_blocking("txmq-bench-tx", o.auth_token);
      conns_.push_back(std::move(c));
    }
    topic_ = "bench-tx-" + std::to_string(::getpid()) + "-" + std::to_string(run);
  }

  run_figures run() {
    for (std::size_t slot = 0; slot < o_.in_flight; ++slot) start(slot);
    const auto warm_end = clock::now() + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o_.warmup));
    const auto end = warm_end + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(o_.seconds));
    while (clock::now() < warm_end) io_.run_one_for(10ms);
    measuring_ = true;
    committed_ = 0;
    const auto started = window_start_ = clock::now();
    const auto started_wall = std::chrono::system_clock::now();
    while (clock::now() < end) io_.run_one_for(10ms);
    measuring_ = false;
    const double elapsed = std::chrono::duration<double>(clock::now() - started).count();
    stopping_ = true;
    while (open_ > 0) io_.run_one_for(100ms);  // let the transactions in flight end
    if (failures_ > 0) std::cerr << "txmq-bench tx: " << failures_ << " refused requests; first: " << first_error_ << "\n";
    if (!o_.latency_log.empty() && !write_step_log(o_.latency_log, started_wall, log_)) {
      throw failure("cannot write the latency log " + o_.latency_log);
    }
    return {static_cast<double>(committed_) / elapsed, latencies_.compute()};
  }

 private:
  void start(std::size_t slot) {
    if (stopping_) return;
    ++open_;
    const auto txid = o_.txid == "v4" ? protocol::uuid::make_v4() : protocol::uuid::make_v7();
    v1::Frame f;
    auto* p = f.mutable_prepare();
    p->set_txid(std::string(txid.raw()));
    p->set_producer_group("bench-tx");
    auto* m = p->add_messages();
    m->set_id(std::string(protocol::uuid::make_v7().raw()));
    m->set_topic(topic_);
    m->set_body(body_);
    auto& conn = *conns_[slot % conns_.size()];
    const auto t0 = clock::now();
    conn.request(std::move(f), [this, slot, txid, t0, &conn](const v1::Frame& r) {
      if (r.has_error()) return failed(slot, r);
      // The local transaction would run here; this workload measures the broker's side.
      v1::Frame end;
      end.mutable_end_tx()->set_txid(std::string(txid.raw()));
      end.mutable_end_tx()->set_outcome(v1::COMMIT);
      const auto prepared = clock::now();
      conn.request(std::move(end), [this, slot, t0, prepared](const v1::Frame& e) {
        if (e.has_error()) return failed(slot, e);
        if (measuring_) {
          ++committed_;
          const auto done = clock::now();
          latencies_.add(done - t0);
          if (!o_.latency_log.empty()) log_.push_back({(done - window_start_).count(), (prepared - t0).count(), (done - prepared).count()});
        }
        --open_;
        start(slot);
      });
    });
  }

  void failed(std::size_t slot, const v1::Frame& r) {
    if (failures_++ == 0) first_error_ = r.error().message();
    --open_;
    start(slot);
  }

  const tx_bench_options& o_;
  asio::io_context io_;
  std::vector<std::shared_ptr<wire_connection>> conns_;
  std::string topic_;
  std::string body_;
  bool measuring_ = false;
  bool stopping_ = false;
  std::size_t open_ = 0;
  std::uint64_t committed_ = 0;
  std::uint64_t failures_ = 0;
  std::string first_error_;
  latency_recorder latencies_;
  clock::time_point window_start_;
  std::vector<step_sample> log_;  // --latency-log: the Prepare's and the EndTx's latencies
};

// ---- pg: a real local transaction per tx, and pgbench doing the same inserts ----------------

constexpr const char* k_business_table =
    "CREATE TABLE IF NOT EXISTS bench_tx_business (id bigserial PRIMARY KEY, txid uuid NOT NULL, amount int NOT NULL)";

run_figures run_pg(const tx_bench_options& o, int run) {
  auto setup = pg::connect(o.pg);
  if (!setup) throw failure(setup.error().to_string());
  if (auto r = producer::install_schema(setup.value().get()); !r) throw failure(r.error().to_string());
  if (auto r = pg::exec(setup.value().get(), k_business_table); !r) throw failure(r.error().to_string());

  auto checker = std::make_shared<producer::pg_transaction_checker>(producer::pg_checker_options{.conninfo = o.pg});
  producer::transactional_producer p({.connection = {.address = o.broker, .client_id = "txmq-bench-tx-pg",
                                                     .producer_group = "bench-tx-pg", .auth_token = o.auth_token},
                                      .checker = producer::make_pg_checker(checker)});
  const std::string topic = "bench-tx-pg-" + std::to_string(::getpid()) + "-" + std::to_string(run);
  const std::string body(o.message_bytes, 'x');
  std::atomic<bool> measuring{false}, stop{false};
  std::atomic<std::uint64_t> committed{0};
  std::mutex merge_mutex;
  latency_recorder all;
  std::atomic<std::uint64_t> errors{0};
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < o.threads; ++t) {
    threads.emplace_back([&] {
      auto db = pg::connect(o.pg);
      if (!db) {
        ++errors;
        return;
      }
      latency_recorder mine;
      while (!stop) {
        const auto t0 = clock::now();
        auto sent = p.send_in_transaction({{.topic = topic, .key = std::nullopt, .body = body}}, [&](const producer::transaction& tx) {
          auto local = pg::in_transaction(db.value().get(), [&](PGconn* c) -> client::result<void> {
            if (auto r = pg::exec(c, "INSERT INTO bench_tx_business (txid, amount) VALUES ($1, 1)", {tx.id().to_string()}); !r) {
              return r.error();
            }
            return producer::record_commit(c, tx.id());
          });
          return local ? producer::tx_decision::commit : producer::tx_decision::rollback;
        });
        if (!sent || sent.value().decision != producer::tx_decision::commit) {
          ++errors;
          continue;
        }
        if (measuring) {
          ++committed;
          mine.add(clock::now() - t0);
        }
      }
      std::lock_guard lock(merge_mutex);
      all.merge(mine);
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));  // the warm-up period itself
  measuring = true;
  const auto started = clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));  // the measured period itself
  measuring = false;
  const double elapsed = std::chrono::duration<double>(clock::now() - started).count();
  const auto n = committed.load();
  stop = true;
  for (auto& t : threads) t.join();
  if (errors > 0) std::cerr << "txmq-bench tx: " << errors << " transactions failed\n";
  return {static_cast<double>(n) / elapsed, all.compute()};
}

// PostgreSQL's own rate for the same local transaction (business row + barrier row).
double run_pgbench(const tx_bench_options& o) {
  const auto script = std::filesystem::temp_directory_path() / ("txmq-bench-tx-" + std::to_string(::getpid()) + ".sql");
  {
    std::ofstream out(script);
    out << "BEGIN;\n"
           "INSERT INTO bench_tx_business (txid, amount) VALUES (gen_random_uuid(), 1);\n"
           "INSERT INTO txmq_tx_barrier (txid, outcome) VALUES (gen_random_uuid(), 'commit');\n"
           "COMMIT;\n";
  }
  const std::string command = o.pgbench + " -n -c " + std::to_string(o.threads) + " -j 2 -T " +
                              std::to_string(static_cast<int>(std::max(1.0, o.seconds))) + " -f " + script.string() + " '" +
                              o.pg + "' 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw failure("cannot run " + o.pgbench);
  std::string output;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe)) output += buf;
  const int status = ::pclose(pipe);
  std::filesystem::remove(script);
  const auto at = output.find("tps = ");
  if (status != 0 || at == std::string::npos) throw failure("pgbench failed:\n" + output);
  return std::stod(output.substr(at + 6));
}

// ---- rpw: read-process-write, consume a delivery batch and publish its result in one tx ------

struct rpw_figures {
  double tx_per_s = 0;
  double inputs_per_s = 0;
  percentiles latency;  // Prepare sent -> COMMIT answered
  long failed = 0;      // transactions whose Prepare or COMMIT failed (rolled back or refused)
};

// Fills an input topic, then `workers` threads each consume it through one group and, per
// fetched batch, run a transaction holding an output per input plus the batch's acks
// (docs/cluster.md "Read-process-write"): committed transactions and inputs per second over the
// measured seconds, after the warm-up.
rpw_figures run_rpw(const tx_bench_options& o, int run) {
  const std::string tag = std::to_string(::getpid()) + "-" + std::to_string(run);
  const std::string in = "bench-rpw-in-" + tag, out = "bench-rpw-out-" + tag, group = "bench-rpw-" + tag;
  client::connection_options co{.address = o.broker, .client_id = "txmq-bench-rpw", .auth_token = o.auth_token};
  {
    auto conn = client::connection::connect(co);
    if (!conn) throw failure("connect " + o.broker + ": " + conn.error().to_string());
    client::admin admin(conn.value());
    for (const auto& name : {in, out}) {
      client::topic_spec spec;
      spec.name = name;
      spec.partitions = static_cast<std::uint32_t>(o.partitions);
      spec.replicas = static_cast<std::uint32_t>(o.replicas);
      if (auto r = admin.create_topic(spec); !r) throw failure("create topic " + name + ": " + r.error().to_string());
    }
  }
  {
    producer::producer_options po;
    po.connection = co;
    producer::producer p(po);
    std::vector<std::future<client::result<producer::send_result>>> sent;
    sent.reserve(o.inputs);
    for (std::size_t i = 0; i < o.inputs; ++i) {
      producer::outgoing_message m;
      m.topic = in;
      m.key = "k" + std::to_string(i % 1000);
      m.body = std::string(o.message_bytes, 'x');
      sent.push_back(p.async_send(std::move(m)));
    }
    for (auto& f : sent) {
      if (auto r = f.get(); !r) throw failure("filling " + in + ": " + r.error().to_string());
    }
    p.close();
  }
  std::atomic<bool> measuring{false}, stop{false};
  std::atomic<long> committed{0}, inputs{0}, failed{0};
  std::vector<latency_recorder> latencies(o.workers);
  std::vector<std::thread> workers;
  for (std::size_t w = 0; w < o.workers; ++w) {
    workers.emplace_back([&, w] {
      consumer::consumer_options cop;
      cop.connection = co;
      cop.group = group;
      cop.topics = {in};
      consumer::consumer reader(cop);
      producer::transactional_producer_options tpo;
      tpo.connection = co;
      tpo.connection.producer_group = group + "-tx-" + std::to_string(w);
      tpo.checker = [](const producer::tx_check&) { return producer::tx_decision::commit; };
      producer::transactional_producer writer(std::move(tpo));
      while (!stop.load()) {
        auto got = reader.fetch(o.batch, std::chrono::milliseconds(200));
        if (!got || got.value().empty()) continue;
        const auto started = clock::now();
        auto tx = writer.begin();
        for (auto& d : got.value()) {
          producer::outgoing_message m;
          m.topic = out;
          m.key = d.message.key();
          m.body = d.message.body();
          tx.add(std::move(m));
          tx.add_ack(group, {d.message.topic(), d.message.partition(), d.message.offset(), d.message.attempt()});
        }
        const bool ok = tx.prepare() && tx.commit();
        if (!measuring.load()) continue;
        if (!ok) {
          failed.fetch_add(1);
          continue;
        }
        latencies[w].add(clock::now() - started);
        committed.fetch_add(1);
        inputs.fetch_add(static_cast<long>(got.value().size()));
      }
      writer.close();
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(o.warmup));  // the unmeasured warm-up
  measuring.store(true);
  const auto t0 = clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));  // the measured window
  const long c = committed.load(), n = inputs.load(), f = failed.load();
  const double secs = std::chrono::duration<double>(clock::now() - t0).count();
  measuring.store(false);
  stop.store(true);
  for (auto& t : workers) t.join();
  latency_recorder all;
  for (auto& l : latencies) all.merge(l);
  if (c == 0) throw failure("no read-process-write transaction committed in " + std::to_string(secs) + " s");
  if (n >= static_cast<long>(o.inputs)) {
    std::cerr << "txmq-bench tx: the workers consumed every input before the window ended: raise --inputs\n";
  }
  return {c / secs, n / secs, all.compute(), f};
}

// ---- recovery: a returning producer settles its group's orphans ------------------------------

struct recovery_figures {
  double seconds = 0;
  std::size_t orphans = 0;
};

// Calls fn with every PREPARED transaction of the broker, page by page.
template <class Fn>
void for_each_prepared(client::connection& conn, Fn&& fn) {
  std::string after;
  do {
    v1::Frame f;
    f.mutable_tx_list()->set_state(v1::PREPARED);
    f.mutable_tx_list()->set_limit(10'000);
    f.mutable_tx_list()->set_after_txid(after);
    auto r = conn.request(f);
    if (!r) throw failure("TxList: " + r.error().to_string());
    for (auto& t : r.value().tx_list_response().txs()) fn(t);
    after = r.value().tx_list_response().next_after_txid();
  } while (!after.empty());
}

std::size_t count_prepared(client::connection& conn) {
  std::size_t n = 0;
  for_each_prepared(conn, [&](const v1::TxInfo&) { ++n; });
  return n;
}

bool all_checked_once(client::connection& conn) {
  bool all = true;
  for_each_prepared(conn, [&](const v1::TxInfo& t) { all = all && t.check_count() > 0; });
  return all;
}

recovery_figures run_recovery(const tx_bench_options& o, int run) {
  const std::string group = "bench-recovery-" + std::to_string(::getpid()) + "-" + std::to_string(run);
  auto admin = client::connection::connect(
      {.address = o.broker, .client_id = "txmq-bench-recovery", .auth_token = o.auth_token});
  if (!admin) throw failure(admin.error().to_string());
  const std::size_t before = count_prepared(*admin.value());
  {
    // The producer that dies: prepares everything (first check due at once), ends nothing.
    asio::io_context io;
    const auto [host, port] = split_address(o.broker);
    auto conn = std::make_shared<wire_connection>(io, host, port);
    conn->connect_blocking("txmq-bench-doomed", o.auth_token);
    const std::string body(o.message_bytes, 'x');
    std::size_t answered = 0, refused = 0;
    for (std::size_t i = 0; i < o.orphans; ++i) {
      v1::Frame f;
      auto* p = f.mutable_prepare();
      p->set_txid(std::string(protocol::uuid::make_v4().raw()));
      p->set_producer_group(group);
      p->set_tx_timeout_ms(1);
      auto* m = p->add_messages();
      m->set_id(std::string(protocol::uuid::make_v7().raw()));
      m->set_topic("bench-recovery");
      m->set_body(body);
      conn->request(std::move(f), [&](const v1::Frame& r) {
        ++answered;
        refused += r.has_error() ? 1 : 0;
      });
      while (conn->pending() >= 1000) io.run_one();
    }
    while (answered < o.orphans) io.run_one();
    if (refused > 0) throw failure(std::to_string(refused) + " Prepares refused");
  }
  // Wait until the broker has found no producer for each (their next checks are seconds to
  // minutes away on the default schedule).
  const auto give_up = clock::now() + 120s;
  while (!all_checked_once(*admin.value())) {
    if (clock::now() > give_up) throw failure("the broker did not check the orphans within 120 s");
    std::this_thread::sleep_for(500ms);  // polling the broker's state (a TxList reads every kept transaction)
  }
  // Timed by the checker's answers, not by polling TxList: a TxList filtered by state reads
  // every transaction the broker keeps (resolved ones too, for dedupe_window), which on a
  // broker that has run the other workloads would slow the very thing measured.
  const auto started = clock::now();
  producer::transactional_producer returning(
      {.connection = {.address = o.broker, .client_id = "txmq-bench-returning", .producer_group = group,
                      .auth_token = o.auth_token},
       .checker = [](const producer::tx_check&) { return producer::tx_decision::commit; }});
  while (returning.checks_answered().commit < o.orphans) {
    if (clock::now() - started > 300s) throw failure("orphans still not checked after 300 s");
    std::this_thread::sleep_for(5ms);  // polling a counter
  }
  const double seconds = std::chrono::duration<double>(clock::now() - started).count();
  // Answered is not yet resolved: the last resolutions are a group commit away.
  const auto settled_by = clock::now() + 30s;
  while (count_prepared(*admin.value()) > before) {
    if (clock::now() > settled_by) throw failure("orphans answered COMMIT but still prepared after 30 s");
    std::this_thread::sleep_for(100ms);  // polling the broker's state
  }
  return {seconds, o.orphans};
}

void print_throughput(const tx_bench_options& o, const std::vector<run_figures>& runs, std::optional<double> pgbench_tps) {
  std::vector<double> rates, p50, p99, p999;
  for (auto& r : runs) {
    rates.push_back(r.tx_per_s);
    p50.push_back(r.latency.p50_ms);
    p99.push_back(r.latency.p99_ms);
    p999.push_back(r.latency.p999_ms);
  }
  const auto usage = o.broker_pid > 0 ? process_tree_usage(o.broker_pid) : process_usage{};
  if (o.json) {
    boost::json::object j{{"workload", "tx"},         {"system", "txmq"},          {"mode", o.mode},
                          {"message_bytes", o.message_bytes}, {"runs", runs.size()}, {"tx_per_s", median(rates)},
                          {"p50_ms", median(p50)},    {"p99_ms", median(p99)},     {"p999_ms", median(p999)}};
    j["in_flight"] = o.mode == "noop" ? o.in_flight : o.threads;
    if (o.mode == "noop") j["txid"] = o.txid;
    if (pgbench_tps) j["pgbench_tps"] = *pgbench_tps;
    if (o.broker_pid > 0) {
      j["broker_rss_mib"] = usage.rss_mib;
      j["broker_cpu_s"] = usage.cpu_s;
    }
    std::cout << boost::json::serialize(j) << "\n";
    return;
  }
  std::cout << std::fixed << std::setprecision(2) << "tx " << o.mode << ": "
            << (o.mode == "noop" ? o.in_flight : o.threads) << " in flight, " << o.message_bytes << "-byte message, median of "
            << runs.size() << " runs\n"
            << "  tx/s " << std::setprecision(0) << median(rates) << std::setprecision(2) << "   p50 " << median(p50)
            << " ms   p99 " << median(p99) << " ms   p99.9 " << median(p999) << " ms\n";
  if (pgbench_tps) {
    std::cout << "  pgbench, same two INSERTs per transaction, " << o.threads << " clients: " << std::setprecision(0)
              << *pgbench_tps << " tps (txmq + PostgreSQL reach " << std::setprecision(0)
              << 100.0 * median(rates) / *pgbench_tps << " % of it)\n";
  }
}

}  // namespace

int run_tx_bench(const tx_bench_options& o) {
  try {
    if (o.mode == "rpw") {
      std::vector<double> tx, in, p50, p99;
      long failed = 0;
      for (int r = 0; r < o.runs; ++r) {
        auto f = run_rpw(o, r);
        tx.push_back(f.tx_per_s);
        in.push_back(f.inputs_per_s);
        p50.push_back(f.latency.p50_ms);
        p99.push_back(f.latency.p99_ms);
        failed += f.failed;
      }
      if (o.json) {
        std::cout << boost::json::serialize(boost::json::object{
                         {"workload", "tx"}, {"system", "txmq"}, {"mode", "rpw"}, {"workers", o.workers},
                         {"batch", o.batch}, {"partitions", o.partitions}, {"replicas", o.replicas},
                         {"message_bytes", o.message_bytes}, {"runs", tx.size()}, {"tx_per_s", median(tx)},
                         {"inputs_per_s", median(in)}, {"p50_ms", median(p50)}, {"p99_ms", median(p99)},
                         {"failed", failed}})
                  << "\n";
      } else {
        std::cout << std::fixed << std::setprecision(2) << "tx rpw: " << o.workers << " workers, <= " << o.batch
                  << " inputs per tx, " << o.message_bytes << "-byte messages, median of " << tx.size() << " runs\n"
                  << "  tx/s " << std::setprecision(0) << median(tx) << "   inputs/s " << median(in)
                  << std::setprecision(2) << "   Prepare->COMMIT p50 " << median(p50) << " ms   p99 " << median(p99)
                  << " ms   failed " << failed << "\n";
      }
      return 0;
    }
    if (o.mode == "recovery") {
      std::vector<double> secs;
      for (int r = 0; r < o.runs; ++r) secs.push_back(run_recovery(o, r).seconds);
      if (o.json) {
        std::cout << boost::json::serialize(boost::json::object{
                         {"workload", "tx"}, {"system", "txmq"}, {"mode", "recovery"}, {"orphans", o.orphans},
                         {"runs", secs.size()}, {"seconds", median(secs)}})
                  << "\n";
      } else {
        std::cout << std::fixed << std::setprecision(2) << "tx recovery: " << o.orphans
                  << " orphaned transactions settled by a returning producer in " << median(secs) << " s (median of "
                  << secs.size() << " runs; " << std::setprecision(0) << o.orphans / median(secs) << " tx/s)\n";
      }
      return 0;
    }
    std::vector<run_figures> runs;
    std::vector<double> pgbench;
    for (int r = 0; r < o.runs; ++r) {
      if (o.mode == "noop") {
        noop_driver d(o, r);
        runs.push_back(d.run());
      } else if (o.mode == "pg") {
        runs.push_back(run_pg(o, r));
        pgbench.push_back(run_pgbench(o));  // alternating with txmq, same database
      } else {
        std::cerr << "txmq-bench tx: --mode wants noop, pg or recovery\n";
        return 2;
      }
    }
    print_throughput(o, runs, pgbench.empty() ? std::nullopt : std::optional<double>(median(pgbench)));
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "txmq-bench tx: " << e.what() << "\n";
    return 1;
  }
}

int tx_command(int argc, char** argv) {
  namespace po = boost::program_options;
  tx_bench_options o;
  std::string seconds = "5", warmup = "1";
  po::options_description desc(
      "txmq-bench tx [options]\n\n"
      "Transactional messages against a running broker. --mode noop: Prepare + EndTx COMMIT, --in-flight at a\n"
      "time; pg: with a PostgreSQL local transaction and the barrier row per tx, beside pgbench doing the same\n"
      "inserts (--pg required); recovery: --orphans prepared transactions of a dead producer, time until a\n"
      "returning producer of the group has had them all settled; rpw: read-process-write, --workers each consume\n"
      "a filled input topic and commit per fetched batch (<= --batch) a transaction of the outputs and the acks.\n\n"
      "Options");
  desc.add_options()("help,h", "this help")
    ("mode", po::value(&o.mode)->default_value(o.mode), "noop | pg | recovery | rpw")
    ("broker", po::value(&o.broker)->default_value(o.broker), "txmq broker HOST:PORT")
    ("pg", po::value(&o.pg), "pg: libpq connection string")
    ("pgbench", po::value(&o.pgbench)->default_value(o.pgbench), "pg: path of pgbench")
    ("message-bytes", po::value(&o.message_bytes)->default_value(o.message_bytes), "message body size")
    ("in-flight", po::value(&o.in_flight)->default_value(o.in_flight), "noop: transactions in flight")
    ("connections", po::value(&o.connections)->default_value(o.connections), "noop: connections")
    ("threads", po::value(&o.threads)->default_value(o.threads), "pg: transactions in flight (threads, and pgbench clients)")
    ("orphans", po::value(&o.orphans)->default_value(o.orphans), "recovery: orphaned transactions")
    ("workers", po::value(&o.workers)->default_value(o.workers), "rpw: consuming and committing threads")
    ("batch", po::value(&o.batch)->default_value(o.batch), "rpw: inputs fetched per transaction, at most")
    ("inputs", po::value(&o.inputs)->default_value(o.inputs), "rpw: messages filled into the input topic per run")
    ("partitions", po::value(&o.partitions)->default_value(o.partitions), "rpw: partitions of the input and output topics")
    ("replicas", po::value(&o.replicas)->default_value(o.replicas), "rpw: replicas of those topics (cluster; 0 = default)")
    ("txid", po::value(&o.txid)->default_value(o.txid),
     "noop: v7 (time-ordered txids, as the txmq libraries make) | v4 (random txids)")
    ("seconds", po::value(&seconds)->default_value(seconds), "measured time per run")
    ("warmup", po::value(&warmup)->default_value(warmup), "unmeasured time before each run")
    ("runs", po::value(&o.runs)->default_value(o.runs), "runs (medians are reported)")
    ("broker-pid", po::value(&o.broker_pid)->default_value(0), "report this process's memory and CPU time")
    ("json", po::bool_switch(&o.json), "one JSON line instead of a table")
    ("latency-log", po::value(&o.latency_log),
     "noop: write \"end_ns prepare_ns endtx_ns\" per committed transaction of the last run to this file");
  add_token_options(desc);
  po::variables_map vm;
  if (!parse_options(argc, argv, desc, vm)) return 0;
  o.auth_token = token_option(vm);
  if (o.mode == "pg" && o.pg.empty()) {
    std::cerr << "txmq-bench tx: --mode pg needs --pg CONN\n";
    return 2;
  }
  if (o.txid != "v7" && o.txid != "v4") {
    std::cerr << "txmq-bench tx: --txid wants v7 or v4\n";
    return 2;
  }
  o.seconds = std::chrono::duration<double>(parse_seconds(seconds)).count();
  o.warmup = std::chrono::duration<double>(parse_seconds(warmup)).count();
  return run_tx_bench(o);
}

}  // namespace txmq::bench
