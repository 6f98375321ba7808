#include "report.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include <boost/json.hpp>

#include "support/latency.h"

namespace txmq::bench {
namespace {

namespace json = boost::json;

// The order systems appear in, txmq first; others (relay, tx) follow in input order.
// txmq-async: the broker with --durability async, acknowledging before fsync as NATS 2.9 does:
// the like-for-like row for NATS's latency.
const std::vector<std::string> k_system_order{"txmq", "txmq-single", "txmq-async", "rabbitmq-quorum",
                                              "rabbitmq-classic", "nats", "pgqueue"};

struct samples {
  std::vector<double> tput, p50, p90, p99, p999, rss, cpu_us, load;
  std::uint64_t errors = 0;
  std::size_t failed_runs = 0;  // runs with errors: left out of every median
};

double number(const json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  if (!v) return 0;
  if (v->is_double()) return v->as_double();
  if (v->is_int64()) return static_cast<double>(v->as_int64());
  if (v->is_uint64()) return static_cast<double>(v->as_uint64());
  return 0;
}

std::string text(const json::object& o, const char* key, const std::string& fallback = "") {
  const auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : fallback;
}

std::string fmt(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  if (decimals == 0) {
    // Thousands separators for rates, as in the rest of BENCHMARKS.md.
    for (int i = static_cast<int>(s.size()) - 3; i > 0 && s[static_cast<std::size_t>(i - 1)] != '-'; i -= 3) {
      s.insert(static_cast<std::size_t>(i), ",");
    }
  }
  return s;
}

std::string ms(double v) { return v > 0 ? fmt(v, v < 10 ? 2 : 1) : "—"; }

class report {
 public:
  void add(const json::object& o) {
    // `txmq-bench relay` prints the relay and, beside it, the producer library sending straight
    // to the broker, in one line with its own field names: split it into two systems.
    if (o.contains("relay_rows_per_s")) {
      add({{"workload", "relay"}, {"system", "txmq-relay"}, {"messages_per_s", number(o, "relay_rows_per_s")},
           {"p50_ms", number(o, "relay_p50_ms")}, {"p99_ms", number(o, "relay_p99_ms")}, {"errors", number(o, "errors")}});
      add({{"workload", "relay"}, {"system", "txmq (producer lib, direct)"}, {"messages_per_s", number(o, "direct_msgs_per_s")},
           {"p50_ms", number(o, "direct_p50_ms")}, {"p99_ms", number(o, "direct_p99_ms")}});
      return;
    }
    const std::string workload = text(o, "workload");
    const std::string system = text(o, "system", workload);  // relay and tx lines name no peer
    if (workload.empty()) return;
    auto& s = data_[workload][system];
    if (std::find(systems_.begin(), systems_.end(), system) == systems_.end()) systems_.push_back(system);
    if (std::find(workloads_.begin(), workloads_.end(), workload) == workloads_.end()) workloads_.push_back(workload);
    // A run with errors (refused produces, a disk below its free-space floor) is left out of the
    // medians: its rate counts answers, refusals included, so it would read as the fastest run.
    const auto errors = static_cast<std::uint64_t>(number(o, "errors"));
    s.errors += errors;
    ++lines_;
    if (errors > 0) {
      ++s.failed_runs;
      return;
    }
    // `txmq-bench tx` counts transactions (each carrying one message).
    s.tput.push_back(o.contains("messages_per_s") ? number(o, "messages_per_s") : number(o, "tx_per_s"));
    s.p50.push_back(number(o, "p50_ms"));
    s.p90.push_back(number(o, "p90_ms"));
    s.p99.push_back(number(o, "p99_ms"));
    s.p999.push_back(number(o, "p999_ms"));
    s.rss.push_back(number(o, "broker_rss_mib"));
    s.cpu_us.push_back(number(o, "broker_cpu_us_per_msg"));
    s.load.push_back(number(o, "load1"));
  }

  [[nodiscard]] std::size_t lines() const { return lines_; }

