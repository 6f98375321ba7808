#include "tx_commands.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <limits>
#include <memory>
#include <mutex>
#include <vector>


#include <boost/json.hpp>

#include "output.h"
#include "txmq/cli/format.h"
#include "txmq/client/cluster_admin.h"
#include "txmq/client/leader_router.h"
#include "txmq/producer/pg_checker.h"
#include "txmq/common/base64.h"
#include "txmq/common/signals.h"

namespace txmq::cli::detail {

namespace json = boost::json;
using std::chrono::milliseconds;

namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string state_text(v1::TxState st) {
  switch (st) {
    case v1::PREPARED: return "PREPARED";
    case v1::COMMITTED: return "COMMITTED";
    case v1::ROLLED_BACK: return "ROLLED_BACK";
    case v1::ABANDONED: return "ABANDONED";
    default: return "UNSPECIFIED";
  }
}

std::string resolver_text(v1::TxResolver r) {
  switch (r) {
    case v1::RESOLVED_BY_PRODUCER: return "producer";
    case v1::RESOLVED_BY_CHECK: return "check";
    case v1::RESOLVED_BY_OPERATOR: return "operator";
    default: return "-";
  }
}

std::string keys_cell(const v1::TxInfo& t) {
  if (t.keys().empty()) return "-";
  std::string out;
  for (const auto& k : t.keys()) {
    if (!out.empty()) out += ",";
    out += k.empty() ? "\"\"" : bytes_cell(k);
  }
  return out;
}

table tx_table() {
  return table({"TXID", "GROUP", "STATE", "TOPIC", "KEY", "MESSAGES", "AGE", "CHECKS", "NEXT_CHECK"});
}

std::vector<std::string> tx_row(const v1::TxInfo& t, std::int64_t now) {
  const auto age = std::max<std::int64_t>(0, now - t.prepared_ms());
  return {id_text(t.txid()),
          t.producer_group(),
          state_text(t.state()),
          t.topics().empty() ? "-" : join(t.topics()),
          keys_cell(t),
          std::to_string(t.messages()),
          age == 0 ? "0s" : duration_text(age),
          std::to_string(t.check_count()),
          t.next_check_ms() == 0 ? "-" : iso_time(t.next_check_ms())};
}

json::object tx_json(const v1::TxInfo& t, std::int64_t now, bool with_messages) {
  json::array topics;
  for (const auto& topic : t.topics()) topics.push_back(json::string(topic));
  json::array keys;
  for (const auto& k : t.keys()) {
    if (is_valid_utf8(k)) {
      keys.push_back(json::string(k));
    } else {
      keys.push_back(json::object{{"key_base64", common::base64_encode(k)}});
    }
  }
  json::object o{{"txid", id_text(t.txid())},
                 {"producer_group", t.producer_group()},
                 {"state", state_text(t.state())},
                 {"topics", std::move(topics)},
                 {"keys", std::move(keys)},
                 {"messages", t.messages()},
                 {"prepared", iso_time(t.prepared_ms())},
                 {"prepared_ms", t.prepared_ms()},
                 {"age_ms", std::max<std::int64_t>(0, now - t.prepared_ms())},
                 {"check_count", t.check_count()},
                 {"check_open", t.check_open()},
                 {"next_check_ms", t.next_check_ms()},
                 {"resolved_ms", t.resolved_ms()},
                 {"resolved_by", resolver_text(t.resolved_by())},
                 {"acks", t.acks()}};
  o["next_check"] = t.next_check_ms() == 0 ? json::value(nullptr) : json::value(iso_time(t.next_check_ms()));
  o["resolved"] = t.resolved_ms() == 0 ? json::value(nullptr) : json::value(iso_time(t.resolved_ms()));
  if (with_messages) {
    json::array msgs;
    for (const auto& m : t.message_list()) {
      json::object mo{{"id", id_text(m.id())}, {"topic", m.topic()}};
      put_key(mo, m);
      mo["headers"] = headers_json(m);
      if (t.state() == v1::COMMITTED) {
        mo["partition"] = m.partition();
        mo["offset"] = m.offset();
      }
      put_bytes(mo, "body", m.body());
      msgs.push_back(std::move(mo));
    }
    o["message_list"] = std::move(msgs);
  }
  return o;
}

// Sends f and returns the answer of the expected body case, or an error.
client::result<v1::Frame> tx_request(client::connection& conn, v1::Frame f, v1::Frame::BodyCase expected,
                                     milliseconds timeout) {
  auto r = conn.request(std::move(f), timeout);
  if (!r) return r;
  if (r.value().body_case() != expected) {
    return client::error{client::errc::unexpected_response, "unexpected answer from the broker"};
  }
  return r;
}

// In a cluster a transaction is served by the leader of its home partition, the partition of
// its first message (docs/cluster.md "Transactions"): its record is read from the first node
// that holds one (the bootstrap node first), and TxShow and TxResolve go to the home
// partition's leader named by Metadata. On a single broker, or when no node holds the record or
// the home has no leader now, the bootstrap connection (whose answer then says why).
struct tx_route {
  std::shared_ptr<client::leader_router> router;  // owns the leader connections
  std::shared_ptr<client::connection> conn;
};

tx_route home_leader(session& s, const std::shared_ptr<client::connection>& bootstrap, const protocol::txid& txid) {
  tx_route out{std::make_shared<client::leader_router>(bootstrap), bootstrap};
  auto m = out.router->refresh(s.timeout());
  if (!m || !m.value().cluster()) return out;
  std::vector<std::string> addresses{""};
  for (const auto& n : m.value().nodes()) addresses.push_back(n.address());
  for (const auto& address : addresses) {
    v1::Frame f;
    f.mutable_tx_show()->set_txid(std::string(txid.raw()));
    auto r = tx_request(*out.router->connection_for(address), std::move(f), v1::Frame::kTxInfo, s.timeout());
    if (!r || r.value().tx_info().message_list().empty()) continue;
    const auto& first = r.value().tx_info().message_list(0);
    for (const auto& t : m.value().topics()) {
      if (t.name() != first.topic()) continue;
      for (const auto& p : t.partition_info()) {
        if (p.partition() == first.partition() && !p.leader_address().empty()) {
          out.conn = out.router->connection_for(p.leader_address());
        }
      }
    }
    return out;
  }
  return out;
}

}  // namespace

