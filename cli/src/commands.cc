#include "commands.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <csignal>
#include <mutex>

#include <pthread.h>
#include <signal.h>
#include <deque>
#include <future>
#include <istream>
#include <ostream>
#include <vector>

#include <boost/json.hpp>

#include "txmq/cli/format.h"
#include "txmq/client/admin.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/pg_checker.h"
#include "txmq/producer/producer.h"

namespace txmq::cli::detail {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;

std::string quoted(const std::string& name) { return "'" + name + "'"; }

void print_json(std::ostream& out, const json::value& v) { out << json::serialize(v) << '\n'; }

std::string id_text(const std::string& raw) {
  auto id = protocol::uuid::from_bytes(raw);
  return id ? id.value().to_string() : "base64:" + base64_encode(raw);
}

// Bytes for one table cell: text when it is UTF-8, base64 otherwise.
std::string bytes_cell(const std::string& bytes) {
  return is_valid_utf8(bytes) ? escape_control(bytes) : "base64:" + base64_encode(bytes);
}

// Sets `name` (text) or `name_base64` on o.
void put_bytes(json::object& o, const std::string& name, const std::string& bytes) {
  if (is_valid_utf8(bytes)) {
    o[name] = bytes;
  } else {
    o[name + "_base64"] = base64_encode(bytes);
  }
}

std::map<std::string, std::string> headers_of(const v1::Message& m) {
  return {m.headers().begin(), m.headers().end()};
}

json::object headers_json(const v1::Message& m) {
  json::object h;
  for (const auto& [k, v] : headers_of(m)) h[k] = v;
  return h;
}

std::string key_cell(const v1::Message& m) {
  if (!m.has_key()) return "-";
  if (m.key().empty()) return "\"\"";
  return bytes_cell(m.key());
}

void put_key(json::object& o, const v1::Message& m) {
  if (!m.has_key()) {
    o["key"] = nullptr;
  } else {
    put_bytes(o, "key", m.key());
  }
}

// ---- topics --------------------------------------------------------------------------------

struct topic_totals {
  std::uint64_t messages = 0;
  std::uint64_t bytes = 0;
};

topic_totals totals(const v1::TopicInfo& t) {
  topic_totals out;
  for (const auto& p : t.partition_info()) {
    out.messages += p.end_offset() - std::min(p.start_offset(), p.end_offset());
    out.bytes += p.bytes();
  }
  return out;
}

table topic_table() { return table({"TOPIC", "PARTITIONS", "MESSAGES", "BYTES", "RETENTION", "CREATED"}); }

std::vector<std::string> topic_row(const v1::TopicInfo& t) {
  const auto sum = totals(t);
  std::string retention = duration_text(t.retention_ms());
  if (t.retention_bytes() != 0) retention += " / " + std::to_string(t.retention_bytes()) + " bytes";
  return {t.name(), std::to_string(t.partitions()), std::to_string(sum.messages), std::to_string(sum.bytes), retention,
          iso_time(t.created_ms())};
}

json::object topic_json(const v1::TopicInfo& t, bool with_partitions) {
  const auto sum = totals(t);
  json::object o{{"topic", t.name()},
                 {"partitions", t.partitions()},
                 {"messages", sum.messages},
                 {"bytes", sum.bytes},
                 {"retention_ms", t.retention_ms()},
                 {"retention_bytes", t.retention_bytes()},
                 {"created", iso_time(t.created_ms())},
                 {"created_ms", t.created_ms()}};
  if (with_partitions) {
    json::array parts;
    for (const auto& p : t.partition_info()) {
      parts.push_back(json::object{{"partition", p.partition()},
                                   {"start_offset", p.start_offset()},
                                   {"end_offset", p.end_offset()},
                                   {"messages", p.end_offset() - std::min(p.start_offset(), p.end_offset())},
                                   {"bytes", p.bytes()}});
    }
    o["partition_info"] = std::move(parts);
  }
  return o;
}

// ---- groups --------------------------------------------------------------------------------

struct group_totals {
  std::uint64_t lag = 0;
  std::uint64_t in_flight = 0;
  std::uint64_t waiting = 0;
  std::uint64_t dead = 0;
};

group_totals totals(const v1::GroupInfo& g) {
  group_totals out;
  for (const auto& p : g.partitions()) {
    out.lag += p.lag();
    out.in_flight += p.in_flight();
    out.waiting += p.waiting();
    out.dead += p.dead();
  }
  return out;
}

std::string join(const google::protobuf::RepeatedPtrField<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ",") + i;
  return out.empty() ? "-" : out;
}

