#pragma once

// The transaction requests of the wire protocol (docs/semantics.md §3) as the broker_tx tests send them
// through raw_client: frame builders, Prepare, TxShow, TxList, Fetch and CheckTx answers. A
// request that is not answered as expected is a test failure (gtest EXPECT/ASSERT inside), not
// an exception, so this is header-only: the support library does not link gtest.
// tx_support.h is the other kind: the producer tests' helpers, through the client libraries.

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "raw_client.h"
#include "txmq/protocol/message_id.h"

namespace txmq::test {

// A new txid (UUIDv4, 16 raw bytes), and a txid or message id as canonical text.
inline std::string new_txid() { return std::string(protocol::uuid::make_v4().raw()); }
inline std::string text(const std::string& raw) { return protocol::uuid::from_bytes(raw).value().to_string(); }

// A message for `topic` (make_message gives it a new id).
inline v1::Message tx_message(const std::string& topic, const std::string& body) {
  auto m = make_message(body);
  m.set_topic(topic);
  return m;
}

inline v1::Frame prepare_frame(const std::string& txid, const std::string& group, std::vector<v1::Message> messages) {
  v1::Frame f;
  auto* p = f.mutable_prepare();
  p->set_txid(txid);
  p->set_producer_group(group);
  for (auto& m : messages) *p->add_messages() = std::move(m);
  return f;
}

inline v1::Frame end_tx_frame(const std::string& txid, v1::TxOutcome outcome) {
  v1::Frame f;
  f.mutable_end_tx()->set_txid(txid);
  f.mutable_end_tx()->set_outcome(outcome);
  return f;
}

inline v1::Frame resolve_frame(const std::string& txid, v1::TxOutcome outcome) {
  v1::Frame f;
  f.mutable_tx_resolve()->set_txid(txid);
  f.mutable_tx_resolve()->set_outcome(outcome);
  return f;
}

// Prepares a new transaction; the answer must be a PrepareResponse that is not a duplicate.
inline void prepare(raw_client& c, const std::string& txid, const std::string& group, std::vector<v1::Message> messages) {
  auto r = c.request(prepare_frame(txid, group, std::move(messages)));
  ASSERT_TRUE(r.has_prepare_response()) << r.ShortDebugString();
  ASSERT_FALSE(r.prepare_response().duplicate());
}

// Prepares n one-message transactions of `group` on topic "t", pipelined under the broker's
// 1,024 requests in flight per connection, with UUIDv4 txids or (`v7`) the UUIDv7 ones of the
// txmq clients. Returns txid -> message id.
inline std::map<std::string, std::string> prepare_many(raw_client& c, int n, const std::string& group, bool v7 = false) {
  std::map<std::string, std::string> message_of;
  std::set<std::uint64_t> pending;
  for (int i = 0; i < n || !pending.empty();) {
    if (i < n && pending.size() < 1000) {
      auto tx = v7 ? std::string(protocol::uuid::make_v7().raw()) : new_txid();
      auto m = tx_message("t", "m" + std::to_string(i++));
      message_of[tx] = m.id();
      pending.insert(c.send(prepare_frame(tx, group, {m})));
      continue;
    }
    auto f = c.receive(std::chrono::seconds(30));
    if (!f || !f->has_prepare_response()) {
      ADD_FAILURE() << "Prepare " << i << " of " << n << " answered " << (f ? f->ShortDebugString() : "nothing");
      return message_of;
    }
    pending.erase(f->correlation_id());
  }
  return message_of;
}

// TxShow of one transaction.
inline v1::TxInfo show(raw_client& c, const std::string& txid) {
  v1::Frame f;
  f.mutable_tx_show()->set_txid(txid);
  auto r = c.request(f);
  EXPECT_TRUE(r.has_tx_info()) << r.ShortDebugString();
  return r.tx_info();
}

// TxList, every page: `state` (TX_STATE_UNSPECIFIED: the unresolved ones), or every state
// when `all`.
inline std::vector<v1::TxInfo> list(raw_client& c, v1::TxState state, bool all = false, std::uint32_t limit = 10'000) {
  std::vector<v1::TxInfo> out;
  std::string after;
  for (;;) {
    v1::Frame f;
    f.mutable_tx_list()->set_state(state);
    f.mutable_tx_list()->set_all_states(all);
    f.mutable_tx_list()->set_limit(limit);
    f.mutable_tx_list()->set_after_txid(after);
    auto r = c.request(f);
    EXPECT_TRUE(r.has_tx_list_response()) << r.ShortDebugString();
    for (auto& t : r.tx_list_response().txs()) out.push_back(t);
    after = r.tx_list_response().next_after_txid();
    if (after.empty()) return out;
  }
}

// One Fetch of `group` on `topic`, its long poll waiting up to wait_ms: the delivered messages.
inline std::vector<v1::Message> fetch(raw_client& c, const std::string& group, const std::string& topic, std::uint32_t max,
                                      std::uint32_t wait_ms, std::uint32_t ack_deadline_ms = 0) {
  auto r = c.request(fetch_frame(group, topic, max, wait_ms, ack_deadline_ms), std::chrono::seconds(30));
  EXPECT_TRUE(r.has_fetch_response()) << r.ShortDebugString();
  std::vector<v1::Message> out;
  for (auto& d : r.fetch_response().deliveries()) out.push_back(d.message());
  return out;
}

// Answers a CheckTx frame.
inline void answer(raw_client& c, const v1::Frame& check, v1::TxOutcome outcome) {
  v1::Frame f;
  f.set_correlation_id(check.correlation_id());
  f.mutable_check_tx_result()->set_txid(check.check_tx().txid());
  f.mutable_check_tx_result()->set_outcome(outcome);
  c.send(f);
}

// The sum of the end offsets of `topic`'s partitions: how many messages it ever stored.
inline std::uint64_t partition_end_sum(raw_client& c, const std::string& topic) {
  v1::Frame f;
  f.mutable_describe_topic()->set_name(topic);
  auto r = c.request(f);
  EXPECT_TRUE(r.has_topic_info()) << r.ShortDebugString();
  std::uint64_t sum = 0;
  for (auto& p : r.topic_info().partition_info()) sum += p.end_offset();
  return sum;
}

}  // namespace txmq::test
