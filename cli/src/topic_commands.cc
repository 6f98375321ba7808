#include "topic_commands.h"

#include <algorithm>
#include <array>
#include <map>
#include <vector>

#include <boost/json.hpp>

#include "output.h"
#include "txmq/cli/format.h"
#include "txmq/client/admin.h"
#include "txmq/client/cluster_admin.h"
#include "txmq/client/leader_router.h"

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

// In a cluster each partition's offsets live on its leader: one DescribeTopic per leader node
// (its own partitions' figures), joined with the Metadata's leader, epoch, replicas and ISR.
int topic_describe_in_cluster(session& s, client::leader_router& router, const v1::MetadataResponse& m,
                              const std::string& name) {
  const v1::TopicMetadata* topic = nullptr;
  for (const auto& t : m.topics()) {
    if (t.name() == name) topic = &t;
  }
  if (topic == nullptr) {
    return s.fail("describe topic " + quoted(name), client::error(protocol::errc::unknown_topic,
                                                                  "no topic " + quoted(name) + " in cluster " +
                                                                      quoted(m.cluster_name())));
  }
  v1::TopicInfo info;
  info.set_name(name);
  info.set_partitions(topic->partitions());
  std::map<std::string, v1::TopicInfo> by_leader;
  for (const auto& p : topic->partition_info()) {
    const auto& address = p.leader_address();
    if (address.empty() || by_leader.contains(address)) continue;
    client::admin admin(router.connection_for(address));
    auto r = admin.describe_topic(name);
    // A leader that cannot answer leaves its partitions' figures empty; the table says so.
    by_leader[address] = r ? r.value() : v1::TopicInfo{};
    if (r && info.created_ms() == 0) {
      info.set_retention_ms(r.value().retention_ms());
      info.set_retention_bytes(r.value().retention_bytes());
      info.set_created_ms(r.value().created_ms());
    }
  }
  std::vector<const v1::PartitionMetadata*> metas;
  for (const auto& p : topic->partition_info()) {
    metas.push_back(&p);
    auto* out = info.add_partition_info();
    out->set_partition(p.partition());
    const auto it = by_leader.find(p.leader_address());
    if (it == by_leader.end()) continue;
    for (const auto& local : it->second.partition_info()) {
      if (local.partition() == p.partition()) *out = local;
    }
  }
  if (s.json()) {
    auto o = topic_json(info, true);
    o["replicas"] = topic->replicas();
    o["min_insync_replicas"] = topic->min_insync_replicas();
    // The retention in etcd (0: each broker's own), over the leaders' local figures.
    if (topic->retention_ms() > 0) o["retention_ms"] = topic->retention_ms();
    if (topic->retention_bytes() > 0) o["retention_bytes"] = topic->retention_bytes();
    auto& parts = o["partition_info"].as_array();
    for (std::size_t i = 0; i < parts.size() && i < metas.size(); ++i) {
      auto& po = parts[i].as_object();
      po["leader"] = metas[i]->leader();
      po["leader_address"] = metas[i]->leader_address();
      po["leader_epoch"] = metas[i]->leader_epoch();
      po["replicas"] = id_array(metas[i]->replicas());
      po["isr"] = id_array(metas[i]->isr());
    }
    print_json(s.env().out, o);
    return exit_ok;
  }
  auto summary = topic_table();
  summary.add(topic_row(info));
  summary.print(s.env().out);
  s.env().out << "replicas: " << topic->replicas() << "  min in-sync: " << topic->min_insync_replicas() << "\n\n";
  table parts({"PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "START", "END", "MESSAGES", "BYTES"});
  for (std::size_t i = 0; i < metas.size(); ++i) {
    const auto* meta = metas[i];
    const auto& p = info.partition_info(static_cast<int>(i));
    const bool known = !meta->leader_address().empty() && by_leader[meta->leader_address()].partitions() != 0;
    const auto figure = [&](std::uint64_t v) { return known ? std::to_string(v) : std::string("?"); };
    parts.add({std::to_string(meta->partition()),
               meta->leader() < 0 ? "none" : std::to_string(meta->leader()) + " (" + meta->leader_address() + ")",
               std::to_string(meta->leader_epoch()), id_list(meta->replicas()), id_list(meta->isr()),
               figure(p.start_offset()), figure(p.end_offset()),
               figure(p.end_offset() - std::min(p.start_offset(), p.end_offset())), figure(p.bytes())});
  }
  parts.print(s.env().out);
  return exit_ok;
}

}  // namespace

int topic_create(session& s, const client::topic_spec& spec) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  client::admin admin(conn);
  auto r = admin.create_topic(spec);
  if (!r) return s.fail("create topic " + quoted(spec.name), r.error());
  return print_items(s, std::array{r.value()}, topic_json, topic_table, topic_row);
}

int topic_alter(session& s, const v1::AlterTopicRequest& req) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  client::admin admin(conn);
  auto r = admin.alter_topic(req);
  if (!r) return s.fail("alter topic " + quoted(req.name()), r.error());
  const auto with_insync = [](const v1::TopicInfo& t, bool parts) {
    auto o = topic_json(t, parts);
    if (t.min_insync_replicas() > 0) o["min_insync_replicas"] = t.min_insync_replicas();
    return o;
  };
  const int rc = print_items(s, std::array{r.value()}, with_insync, topic_table, topic_row);
  if (!s.json() && r.value().min_insync_replicas() > 0) {
    s.env().out << "min in-sync: " << r.value().min_insync_replicas() << "\n";
  }
  return rc;
}

int topic_list(session& s) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  // In a cluster every node lists every topic (etcd), and each partition's figures come from
  // its leader (client/cluster_admin.h); against a single broker, its own ListTopics.
  auto r = client::list_topics_all(conn, std::max<std::chrono::milliseconds>(s.timeout(), std::chrono::seconds(30)));
  if (!r) return s.fail("list topics", r.error());
  for (const auto& [topic, partition] : r.value().unavailable) {
    s.env().err << "txmq: warning: partition " << partition << " of topic " << quoted(topic)
                << " has no leader now; its messages are not counted\n";
  }
  const auto& topics = r.value().topics;
  const bool cluster = std::any_of(topics.begin(), topics.end(), [](const auto& t) { return t.replicas() != 0; });
  if (!cluster) return print_items(s, topics, topic_json, topic_table, topic_row);
  if (s.json()) {
    for (const auto& t : topics) {
      auto o = topic_json(t, false);
      o["replicas"] = t.replicas();
      print_json(s.env().out, o);
    }
    return exit_ok;
  }
  table t({"TOPIC", "PARTITIONS", "REPLICAS", "MESSAGES", "BYTES", "RETENTION", "CREATED"});
  for (const auto& info : topics) {
    auto row = topic_row(info);
    row.insert(row.begin() + 2, std::to_string(info.replicas()));
    t.add(std::move(row));
  }
  t.print(s.env().out);
  return exit_ok;
}

int topic_describe(session& s, const std::string& name) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  {
    // Which kind of broker: in a cluster the receiving node knows only its own partitions.
    client::leader_router router(conn);
    auto m = router.refresh(s.timeout());
    if (m && m.value().cluster()) return topic_describe_in_cluster(s, router, m.value(), name);
  }
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