table group_table() { return table({"GROUP", "TOPICS", "LAG", "IN_FLIGHT", "WAITING", "DEAD", "CREATED"}); }

std::vector<std::string> group_row(const v1::GroupInfo& g) {
  const auto sum = totals(g);
  return {g.name(),
          join(g.topics()),
          std::to_string(sum.lag),
          std::to_string(sum.in_flight),
          std::to_string(sum.waiting),
          std::to_string(std::max<std::uint64_t>(sum.dead, g.dead_letters())),
          iso_time(g.created_ms())};
}

json::object group_json(const v1::GroupInfo& g, bool with_partitions) {
  const auto sum = totals(g);
  json::array topics;
  for (const auto& t : g.topics()) topics.push_back(json::string(t));
  json::object o{{"group", g.name()},
                 {"topics", std::move(topics)},
                 {"lag", sum.lag},
                 {"in_flight", sum.in_flight},
                 {"waiting", sum.waiting},
                 {"dead_letters", g.dead_letters()},
                 {"created", iso_time(g.created_ms())},
                 {"created_ms", g.created_ms()}};
  if (with_partitions) {
    json::array parts;
    for (const auto& p : g.partitions()) {
      parts.push_back(json::object{{"topic", p.topic()},
                                   {"partition", p.partition()},
                                   {"acked", p.acked()},
                                   {"dispatched", p.dispatched()},
                                   {"end_offset", p.end_offset()},
                                   {"lag", p.lag()},
                                   {"in_flight", p.in_flight()},
                                   {"waiting", p.waiting()},
                                   {"dead", p.dead()}});
    }
    o["partitions"] = std::move(parts);
  }
  return o;
}

}  // namespace

// ---- session -------------------------------------------------------------------------------

std::shared_ptr<client::connection> session::connect() {
  if (conn_) return conn_;
  client::connection_options o;
  o.address = broker_;
  o.client_id = "txmq-cli";
  o.connect_timeout = connect_timeout_;
  o.request_timeout = timeout_;
  auto c = client::connection::connect(std::move(o));
  if (!c) {
    fail("cannot reach the broker at " + broker_ + " (check --broker or TXMQ_BROKER, and that txmq-broker runs)",
         c.error());
    return nullptr;
  }
  conn_ = std::move(c).value();
  return conn_;
}

std::shared_ptr<client::connection> session::connect_as_producer(const std::string& producer_group) {
  client::connection_options o;
  o.address = broker_;
  o.client_id = "txmq-cli";
  o.producer_group = producer_group;
  o.connect_timeout = connect_timeout_;
  o.request_timeout = timeout_;
  auto c = client::connection::connect(std::move(o));
  if (!c) {
    fail("cannot reach the broker at " + broker_ + " (check --broker or TXMQ_BROKER, and that txmq-broker runs)",
         c.error());
    return nullptr;
  }
  return std::move(c).value();
}

int session::fail(const std::string& what, const client::error& e) { return fail(what + ": " + e.to_string()); }

int session::fail(const std::string& what) {
  env_.out.flush();
  env_.err << "txmq: " << what << '\n';
  env_.err.flush();
  return exit_failure;
}

// ---- topic ---------------------------------------------------------------------------------

// Prints topics or groups: one JSON line each, or one table with a row each.
template <class Items, class Json, class Table, class Row>
int print_items(session& s, const Items& items, Json to_json, Table make_table, Row to_row) {
  if (s.json()) {
    for (const auto& item : items) print_json(s.env().out, to_json(item, false));
  } else {
    auto t = make_table();
    for (const auto& item : items) t.add(to_row(item));
    t.print(s.env().out);
  }
  return exit_ok;
}

int topic_create(session& s, const std::string& name, std::uint32_t partitions) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  client::admin admin(conn);
  auto r = admin.create_topic({.name = name, .partitions = partitions});
  if (!r) return s.fail("create topic " + quoted(name), r.error());
  return print_items(s, std::array{r.value()}, topic_json, topic_table, topic_row);
}

int topic_list(session& s) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  client::admin admin(conn);
  auto r = admin.list_topics();
  if (!r) return s.fail("list topics", r.error());
  auto topics = r.value().topics();
  std::sort(topics.begin(), topics.end(), [](const auto& a, const auto& b) { return a.name() < b.name(); });
  return print_items(s, topics, topic_json, topic_table, topic_row);
}

