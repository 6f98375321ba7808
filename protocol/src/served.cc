#include "txmq/protocol/served.h"

#include <algorithm>

namespace txmq::protocol {

leader_plan plan_of(const v1::MetadataResponse& m) {
  leader_plan out;
  for (const auto& t : m.topics()) {
    for (const auto& p : t.partition_info()) {
      const partition_key k{t.name(), p.partition()};
      if (p.leader() < 0 || p.leader_address().empty()) {
        out.unavailable.push_back(k);
        continue;
      }
      out.partitions[k] = {p.leader_address(), p.leader(), p.leader_epoch()};
      out.addresses.insert(p.leader_address());
    }
  }
  return out;
}

bool take_served(const leader_plan& plan, const std::string& address,
                 const google::protobuf::RepeatedPtrField<v1::ServedPartition>& served,
                 std::set<partition_key>& covered) {
  bool consistent = true;
  for (const auto& s : served) {
    auto it = plan.partitions.find({s.topic(), s.partition()});
    if (it == plan.partitions.end() || it->second.address != address || it->second.epoch != s.leader_epoch()) {
      consistent = false;
      continue;
    }
    covered.insert(it->first);
  }
  return consistent;
}

void cover_all_of(const leader_plan& plan, const std::string& address, std::set<partition_key>& covered) {
  for (const auto& [k, l] : plan.partitions) {
    if (l.address == address) covered.insert(k);
  }
}

std::vector<partition_key> uncovered(const leader_plan& plan, const std::set<partition_key>& covered) {
  std::vector<partition_key> out;
  for (const auto& [k, l] : plan.partitions) {
    if (!covered.contains(k)) out.push_back(k);
  }
  return out;
}

bool dead_letter_less(const v1::DeadLetter& a, const v1::DeadLetter& b) {
  const auto& x = a.message();
  const auto& y = b.message();
  if (x.topic() != y.topic()) return x.topic() < y.topic();
  if (x.partition() != y.partition()) return x.partition() < y.partition();
  return x.offset() < y.offset();
}

void merge_group(const leader_plan& plan, const std::string& address, const v1::GroupInfo& part, v1::GroupInfo& into) {
  into.set_name(part.name());
  for (const auto& t : part.topics()) {
    if (std::find(into.topics().begin(), into.topics().end(), t) == into.topics().end()) into.add_topics(t);
  }
  if (into.created_ms() == 0 || (part.created_ms() != 0 && part.created_ms() < into.created_ms())) {
    into.set_created_ms(part.created_ms());
  }
  for (const auto& row : part.partitions()) {
    auto it = plan.partitions.find({row.topic(), row.partition()});
    if (it == plan.partitions.end() || it->second.address != address) continue;
    *into.add_partitions() = row;
    into.set_dead_letters(into.dead_letters() + row.dead());
  }
  for (const auto& s : part.served()) *into.add_served() = s;
}

void sort_group_rows(v1::GroupInfo& g) {
  std::sort(g.mutable_partitions()->begin(), g.mutable_partitions()->end(), [](const auto& a, const auto& b) {
    return a.topic() != b.topic() ? a.topic() < b.topic() : a.partition() < b.partition();
  });
}

void merge_topics(const leader_plan& plan, const std::string& address, const v1::ListTopicsResponse& part,
                  v1::ListTopicsResponse& into) {
  const auto led_by_address = [&](const std::string& topic, std::uint32_t p) {
    auto it = plan.partitions.find({topic, p});
    return it != plan.partitions.end() && it->second.address == address;
  };
  for (const auto& t : part.topics()) {
    auto found = std::find_if(into.mutable_topics()->begin(), into.mutable_topics()->end(),
                              [&](const v1::TopicInfo& x) { return x.name() == t.name(); });
    v1::TopicInfo* target = nullptr;
    if (found == into.mutable_topics()->end()) {
      // First seen here: the topic as this node lists it, offsets kept only where it leads (a
      // follower's copy may lag; a node without a copy has none).
      target = into.add_topics();
      *target = t;
      for (auto& p : *target->mutable_partition_info()) {
        if (led_by_address(t.name(), p.partition())) continue;
        p.set_start_offset(0);
        p.set_end_offset(0);
        p.set_bytes(0);
      }
      continue;
    }
    target = &*found;
    if (target->created_ms() == 0 || (t.created_ms() != 0 && t.created_ms() < target->created_ms())) {
      target->set_created_ms(t.created_ms());
    }
    for (const auto& p : t.partition_info()) {
      if (!led_by_address(t.name(), p.partition())) continue;
      for (auto& q : *target->mutable_partition_info()) {
        if (q.partition() != p.partition()) continue;
        q.set_start_offset(p.start_offset());
        q.set_end_offset(p.end_offset());
        q.set_bytes(p.bytes());
      }
    }
  }
  for (const auto& s : part.served()) *into.add_served() = s;
  std::sort(into.mutable_topics()->begin(), into.mutable_topics()->end(),
            [](const auto& a, const auto& b) { return a.name() < b.name(); });
}

}  // namespace txmq::protocol