  void write_markdown(std::ostream& out) const {
    static const std::map<std::string, std::string> titles{
        {"publish", "Durable publish, 1,000 messages in flight"},
        {"rate", "Publish latency at a steady 10,000 msg/s (one message per request)"},
        {"e2e", "Publish → consume with acks at 10,000 msg/s (latency to delivery)"},
        {"consume", "Consume with acks from a backlog"},
        {"relay", "Outbox relay: a committed backlog drained by txmq-relay (rows/s), latency commit → consume at a steady rate"},
        {"tx", "Transactions: prepare + commit of one message each, N in flight (transactions/s)"}};
    for (const auto& w : workloads_) {
      const auto t = titles.find(w);
      out << "\n**" << (t == titles.end() ? w : t->second) << "** (`" << w << "`)\n\n";
      out << "| system | msg/s (median) | each round | p50 ms | p90 ms | p99 ms | p99.9 ms | broker MiB | broker CPU µs/msg | errors |\n";
      out << "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|\n";
      for (const auto& sys : ordered_systems()) {
        const auto* s = find(w, sys);
        if (!s) continue;
        std::string each;
        for (double v : s->tput) each += (each.empty() ? "" : ", ") + fmt(v / 1000, 1) + "k";
        if (s->failed_runs > 0) {
          each += (each.empty() ? "" : ", ") + std::to_string(s->failed_runs) + " run(s) with errors left out";
        }
        out << "| " << sys << " | " << fmt(median(s->tput), 0) << " | " << each << " | " << ms(median(s->p50)) << " | "
            << ms(median(s->p90)) << " | " << ms(median(s->p99)) << " | " << ms(median(s->p999)) << " | "
            << (median(s->rss) > 0 ? fmt(median(s->rss), 0) : "—") << " | "
            << (median(s->cpu_us) > 0 ? fmt(median(s->cpu_us), 1) : "—") << " | " << s->errors << " |\n";
      }
    }
    out << "\n**Against the goals of issue #7** (ratios of the medians above):\n\n";
    out << "| goal | measured | verdict |\n|---|---|---|\n";
    ratio_row(out, "publish, 1,000 in flight: txmq ≥ 10× RabbitMQ quorum queue", "publish", "rabbitmq-quorum", 10, false);
    ratio_row(out, "publish, 1,000 in flight: txmq ≥ 2× NATS JetStream (no fsync)", "publish", "nats", 2, false);
    ratio_row(out, "p99 at 10,000 msg/s: txmq ≤ ½ of RabbitMQ quorum's", "rate", "rabbitmq-quorum", 2, true);
    ratio_row(out, "p99 at 10,000 msg/s: txmq ≤ ½ of RabbitMQ classic's", "rate", "rabbitmq-classic", 2, true);
    ratio_row(out, "consume with acks: txmq ≥ 2× RabbitMQ quorum queue", "consume", "rabbitmq-quorum", 2, false);
    ratio_row(out, "consume with acks: txmq ≥ 2× RabbitMQ classic queue", "consume", "rabbitmq-classic", 2, false);
    // Issue #15's latency goal against NATS, which acknowledges before its fsync: txmq durable,
    // and txmq acknowledging before fsync too (the same promise as NATS's).
    nats_latency_row(out, "p99 at 10,000 msg/s: txmq ≤ 1.5× NATS JetStream's", "rate", "txmq");
    nats_latency_row(out, "p99 at 10,000 msg/s, both acknowledging before fsync: txmq async ≤ 1.5× NATS's", "rate",
                     "txmq-async");
    nats_latency_row(out, "publish → delivery p99 at 10,000 msg/s: txmq ≤ 1.5× NATS JetStream's", "e2e", "txmq");
    nats_latency_row(out, "publish → delivery p99, both acknowledging before fsync: txmq async ≤ 1.5× NATS's", "e2e",
                     "txmq-async");
    const auto* relay = find("relay", "txmq-relay");
    const auto* pg = find("consume", "pgqueue");
    if (relay && pg) {
      const double r = median(relay->tput) / median(pg->tput);
      out << "| outbox relay ≥ 5× the PostgreSQL queue (its consume: SELECT … SKIP LOCKED + DELETE) | "
          << fmt(median(relay->tput), 0) << " vs " << fmt(median(pg->tput), 0) << " msg/s = " << fmt(r, 2) << "× | "
          << (r >= 5 ? "met" : "not met") << " |\n";
    } else {
      out << "| outbox relay ≥ 5× the PostgreSQL queue | not measured: no `txmq-bench relay` figures in this run | — |\n";
    }
    double lo = 1e9, hi = 0;
    for (const auto& [w, by] : data_) {
      for (const auto& [sys, s] : by) {
        for (double l : s.load) {
          if (l <= 0) continue;  // lines of relay and tx carry no load figure
          lo = std::min(lo, l);
          hi = std::max(hi, l);
        }
      }
    }
    if (hi > 0) out << "\nLoad average (1 min) seen at the end of the runs: " << fmt(lo, 2) << " to " << fmt(hi, 2) << ".\n";
  }