int topic_describe(session& s, const std::string& name) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  client::admin admin(conn);
  auto r = admin.describe_topic(name);
  if (!r) return s.fail("describe topic " + quoted(name), r.error());
  const auto& info = r.value();
  if (s.json()) {
    print_json(s.env().out, topic_json(info, true));
    return exit_ok;
  }
  auto summary = topic_table();
  summary.add(topic_row(info));
  summary.print(s.env().out);
  s.env().out << '\n';
  table parts({"PARTITION", "START", "END", "MESSAGES", "BYTES"});
  for (const auto& p : info.partition_info()) {
    parts.add({std::to_string(p.partition()), std::to_string(p.start_offset()), std::to_string(p.end_offset()),
               std::to_string(p.end_offset() - std::min(p.start_offset(), p.end_offset())), std::to_string(p.bytes())});
  }
  parts.print(s.env().out);
  return exit_ok;
}

// ---- produce -------------------------------------------------------------------------------

int produce(session& s, const produce_args& a) {
  std::vector<std::string> bodies;
  const bool from_stdin = !a.body;
  if (a.id && from_stdin) {
    // One id names one message: know the input before sending any of it.
    std::string line;
    while (std::getline(s.env().in, line)) bodies.push_back(line);
    if (bodies.size() > 1) {
      s.env().err << "txmq: --id names one message, but stdin has " << bodies.size()
                  << " lines; give BODY or a single line\n";
      return exit_usage;
    }
  } else if (a.body) {
    bodies.push_back(*a.body);
  }

  auto conn = s.connect();
  if (!conn) return exit_failure;
  producer::producer_options options;
  options.connection = conn->options();
  options.delivery_timeout = s.timeout();
  options.request_timeout = s.timeout();
  // Input lines are stored in input order, retries included (also the library's default).
  options.max_in_flight_batches_per_topic = 1;
  producer::producer p(conn, options);

  struct pending_send {
    std::uint64_t line;
    std::future<client::result<producer::send_result>> outcome;
  };
  std::deque<pending_send> pending;
  table rows({"ID", "PARTITION", "OFFSET", "STATUS"});
  std::optional<client::error> first_error;
  std::uint64_t first_error_line = 0;
  std::uint64_t failures = 0;
  std::uint64_t sent = 0;
  auto& out = s.env().out;

  const auto settle_front = [&] {
    auto r = pending.front().outcome.get();
    const auto line = pending.front().line;
    pending.pop_front();
    if (!r) {
      if (!first_error) {
        first_error = r.error();
        first_error_line = line;
      }
      ++failures;
      return;
    }
    const auto& v = r.value();
    if (s.json()) {
      print_json(out, json::object{{"id", v.id.to_string()},
                                   {"topic", a.topic},
                                   {"partition", v.partition},
                                   {"offset", v.offset},
                                   {"duplicate", v.duplicate}});
    } else {
      rows.write_row(out, {v.id.to_string(), std::to_string(v.partition), std::to_string(v.offset),
                           v.duplicate ? "duplicate" : "stored"});
    }
  };
  const auto send = [&](std::string body) {
    producer::outgoing_message m;
    m.topic = a.topic;
    m.key = a.key;
    m.headers = a.headers;
    m.body = std::move(body);
    m.id = a.id;
    pending.push_back({++sent, p.async_send(std::move(m))});
  };
  const auto drain = [&] {
    while (!pending.empty()) settle_front();
    out.flush();
  };

  if (!from_stdin || a.id) {
    for (auto& b : bodies) send(std::move(b));
  } else {
    std::string line;
    auto* in = s.env().in.rdbuf();
    while (!first_error && std::getline(s.env().in, line)) {
      send(std::move(line));
      while (!pending.empty() && pending.front().outcome.wait_for(milliseconds(0)) == std::future_status::ready) {
        settle_front();
      }
      // Lines already waiting are sent as one batch; before blocking for more input, report
      // what was sent so far, so that an interactive user sees each acknowledgement.
      if (pending.size() >= 1000 || in == nullptr || in->in_avail() <= 0) drain();
    }
  }
  drain();
  p.close();
  if (first_error) {
    std::string what = "produce to topic " + quoted(a.topic) + " failed";
    if (from_stdin) what += " for input line " + std::to_string(first_error_line);
    if (failures > 1) what += " (and " + std::to_string(failures - 1) + " more messages)";
    return s.fail(what, *first_error);
  }
  return exit_ok;
}

