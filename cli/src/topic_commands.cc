#include "topic_commands.h"

#include <algorithm>
#include <array>
#include <vector>

#include <boost/json.hpp>

#include "output.h"
#include "txmq/cli/format.h"
#include "txmq/client/admin.h"

namespace txmq::cli::detail {
namespace {

namespace json = boost::json;

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

}  // namespace

int topic_create(session& s, const std::string& name, std::uint32_t partitions, std::uint32_t replicas) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  client::admin admin(conn);
  auto r = admin.create_topic({.name = name, .partitions = partitions, .replicas = replicas});
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

}  // namespace txmq::cli::detail
