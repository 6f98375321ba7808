#include "txmq/client/cluster_admin.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "txmq/client/admin.h"
#include "txmq/client/leader_router.h"

namespace txmq::client {
namespace {

using partition_key = std::pair<std::string, std::uint32_t>;
using clock = std::chrono::steady_clock;

struct expected_leader {
  std::string address;
  std::int64_t epoch = 0;
};

// Who should answer for each partition, by the Metadata; partitions without a leader apart.
struct leader_plan {
  std::map<partition_key, expected_leader> partitions;
  std::set<std::string> addresses;
  std::vector<partition_key> unavailable;
};

leader_plan plan_of(const v1::MetadataResponse& m) {
  leader_plan out;
  for (const auto& t : m.topics()) {
    for (const auto& p : t.partition_info()) {
      const partition_key k{t.name(), p.partition()};
      if (p.leader() < 0 || p.leader_address().empty()) {
        out.unavailable.push_back(k);
        continue;
      }
      out.partitions[k] = {p.leader_address(), p.leader_epoch()};
      out.addresses.insert(p.leader_address());
    }
  }
  return out;
}

// Marks in `covered` the partitions `address` served at the epoch the Metadata names; false when
// it served one the Metadata gives to another node or epoch (its view or the Metadata is stale).
bool take_served(const leader_plan& plan, const std::string& address,
                 const google::protobuf::RepeatedPtrField<v1::ServedPartition>& served, std::set<partition_key>& covered) {
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

// Every partition of `address` in the plan (it answered UNKNOWN_GROUP: nothing of the group there).
void cover_all_of(const leader_plan& plan, const std::string& address, std::set<partition_key>& covered) {
  for (const auto& [k, l] : plan.partitions) {
    if (l.address == address) covered.insert(k);
  }
}

bool all_covered(const leader_plan& plan, const std::set<partition_key>& covered) {
  return std::all_of(plan.partitions.begin(), plan.partitions.end(), [&](const auto& e) { return covered.contains(e.first); });
}

bool dead_letter_less(const v1::DeadLetter& a, const v1::DeadLetter& b) {
  const auto& x = a.message();
  const auto& y = b.message();
  if (x.topic() != y.topic()) return x.topic() < y.topic();
  if (x.partition() != y.partition()) return x.partition() < y.partition();
  return x.offset() < y.offset();
}

// Up to `limit` dead letters from one connection, page after page.
result<std::vector<v1::DeadLetter>> list_pages(std::shared_ptr<connection> conn, const std::string& group, std::size_t limit,
                                               const leader_plan* plan, const std::string& address,
                                               std::set<partition_key>* covered, bool* consistent) {
  admin a(std::move(conn));
  std::vector<v1::DeadLetter> out;
  v1::DlqListRequest req;
  req.set_group(group);
  while (out.size() < limit) {
    req.set_limit(static_cast<std::uint32_t>(std::min<std::size_t>(limit - out.size(), 1000)));
    auto r = a.dlq_list(req);
    if (!r) return r.error();
    if (plan != nullptr && !take_served(*plan, address, r.value().served(), *covered)) *consistent = false;
    for (auto& dl : *r.value().mutable_dead_letters()) out.push_back(std::move(dl));
    if (!r.value().more() || r.value().dead_letters_size() == 0) break;
    const auto& last = out.back().message();
    req.set_after_topic(last.topic());
    req.set_after_partition(last.partition());
    req.set_after_offset(last.offset());
  }
  return out;
}

std::chrono::milliseconds backoff(int round) { return std::chrono::milliseconds(std::min(100 * (round + 1), 1000)); }

// Joins the GroupInfos of one group from several nodes: each partition's row from the node
// that served it (its leader at the Metadata's epoch).
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
}

void sort_rows(v1::GroupInfo& g) {
  std::sort(g.mutable_partitions()->begin(), g.mutable_partitions()->end(), [](const auto& a, const auto& b) {
    return a.topic() != b.topic() ? a.topic() < b.topic() : a.partition() < b.partition();
  });
}

// Asks every leader for its groups (one group, or all), merged; nullopt-like error when the
// answers did not cover every partition (retry).
result<std::map<std::string, v1::GroupInfo>> groups_from_leaders(leader_router& router, const leader_plan& plan,
                                                                  const std::string* group, bool& complete) {
  std::map<std::string, v1::GroupInfo> out;
  std::set<partition_key> covered;
  complete = true;
  for (const auto& address : plan.addresses) {
    admin a(router.connection_for(address));
    std::vector<v1::GroupInfo> infos;
    if (group != nullptr) {
      auto r = a.describe_group(*group);
      if (!r && r.error().is(protocol::errc::unknown_group)) {
        cover_all_of(plan, address, covered);
        continue;
      }
      if (!r) return error(r.error().code, "node " + address + ": " + r.error().message);
      infos.push_back(std::move(r.value()));
    } else {
      auto r = a.list_groups();
      if (!r) return error(r.error().code, "node " + address + ": " + r.error().message);
      for (auto& g : *r.value().mutable_groups()) infos.push_back(std::move(g));
      // A node with no group at all names nothing served: nothing of any group is there.
      if (infos.empty()) cover_all_of(plan, address, covered);
    }
    for (const auto& info : infos) {
      if (!take_served(plan, address, info.served(), covered)) complete = false;
      merge_group(plan, address, info, out[info.name()]);
    }
  }
  if (!all_covered(plan, covered)) complete = false;
  return out;
}

// Runs `once` with fresh Metadata until it reports a complete answer or `deadline` passes;
// `single` against a single broker.
template <class T>
result<T> with_leaders(const std::shared_ptr<connection>& conn, std::chrono::milliseconds deadline,
                       const std::function<result<T>()>& single,
                       const std::function<result<T>(leader_router&, const leader_plan&, bool&)>& once) {
  const auto until = clock::now() + deadline;
  auto router = std::make_shared<leader_router>(conn);
  error last(protocol::errc::not_leader, "the partitions' leadership kept moving");
  for (int round = 0;; ++round) {
    if (round > 0) {
      if (clock::now() + backoff(round) > until) return last;
      std::this_thread::sleep_for(backoff(round));
    }
    auto m = router->refresh();
    if (!m && m.error().is(protocol::errc::unknown_request)) return single();
    if (!m) {
      last = m.error();
      continue;
    }
    if (!m.value().cluster()) return single();
    bool complete = false;
    auto r = once(*router, plan_of(m.value()), complete);
    if (!r) {
      if (r.error().is(protocol::errc::unknown_group)) return r;
      last = r.error();
      continue;
    }
    if (complete) return r;
  }
}

}  // namespace

result<dlq_listing> dlq_list_all(const std::shared_ptr<connection>& conn, const std::string& group, std::size_t limit,
                                 std::chrono::milliseconds deadline) {
  return with_leaders<dlq_listing>(
      conn, deadline,
      [&]() -> result<dlq_listing> {
        TXMQ_TRY(auto all, list_pages(conn, group, limit, nullptr, {}, nullptr, nullptr));
        return dlq_listing{std::move(all), {}};
      },
      [&](leader_router& router, const leader_plan& plan, bool& complete) -> result<dlq_listing> {
        std::set<partition_key> covered;
        bool consistent = true;
        bool known = false;
        dlq_listing out;
        out.unavailable = plan.unavailable;
        for (const auto& address : plan.addresses) {
          auto r = list_pages(router.connection_for(address), group, limit, &plan, address, &covered, &consistent);
          if (!r && r.error().is(protocol::errc::unknown_group)) {
            cover_all_of(plan, address, covered);
            continue;
          }
          if (!r) return error(r.error().code, "node " + address + ": " + r.error().message);
          known = true;
          for (auto& dl : r.value()) out.dead_letters.push_back(std::move(dl));
        }
        complete = consistent && all_covered(plan, covered);
        if (complete && !known && !plan.addresses.empty()) {
          return error(protocol::errc::unknown_group, "no consumer group '" + group + "'");
        }
        std::sort(out.dead_letters.begin(), out.dead_letters.end(), dead_letter_less);
        if (out.dead_letters.size() > limit) out.dead_letters.resize(limit);
        return out;
      });
}

result<dlq_redrive_result> dlq_redrive_all(const std::shared_ptr<connection>& conn, const std::string& group,
                                           std::chrono::milliseconds deadline) {
  const auto until = clock::now() + deadline;
  auto router = std::make_shared<leader_router>(conn);
  error last(protocol::errc::not_leader, "the partitions' leadership kept moving");
  dlq_redrive_result out;
  // Partitions redriven by their leader at the epoch the Metadata named; a node is asked again
  // only while one of its partitions is not (its redrive is idempotent: what it redrove is no
  // longer dead).
  std::set<partition_key> covered;
  bool known = false;
  for (int round = 0;; ++round) {
    if (round > 0) {
      if (clock::now() + backoff(round) > until) return last;
      std::this_thread::sleep_for(backoff(round));
    }
    auto m = router->refresh();
    if (!m && m.error().is(protocol::errc::unknown_request)) m = v1::MetadataResponse{};
    if (!m) {
      last = m.error();
      continue;
    }
    if (!m.value().cluster()) {
      auto r = admin(conn).dlq_redrive(group);
      if (!r) return r.error();
      out.redriven = r.value().redriven();
      return out;
    }
    const auto plan = plan_of(m.value());
    out.unavailable = plan.unavailable;
    // A partition covered under an older epoch stays covered: its redrive was on its ISR.
    std::set<std::string> ask;
    for (const auto& [k, l] : plan.partitions) {
      if (!covered.contains(k)) ask.insert(l.address);
    }
    bool failed = false;
    for (const auto& address : ask) {
      auto r = admin(router->connection_for(address)).dlq_redrive(group);
      if (!r && r.error().is(protocol::errc::unknown_group)) {
        cover_all_of(plan, address, covered);
        continue;
      }
      if (!r) {
        last = error(r.error().code, "node " + address + ": " + r.error().message);
        failed = true;
        continue;
      }
      known = true;
      out.redriven += r.value().redriven();
      (void)take_served(plan, address, r.value().served(), covered);
    }
    if (failed || !all_covered(plan, covered)) continue;
    if (!known && !plan.partitions.empty()) return error(protocol::errc::unknown_group, "no consumer group '" + group + "'");
    return out;
  }
}

result<v1::GroupInfo> describe_group_all(const std::shared_ptr<connection>& conn, const std::string& group,
                                         std::chrono::milliseconds deadline) {
  return with_leaders<v1::GroupInfo>(
      conn, deadline, [&] { return admin(conn).describe_group(group); },
      [&](leader_router& router, const leader_plan& plan, bool& complete) -> result<v1::GroupInfo> {
        TXMQ_TRY(auto all, groups_from_leaders(router, plan, &group, complete));
        auto it = all.find(group);
        if (it == all.end()) return error(protocol::errc::unknown_group, "no consumer group '" + group + "'");
        sort_rows(it->second);
        return std::move(it->second);
      });
}

result<std::vector<v1::GroupInfo>> list_groups_all(const std::shared_ptr<connection>& conn,
                                                   std::chrono::milliseconds deadline) {
  using out_t = std::vector<v1::GroupInfo>;
  return with_leaders<out_t>(
      conn, deadline,
      [&]() -> result<out_t> {
        TXMQ_TRY(auto r, admin(conn).list_groups());
        out_t out(r.groups().begin(), r.groups().end());
        std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name() < b.name(); });
        return out;
      },
      [&](leader_router& router, const leader_plan& plan, bool& complete) -> result<out_t> {
        TXMQ_TRY(auto all, groups_from_leaders(router, plan, nullptr, complete));
        out_t out;
        for (auto& [name, g] : all) {
          sort_rows(g);
          out.push_back(std::move(g));
        }
        return out;
      });
}