int tx_list(session& s, const tx_list_args& a) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  v1::TxListRequest req;
  if (a.state == "prepared") req.set_state(v1::PREPARED);
  if (a.state == "abandoned") req.set_state(v1::ABANDONED);
  if (a.state == "all") req.set_all_states(true);
  req.set_topic(a.topic);
  // In a cluster each home partition's leader lists its transactions (client/cluster_admin.h);
  // against a single broker, its pages. Every transaction the broker keeps, as before.
  auto listing = client::tx_list_all(conn, req, std::numeric_limits<std::size_t>::max(),
                                     std::max<std::chrono::milliseconds>(s.timeout(), std::chrono::seconds(30)));
  if (!listing) return s.fail("list transactions", listing.error());
  for (const auto& [topic, partition] : listing.value().unavailable) {
    s.env().err << "txmq: warning: partition " << partition << " of topic " << quoted(topic)
                << " has no leader now; the transactions homed there are left out\n";
  }
  const auto& txs = listing.value().txs;
  const auto now = now_ms();
  if (s.json()) {
    for (const auto& t : txs) print_json(s.env().out, tx_json(t, now, false));
  } else {
    auto t = tx_table();
    for (const auto& tx : txs) t.add(tx_row(tx, now));
    t.print(s.env().out);
  }
  return exit_ok;
}