  void write_plot_data(std::ostream& out) const {
    out << "# system publish_msg_s consume_msg_s rate_p50_ms rate_p99_ms e2e_p99_ms\n";
    for (const auto& sys : k_system_order) {
      auto med = [&](const char* w, auto field) {
        const auto* s = find(w, sys);
        return s ? median(s->*field) : 0.0;
      };
      if (!find("publish", sys) && !find("consume", sys) && !find("rate", sys)) continue;
      out << sys << " " << med("publish", &samples::tput) << " " << med("consume", &samples::tput) << " "
          << med("rate", &samples::p50) << " " << med("rate", &samples::p99) << " " << med("e2e", &samples::p99) << "\n";
    }
  }

 private:
  [[nodiscard]] const samples* find(const std::string& w, const std::string& sys) const {
    const auto a = data_.find(w);
    if (a == data_.end()) return nullptr;
    const auto b = a->second.find(sys);
    return b == a->second.end() ? nullptr : &b->second;
  }

  [[nodiscard]] std::vector<std::string> ordered_systems() const {
    std::vector<std::string> out;
    for (const auto& s : k_system_order) {
      if (std::find(systems_.begin(), systems_.end(), s) != systems_.end()) out.push_back(s);
    }
    for (const auto& s : systems_) {
      if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    }
    return out;
  }

  // lower_is_better: latency goals (txmq's p99 × factor ≤ the peer's).
  void ratio_row(std::ostream& out, const std::string& goal, const std::string& w, const std::string& peer, double factor,
                 bool lower_is_better) const {
    const auto* t = find(w, "txmq");
    const auto* p = find(w, peer);
    if (!t || !p) {
      out << "| " << goal << " | not measured in this run | — |\n";
      return;
    }
    if (lower_is_better) {
      const double a = median(t->p99), b = median(p->p99);
      const double r = a > 0 ? b / a : 0;
      out << "| " << goal << " | " << ms(a) << " vs " << ms(b) << " ms: RabbitMQ's is " << fmt(r, 2) << "× txmq's | "
          << (r >= factor ? "met" : "not met") << " |\n";
    } else {
      const double a = median(t->tput), b = median(p->tput);
      const double r = b > 0 ? a / b : 0;
      out << "| " << goal << " | " << fmt(a, 0) << " vs " << fmt(b, 0) << " msg/s = " << fmt(r, 2) << "× | "
          << (r >= factor ? "met" : "not met") << " |\n";
    }
  }

  // txmq's (or txmq-async's) p99 at most 1.5× NATS's: lower is better.
  void nats_latency_row(std::ostream& out, const std::string& goal, const std::string& w, const std::string& sys) const {
    const auto* t = find(w, sys);
    const auto* n = find(w, "nats");
    if (!t || !n || median(n->p99) <= 0) {
      out << "| " << goal << " | not measured in this run | — |\n";
      return;
    }
    const double r = median(t->p99) / median(n->p99);
    out << "| " << goal << " | " << ms(median(t->p99)) << " vs " << ms(median(n->p99)) << " ms = " << fmt(r, 2)
        << "× | " << (r <= 1.5 ? "met" : "not met") << " |\n";
  }

  std::map<std::string, std::map<std::string, samples>> data_;
  std::vector<std::string> systems_, workloads_;
  std::size_t lines_ = 0;
};

}  // namespace

int run_report(const report_options& o) {
  report r;
  for (const auto& path : o.inputs) {
    std::ifstream in(path);
    if (!in) {
      std::cerr << "txmq-bench report: cannot read " << path << "\n";
      continue;
    }
    std::string line;
    while (std::getline(in, line)) {
      boost::system::error_code ec;
      auto v = json::parse(line, ec);
      if (!ec && v.is_object()) r.add(v.as_object());
    }
  }
  if (r.lines() == 0) {
    std::cerr << "txmq-bench report: no JSON lines in the inputs\n";
    return 2;
  }
  if (o.markdown.empty() || o.markdown == "-") {
    r.write_markdown(std::cout);
  } else {
    std::ofstream out(o.markdown);
    r.write_markdown(out);
  }
  if (!o.plot_data.empty()) {
    std::ofstream out(o.plot_data);
    r.write_plot_data(out);
  }
  return 0;
}

}  // namespace txmq::bench
