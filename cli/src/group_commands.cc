#include "group_commands.h"

#include <algorithm>
#include <array>
#include <vector>

#include <boost/json.hpp>

#include "output.h"
#include "txmq/cli/format.h"
#include "txmq/client/admin.h"
#include "txmq/client/cluster_admin.h"

namespace txmq::cli::detail {
namespace {

namespace json = boost::json;

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

// How long a cluster-wide admin read may retry while leaderships move (at least 30 s).
std::chrono::milliseconds admin_deadline(const session& s) { return std::max(s.timeout(), std::chrono::milliseconds(30'000)); }

// A cluster's partitions without a leader now: their dead letters are neither listed nor
// redriven until one of their ISR returns.
void warn_unavailable(session& s, const std::vector<std::pair<std::string, std::uint32_t>>& unavailable) {
  for (const auto& [topic, partition] : unavailable) {
    s.env().err << "txmq: warning: partition " << partition << " of topic " << quoted(topic)
                << " has no leader now; its dead letters are left out\n";
  }
}

}  // namespace

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
  // In a cluster each partition's figures come from its leader (client/cluster_admin.h).
  auto r = client::list_groups_all(conn, admin_deadline(s));
  if (!r) return s.fail("list groups", r.error());
  return print_items(s, r.value(), group_json, group_table, group_row);
}

int group_describe(session& s, const std::string& group) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  auto r = client::describe_group_all(conn, group, admin_deadline(s));
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
  // The broker answers at most 1,000 a page (fewer for large messages); --limit may ask for
  // more: the pages are followed until it is reached or none follow. In a cluster every
  // partition's dead letters come from its leader (client/cluster_admin.h).
  auto listing = client::dlq_list_all(conn, group, limit == 0 ? 100 : limit, admin_deadline(s));
  if (!listing) return s.fail("list dead letters of group " + quoted(group), listing.error());
  warn_unavailable(s, listing.value().unavailable);
  const auto& all = listing.value().dead_letters;
  auto& out = s.env().out;
  table t({"ID", "TOPIC", "PARTITION", "OFFSET", "KEY", "ATTEMPTS", "DEAD_AT", "REASON", "BODY"});
  for (const auto& dl : all) {
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
  auto r = client::dlq_redrive_all(conn, group, admin_deadline(s));
  if (!r) return s.fail("redrive dead letters of group " + quoted(group), r.error());
  warn_unavailable(s, r.value().unavailable);
  if (s.json()) {
    print_json(s.env().out, json::object{{"group", group}, {"redriven", r.value().redriven}});
  } else {
    table t({"GROUP", "REDRIVEN"});
    t.add({group, std::to_string(r.value().redriven)});
    t.print(s.env().out);
  }
  return exit_ok;
}

}  // namespace txmq::cli::detail