int tx_show(session& s, const protocol::txid& txid) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  const auto route = home_leader(s, conn, txid);
  v1::Frame f;
  f.mutable_tx_show()->set_txid(std::string(txid.raw()));
  auto r = tx_request(*route.conn, std::move(f), v1::Frame::kTxInfo, s.timeout());
  if (!r) return s.fail("show transaction " + txid.to_string(), r.error());
  const auto& info = r.value().tx_info();
  const auto now = now_ms();
  if (s.json()) {
    print_json(s.env().out, tx_json(info, now, true));
    return exit_ok;
  }
  auto summary = tx_table();
  summary.add(tx_row(info, now));
  summary.print(s.env().out);
  auto& out = s.env().out;
  out << "\nprepared: " << iso_time(info.prepared_ms()) << "  resolved: " << iso_time(info.resolved_ms())
      << " (by " << resolver_text(info.resolved_by()) << ")  check open: " << (info.check_open() ? "yes" : "no")
      << "  acks: " << info.acks() << "\n\n";
  table msgs({"ID", "TOPIC", "KEY", "HEADERS", "PARTITION", "OFFSET", "BODY"});
  const bool committed = info.state() == v1::COMMITTED;
  for (const auto& m : info.message_list()) {
    msgs.add({id_text(m.id()), m.topic(), key_cell(m), headers_text(headers_of(m)),
              committed ? std::to_string(m.partition()) : "-", committed ? std::to_string(m.offset()) : "-",
              bytes_cell(m.body())});
  }
  msgs.print(out);
  return exit_ok;
}

int tx_resolve(session& s, const protocol::txid& txid, bool commit) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  v1::Frame f;
  auto* req = f.mutable_tx_resolve();
  req->set_txid(std::string(txid.raw()));
  req->set_outcome(commit ? v1::COMMIT : v1::ROLLBACK);
  const auto route = home_leader(s, conn, txid);
  auto r = tx_request(*route.conn, std::move(f), v1::Frame::kEndTxResponse, s.timeout());
  if (!r) return s.fail(std::string(commit ? "commit" : "roll back") + " transaction " + txid.to_string(), r.error());
  const auto& resp = r.value().end_tx_response();
  if (s.json()) {
    json::array positions;
    for (const auto& p : resp.positions()) {
      positions.push_back(json::object{{"partition", p.partition()},
                                       {"offset", p.offset()},
                                       {"duplicate", p.duplicate()}});
    }
    print_json(s.env().out, json::object{{"txid", txid.to_string()},
                                         {"state", state_text(resp.state())},
                                         {"already_resolved", resp.already_resolved()},
                                         {"positions", std::move(positions)}});
  } else {
    table t({"TXID", "STATE", "MESSAGES", "NOTE"});
    t.add({txid.to_string(), state_text(resp.state()), std::to_string(resp.positions_size()),
           resp.already_resolved() ? "already resolved" : "-"});
    t.print(s.env().out);
  }
  return exit_ok;
}

int tx_prepare(session& s, const tx_prepare_args& a) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  const auto txid = protocol::uuid::make_v7();  // time-ordered, as producer-lib's (docs/protocol.md §7)
  const auto msg_id = protocol::uuid::make_v7();
  v1::Frame f;
  auto* req = f.mutable_prepare();
  req->set_txid(std::string(txid.raw()));
  req->set_producer_group(a.group);
  auto* m = req->add_messages();
  m->set_id(std::string(msg_id.raw()));
  m->set_topic(a.topic);
  if (a.key) m->set_key(*a.key);
  m->set_body(a.body);
  auto r = tx_request(*conn, std::move(f), v1::Frame::kPrepareResponse, s.timeout());
  if (!r) return s.fail("prepare a transaction on " + quoted(a.topic), r.error());
  const auto& resp = r.value().prepare_response();
  if (s.json()) {
    print_json(s.env().out, json::object{{"txid", txid.to_string()},
                                         {"message_id", msg_id.to_string()},
                                         {"producer_group", a.group},
                                         {"topic", a.topic},
                                         {"first_check", iso_time(resp.first_check_ms())},
                                         {"first_check_ms", resp.first_check_ms()}});
  } else {
    s.env().out << txid.to_string() << '\n';
  }
  return exit_ok;
}