namespace {

// Up to `limit` attempts of one node's log, page after page.
result<std::vector<v1::WebhookAttempt>> attempt_pages(connection& conn, const std::string& id,
                                                      const std::string& message_id, std::size_t limit,
                                                      bool newest_first) {
  std::vector<v1::WebhookAttempt> out;
  v1::Frame f;
  auto* req = f.mutable_webhook_attempts();
  req->set_id(id);
  req->set_message_id(message_id);
  if (newest_first) req->set_after("-");
  while (out.size() < limit) {
    req->set_limit(static_cast<std::uint32_t>(std::min<std::size_t>(limit - out.size(), 1000)));
    auto r = conn.request(v1::Frame(f));
    if (!r) return r.error();
    if (r.value().body_case() != v1::Frame::kWebhookAttemptsResponse) {
      return error(errc::unexpected_response, "the broker answered WebhookAttempts with another frame");
    }
    auto& page = *r.value().mutable_webhook_attempts_response();
    for (auto& a : *page.mutable_attempts()) out.push_back(std::move(a));
    if (page.next_after().empty() || page.attempts_size() == 0) break;
    req->set_after(page.next_after());
  }
  return out;
}

}  // namespace

result<webhook_attempt_log> webhook_attempts_all(const std::shared_ptr<connection>& conn, const std::string& id,
                                                 const std::string& message_id, std::size_t limit, bool newest_first) {
  auto router = std::make_shared<leader_router>(conn);
  auto m = router->refresh();
  webhook_attempt_log out;
  if (!m || !m.value().cluster()) {
    TXMQ_TRY(out.attempts, attempt_pages(*conn, id, message_id, limit, newest_first));
    return out;
  }
  std::optional<error> last;
  bool any = false;
  for (const auto& node : m.value().nodes()) {
    auto r = attempt_pages(*router->connection_for(node.address()), id, message_id, limit, newest_first);
    if (!r) {
      out.unanswered.push_back(node.address() + ": " + r.error().to_string());
      last = r.error();
      continue;
    }
    any = true;
    for (auto& a : r.value()) out.attempts.push_back(std::move(a));
  }
  if (!any && last) return *last;
  const auto key = [](const v1::WebhookAttempt& a) {
    return std::make_tuple(a.time_ms(), a.topic(), a.partition(), a.offset(), a.attempt());
  };
  std::sort(out.attempts.begin(), out.attempts.end(), [&](const auto& a, const auto& b) {
    return newest_first ? key(b) < key(a) : key(a) < key(b);
  });
  if (out.attempts.size() > limit) out.attempts.resize(limit);
  return out;
}

}  // namespace txmq::client