// ---- consume -------------------------------------------------------------------------------

namespace {

// Acks a fetched batch. Each ref carries its delivery's attempt, so an ack never settles a
// newer delivery of the same message (one whose deadline passed and that went out again).
int ack_deliveries(session& s, consumer::consumer& c, const std::string& group,
                   const std::vector<consumer::delivery>& deliveries) {
  std::vector<consumer::delivery_ref> refs;
  refs.reserve(deliveries.size());
  for (const auto& d : deliveries) refs.push_back(d.ref());
  const std::string what = "ack in group " + quoted(group);
  auto answer = c.ack(refs);
  if (!answer) return s.fail(what, answer.error());
  std::size_t failed = 0;
  std::string first;
  for (std::size_t i = 0; i < answer.value().size(); ++i) {
    const auto& r = answer.value()[i];
    if (r) continue;
    if (failed++ == 0) {
      const auto& ref = refs[i];
      first = ref.topic + "/" + std::to_string(ref.partition) + "@" + std::to_string(ref.offset) + " attempt " +
              std::to_string(ref.attempt) + ": " + r.error().to_string();
    }
  }
  if (failed > 0) {
    return s.fail(what + " failed for " + std::to_string(failed) + " of " + std::to_string(deliveries.size()) +
                  " messages (first: " + first + ")");
  }
  return exit_ok;
}

}  // namespace

int consume(session& s, const consume_args& a) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  consumer::consumer_options options;
  options.connection = conn->options();
  options.group = a.group;
  options.topics = {a.topic};
  consumer::consumer c(conn, options);
  table rows({"ID", "KEY", "HEADERS", "PARTITION", "OFFSET", "ATTEMPT", "BODY"});
  auto& out = s.env().out;
  std::uint64_t handled = 0;
  constexpr std::uint64_t k_batch = 100;
  while (a.max == 0 || handled < a.max) {
    const auto want = static_cast<std::uint32_t>(a.max == 0 ? k_batch : std::min(k_batch, a.max - handled));
    auto got = c.fetch(want, a.wait);
    if (!got) return s.fail("consume topic " + quoted(a.topic) + " as group " + quoted(a.group), got.error());
    const auto& deliveries = got.value();
    if (deliveries.empty()) break;
    for (const auto& d : deliveries) {
      const auto& m = d.message;
      if (s.json()) {
        json::object o{{"id", id_text(m.id())}, {"topic", m.topic()}};
        put_key(o, m);
        o["headers"] = headers_json(m);
        o["partition"] = m.partition();
        o["offset"] = m.offset();
        o["attempt"] = m.attempt();
        o["publish_time"] = iso_time(m.publish_time_ms());
        put_bytes(o, "body", m.body());
        print_json(out, o);
      } else {
        rows.write_row(out, {id_text(m.id()), key_cell(m), headers_text(headers_of(m)), std::to_string(m.partition()),
                             std::to_string(m.offset()), std::to_string(m.attempt()), bytes_cell(m.body())});
      }
    }
    out.flush();
    if (!a.no_ack) {
      if (const int status = ack_deliveries(s, c, a.group, deliveries); status != exit_ok) return status;
    }
    handled += deliveries.size();
  }
  return exit_ok;
}

// ---- group ---------------------------------------------------------------------------------

int group_create(session& s, const std::string& group, const std::string& topic, bool from_latest) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  client::admin admin(conn);
  auto r = admin.create_group(group, topic, from_latest);
  if (!r) return s.fail("create group " + quoted(group) + " on topic " + quoted(topic), r.error());
  return print_items(s, std::array{r.value()}, group_json, group_table, group_row);
}

int group_list(session& s) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  client::admin admin(conn);
  auto r = admin.list_groups();
  if (!r) return s.fail("list groups", r.error());
  auto groups = r.value().groups();
  std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.name() < b.name(); });
  return print_items(s, groups, group_json, group_table, group_row);
}