int tx_checker(session& s, const std::string& group, const std::string& answer, const std::string& pg_conninfo) {
  // Block the stop signals before any thread starts, so that every thread inherits the mask
  // and the wait below receives them.
  const auto stop = common::block_stop_signals();

  auto conn = s.connect_as_producer(group);
  if (!conn) return exit_failure;
  // --pg: the barrier table decides each check (definite unless the business transaction is
  // still open); otherwise the fixed answer.
  std::unique_ptr<producer::pg_transaction_checker> barrier;
  if (!pg_conninfo.empty()) {
    barrier = std::make_unique<producer::pg_transaction_checker>(producer::pg_checker_options{
        .conninfo = pg_conninfo, .log = [&s](std::string_view text) { s.env().err << "txmq: " << text << '\n'; }});
  }
  const v1::TxOutcome fixed = answer == "commit" ? v1::COMMIT : answer == "rollback" ? v1::ROLLBACK : v1::UNKNOWN;
  auto decide = [&](const std::string& txid_bytes) {
    if (!barrier) return fixed;
    auto txid = protocol::uuid::from_bytes(txid_bytes);
    if (!txid) return v1::UNKNOWN;
    switch (barrier->check(txid.value())) {
      case producer::tx_decision::commit: return v1::COMMIT;
      case producer::tx_decision::rollback: return v1::ROLLBACK;
      case producer::tx_decision::unknown: return v1::UNKNOWN;
    }
    return v1::UNKNOWN;
  };
  auto upper = [](std::string text) {
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return text;
  };
  const std::string answer_text = barrier ? "the barrier table" : upper(answer);
  std::mutex out_mutex;
  auto& out = s.env().out;
  const bool as_json = s.json();
  conn->set_request_handler([&](const v1::Frame& req) -> std::optional<v1::Frame> {
    v1::Frame answer_frame;
    answer_frame.set_correlation_id(req.correlation_id());
    if (req.body_case() != v1::Frame::kCheckTx) {
      auto* e = answer_frame.mutable_error();
      e->set_code(v1::UNKNOWN_REQUEST);
      e->set_message("txmq tx checker answers CheckTx only");
      return answer_frame;
    }
    const auto& check = req.check_tx();
    const v1::TxOutcome outcome = decide(check.txid());
    const std::string outcome_text = outcome == v1::COMMIT ? "COMMIT" : outcome == v1::ROLLBACK ? "ROLLBACK" : "UNKNOWN";
    auto* result = answer_frame.mutable_check_tx_result();
    result->set_txid(check.txid());
    result->set_outcome(outcome);
    {
      std::lock_guard lock(out_mutex);
      if (as_json) {
        print_json(out, json::object{{"txid", id_text(check.txid())},
                                     {"producer_group", check.producer_group()},
                                     {"check_number", check.check_number()},
                                     {"messages", check.messages_size()},
                                     {"answer", outcome_text}});
      } else {
        out << "check " << check.check_number() << " of " << id_text(check.txid()) << " (" << check.messages_size()
            << " message" << (check.messages_size() == 1 ? "" : "s") << "): " << outcome_text << '\n';
      }
      out.flush();
    }
    return answer_frame;
  });
  if (!as_json) {
    std::lock_guard lock(out_mutex);
    out << "answering checks of producer group " << quoted(group) << " with " << answer_text
        << " (stop with Ctrl-C)\n";
    out.flush();
  }
  (void)common::wait_for_stop_signal(stop);
  conn->set_request_handler(nullptr);
  conn->close();
  return exit_ok;
}

}  // namespace txmq::cli::detail
