#include "txmq/client/cluster_admin.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "txmq/client/admin.h"
#include "txmq/client/leader_router.h"
#include "txmq/protocol/served.h"

namespace txmq::client {
namespace {

using protocol::cover_all_of;
using protocol::dead_letter_less;
using protocol::leader_plan;
using protocol::merge_group;
using protocol::merge_topics;
using protocol::partition_key;
using protocol::plan_of;
using protocol::take_served;
using clock = std::chrono::steady_clock;

bool all_covered(const leader_plan& plan, const std::set<partition_key>& covered) {
  return protocol::uncovered(plan, covered).empty();
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
    // A refusal that asking again cannot change (NOT_AUTHENTICATED, NOT_AUTHORIZED, ...): at once.
    if (!m && !m.error().retriable()) return m.error();
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
        protocol::sort_group_rows(it->second);
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
          protocol::sort_group_rows(g);
          out.push_back(std::move(g));
        }
        return out;
      });
}

namespace {

// Up to `limit` transactions from one connection, page after page; `served` of every page
// checked against the plan when there is one.
result<std::vector<v1::TxInfo>> tx_pages(connection& conn, v1::TxListRequest req, std::size_t limit,
                                         const leader_plan* plan, const std::string& address,
                                         std::set<partition_key>* covered, bool* consistent) {
  std::vector<v1::TxInfo> out;
  req.clear_after_txid();
  while (out.size() < limit) {
    req.set_limit(static_cast<std::uint32_t>(std::min<std::size_t>(limit - out.size(), 1000)));
    v1::Frame f;
    *f.mutable_tx_list() = req;
    auto r = conn.request(std::move(f));
    if (!r) return r.error();
    if (r.value().body_case() != v1::Frame::kTxListResponse) {
      return error(errc::unexpected_response, "the broker answered TxList with another frame");
    }
    const auto& page = r.value().tx_list_response();
    if (plan != nullptr && !take_served(*plan, address, page.served(), *covered)) *consistent = false;
    for (const auto& t : page.txs()) out.push_back(t);
    if (page.next_after_txid().empty() || page.txs().empty()) break;
    req.set_after_txid(page.next_after_txid());
  }
  return out;
}

}  // namespace

result<tx_listing> tx_list_all(const std::shared_ptr<connection>& conn, const v1::TxListRequest& request,
                               std::size_t limit, std::chrono::milliseconds deadline) {
  return with_leaders<tx_listing>(
      conn, deadline,
      [&]() -> result<tx_listing> {
        TXMQ_TRY(auto all, tx_pages(*conn, request, limit, nullptr, {}, nullptr, nullptr));
        return tx_listing{std::move(all), {}};
      },
      [&](leader_router& router, const leader_plan& plan, bool& complete) -> result<tx_listing> {
        std::set<partition_key> covered;
        bool consistent = true;
        std::map<std::string, v1::TxInfo> by_id;
        for (const auto& address : plan.addresses) {
          auto r = tx_pages(*router.connection_for(address), request, limit, &plan, address, &covered, &consistent);
          if (!r) return error(r.error().code, "node " + address + ": " + r.error().message);
          // A transaction listed twice (a leadership moved between two pages) is one.
          for (auto& t : r.value()) by_id.emplace(t.txid(), std::move(t));
        }
        complete = consistent && all_covered(plan, covered);
        tx_listing out;
        out.unavailable = plan.unavailable;
        for (auto& [id, t] : by_id) {
          if (out.txs.size() >= limit) break;
          out.txs.push_back(std::move(t));
        }
        return out;
      });
}

result<topic_listing> list_topics_all(const std::shared_ptr<connection>& conn, std::chrono::milliseconds deadline) {
  return with_leaders<topic_listing>(
      conn, deadline,
      [&]() -> result<topic_listing> {
        TXMQ_TRY(auto r, admin(conn).list_topics());
        topic_listing out;
        out.topics.assign(r.topics().begin(), r.topics().end());
        std::sort(out.topics.begin(), out.topics.end(), [](const auto& a, const auto& b) { return a.name() < b.name(); });
        return out;
      },
      [&](leader_router& router, const leader_plan& plan, bool& complete) -> result<topic_listing> {
        std::set<partition_key> covered;
        bool consistent = true;
        v1::ListTopicsResponse merged;
        // The node `conn` names lists every topic even when it leads none (and the cluster
        // may have no leader at all): asked first, so the listing never misses a topic.
        TXMQ_TRY(auto first, admin(conn).list_topics());
        merge_topics(plan, {}, first, merged);
        for (const auto& address : plan.addresses) {
          auto r = admin(router.connection_for(address)).list_topics();
          if (!r) return error(r.error().code, "node " + address + ": " + r.error().message);
          if (!take_served(plan, address, r.value().served(), covered)) consistent = false;
          merge_topics(plan, address, r.value(), merged);
        }
        complete = consistent && all_covered(plan, covered);
        topic_listing out;
        out.topics.assign(merged.topics().begin(), merged.topics().end());
        out.unavailable = plan.unavailable;
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