int group_describe(session& s, const std::string& group) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  client::admin admin(conn);
  auto r = admin.describe_group(group);
  if (!r) return s.fail("describe group " + quoted(group), r.error());
  const auto& g = r.value();
  if (s.json()) {
    print_json(s.env().out, group_json(g, true));
    return exit_ok;
  }
  table t({"TOPIC", "PARTITION", "ACKED", "DISPATCHED", "END", "LAG", "IN_FLIGHT", "WAITING", "DEAD"});
  for (const auto& p : g.partitions()) {
    t.add({p.topic(), std::to_string(p.partition()), std::to_string(p.acked()), std::to_string(p.dispatched()),
           std::to_string(p.end_offset()), std::to_string(p.lag()), std::to_string(p.in_flight()),
           std::to_string(p.waiting()), std::to_string(p.dead())});
  }
  t.print(s.env().out);
  return exit_ok;
}

// ---- dlq -----------------------------------------------------------------------------------

int dlq_list(session& s, const std::string& group, std::uint32_t limit) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  client::admin admin(conn);
  auto r = admin.dlq_list(group, limit);
  if (!r) return s.fail("list dead letters of group " + quoted(group), r.error());
  auto& out = s.env().out;
  table t({"ID", "TOPIC", "PARTITION", "OFFSET", "KEY", "ATTEMPTS", "DEAD_AT", "REASON", "BODY"});
  for (const auto& dl : r.value().dead_letters()) {
    const auto& m = dl.message();
    if (s.json()) {
      json::object o{{"group", group}, {"id", id_text(m.id())}, {"topic", m.topic()}};
      put_key(o, m);
      o["headers"] = headers_json(m);
      o["partition"] = m.partition();
      o["offset"] = m.offset();
      o["attempts"] = dl.attempts();
      o["dead_at"] = iso_time(dl.dead_at_ms());
      o["reason"] = dl.reason();
      put_bytes(o, "body", m.body());
      print_json(out, o);
    } else {
      t.add({id_text(m.id()), m.topic(), std::to_string(m.partition()), std::to_string(m.offset()), key_cell(m),
             std::to_string(dl.attempts()), iso_time(dl.dead_at_ms()), dl.reason().empty() ? "-" : escape_control(dl.reason()),
             bytes_cell(m.body())});
    }
  }
  if (!s.json()) t.print(out);
  return exit_ok;
}

int dlq_redrive(session& s, const std::string& group) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  client::admin admin(conn);
  auto r = admin.dlq_redrive(group);
  if (!r) return s.fail("redrive dead letters of group " + quoted(group), r.error());
  if (s.json()) {
    print_json(s.env().out, json::object{{"group", group}, {"redriven", r.value().redriven()}});
  } else {
    table t({"GROUP", "REDRIVEN"});
    t.add({group, std::to_string(r.value().redriven())});
    t.print(s.env().out);
  }
  return exit_ok;
}

// ---- tx ------------------------------------------------------------------------------------

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
      keys.push_back(json::object{{"key_base64", base64_encode(k)}});
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

}  // namespace

int tx_list(session& s, const tx_list_args& a) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  std::vector<v1::TxInfo> txs;
  std::string after;
  for (;;) {
    v1::Frame f;
    auto* req = f.mutable_tx_list();
    if (a.state == "prepared") req->set_state(v1::PREPARED);
    if (a.state == "abandoned") req->set_state(v1::ABANDONED);
    if (a.state == "all") req->set_all_states(true);
    req->set_topic(a.topic);
    req->set_limit(1000);
    req->set_after_txid(after);
    auto r = tx_request(*conn, std::move(f), v1::Frame::kTxListResponse, s.timeout());
    if (!r) return s.fail("list transactions", r.error());
    const auto& resp = r.value().tx_list_response();
    for (const auto& t : resp.txs()) txs.push_back(t);
    if (resp.next_after_txid().empty() || resp.txs().empty()) break;
    after = resp.next_after_txid();
  }
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
  v1::Frame f;
  f.mutable_tx_show()->set_txid(std::string(txid.raw()));
  auto r = tx_request(*conn, std::move(f), v1::Frame::kTxInfo, s.timeout());
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
  auto r = tx_request(*conn, std::move(f), v1::Frame::kEndTxResponse, s.timeout());
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
  const auto txid = protocol::uuid::make_v4();
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
  // and sigwait below receives them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  if (pthread_sigmask(SIG_BLOCK, &stop, nullptr) != 0) return s.fail("cannot block SIGINT/SIGTERM");

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
  int sig = 0;
  while (sigwait(&stop, &sig) != 0) {
  }
  conn->set_request_handler(nullptr);
  conn->close();
  return exit_ok;
}

}  // namespace txmq::cli::detail
