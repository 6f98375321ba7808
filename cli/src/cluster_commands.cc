#include "cluster_commands.h"

#include <algorithm>
#include <vector>

#include <boost/json.hpp>

#include "output.h"
#include "txmq/cli/format.h"

namespace txmq::cli::detail {
namespace {

namespace json = boost::json;

struct partition_row {
  std::string topic;
  const v1::PartitionMetadata* p;
  // No leader, or fewer in-sync replicas than replicas: what an operator looks at first.
  bool under_replicated() const { return p->leader() < 0 || p->isr_size() < p->replicas_size(); }
};

}  // namespace

int cluster_status(session& s) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  v1::Frame request;
  request.mutable_metadata();
  auto r = conn->request(std::move(request), s.timeout());
  if (!r) return s.fail("cluster status", r.error());
  if (!r.value().has_metadata_response()) return s.fail("cluster status: the broker did not answer with Metadata");
  const auto& m = r.value().metadata_response();

  std::vector<partition_row> rows;
  for (const auto& t : m.topics()) {
    for (const auto& p : t.partition_info()) rows.push_back({t.name(), &p});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const partition_row& a, const partition_row& b) {
    return a.under_replicated() > b.under_replicated();
  });

  if (s.json()) {
    json::array nodes;
    for (const auto& n : m.nodes()) nodes.push_back(json::object{{"id", n.id()}, {"address", n.address()}});
    json::array parts;
    for (const auto& row : rows) {
      parts.push_back(json::object{{"topic", row.topic},
                                   {"partition", row.p->partition()},
                                   {"leader", row.p->leader()},
                                   {"leader_address", row.p->leader_address()},
                                   {"leader_epoch", row.p->leader_epoch()},
                                   {"replicas", id_array(row.p->replicas())},
                                   {"isr", id_array(row.p->isr())},
                                   {"under_replicated", row.under_replicated()}});
    }
    print_json(s.env().out, json::object{{"cluster", m.cluster()},
                                         {"cluster_name", m.cluster_name()},
                                         {"node_id", m.node_id()},
                                         {"controller", m.controller()},
                                         {"nodes", std::move(nodes)},
                                         {"partitions", std::move(parts)}});
    return exit_ok;
  }
  auto& out = s.env().out;
  if (!m.cluster()) {
    out << "single node (no cluster_etcd): this broker leads every partition\n\n";
  } else {
    out << "cluster '" << m.cluster_name() << "', answered by node " << m.node_id() << ", controller: "
        << (m.controller() < 0 ? std::string("none") : "node " + std::to_string(m.controller())) << "\n\n";
  }
  table nodes({"NODE", "ADDRESS"});
  for (const auto& n : m.nodes()) nodes.add({std::to_string(n.id()), n.address()});
  nodes.print(out);
  out << '\n';
  table parts({"TOPIC", "PARTITION", "LEADER", "ADDRESS", "EPOCH", "REPLICAS", "ISR", "STATE"});
  for (const auto& row : rows) {
    const auto* p = row.p;
    parts.add({row.topic, std::to_string(p->partition()), p->leader() < 0 ? "none" : std::to_string(p->leader()),
               p->leader_address().empty() ? "-" : p->leader_address(), std::to_string(p->leader_epoch()),
               id_list(p->replicas()), id_list(p->isr()),
               p->leader() < 0 ? "no leader" : (row.under_replicated() ? "under-replicated" : "ok")});
  }
  parts.print(out);
  return exit_ok;
}

}  // namespace txmq::cli::detail
