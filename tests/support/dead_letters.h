#pragma once

// A consumer group's dead letters as one broker lists them (DlqList, every page), for the
// cluster tests: offset → attempts. Empty when the broker does not answer.

#include <cstdint>
#include <map>
#include <string>

#include "cluster_brokers.h"
#include "txmq/client/admin.h"

namespace txmq::test {

inline std::map<std::uint64_t, std::uint32_t> dead_letters(const std::string& address, const std::string& group) {
  std::map<std::uint64_t, std::uint32_t> out;
  auto c = connect_to(address);
  if (!c) return out;
  client::admin admin(c);
  v1::DlqListRequest req;
  req.set_group(group);
  req.set_limit(1000);
  for (;;) {
    auto r = admin.dlq_list(req);
    if (!r) return out;
    for (const auto& d : r.value().dead_letters()) out[d.message().offset()] = d.attempts();
    if (!r.value().more() || r.value().dead_letters().empty()) return out;
    const auto& last = r.value().dead_letters().rbegin()->message();
    req.set_after_topic(last.topic());
    req.set_after_partition(last.partition());
    req.set_after_offset(last.offset());
  }
}

}  // namespace txmq::test
