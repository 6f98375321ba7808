// Read-process-write's residual windows in a cluster (issue 14, docs/cluster.md
// "Read-process-write"), each driven with raw requests against etcd and three txmq-broker
// processes (stopped by PID): an input topic and an output topic of one partition on 3 replicas.
//  - a hold survives a failover of the input partition's leader with its holder: the new
//    leader refuses the consumer's own Nack and Ack of the held delivery, and the transaction
//    then commits (its input acked, never redelivered). Before the holder was replicated the
//    new leader took the consumer's Nack, and the COMMIT was rolled back instead; after it was,
//    still so until store::load_group_partition (what a new leader reloads) read the holder;
//  - a transaction undecided for longer than the hold (TXMQ_TEST_ACK_HOLD_MS=3000 in the
//    brokers' environment, a test build's knob) keeps its input held: its home leader renews
//    the hold. Before, the hold ran out, the input came again and the COMMIT was rolled back;
//  - a COMMIT's ack answered UNKNOWN_GROUP by the input leader is asked again, never taken as
//    done (TXMQ_TEST_TX_ACK_UNKNOWN_GROUP in the brokers' environment, a test build's knob);
//  - a contrary COMMIT and ROLLBACK of one transaction sent at once: exactly one outcome wins,
//    the other request is answered TX_ALREADY_RESOLVED, and the input is then acked (COMMIT:
//    never redelivered, its output visible) or released (ROLLBACK: redelivered). Which is sent
//    first alternates; both are pipelined on one connection, and the first one read wins.
// Label `cluster`. The client library returns a broker's Error frame as an error: as_frame()
// gives it back as the frame, so that TX_ALREADY_RESOLVED or UNKNOWN_DELIVERY is read as an
// answer, not as a request that got none.
//
// Read-process-write throughput is measured by `txmq-bench tx --mode rpw` (scripts/bench-rpw.sh,
// docs/BENCHMARKS.md "Read-process-write"), not here.

#include <gtest/gtest.h>

#include <cstdlib>
#include <future>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "cluster_brokers.h"
#include "eventually.h"
#include "fault_support.h"
#include "tx_requests.h"

namespace txmq::test {
namespace {

using std::chrono::milliseconds;
using namespace std::chrono_literals;

constexpr const char* k_in = "hold-in";
constexpr const char* k_out = "hold-out";
constexpr const char* k_group = "holders";
constexpr const char* k_producers = "holders-tx";

class cluster_tx_rpw_windows_test : public ::testing::Test {
 protected:
  void start(std::vector<std::string> extra = {}) {
    if (!etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
    cluster_ = std::make_unique<cluster_brokers>();
    extra.insert(extra.end(), {"--ack-deadline", "2s", "--retry-schedule", "200ms", "--max-attempts", "1000"});
    cluster_->start(tx_test_flags(extra));
    std::string why;
    ASSERT_TRUE(cluster_->create_topic(k_in, 1, 3, why)) << why;
    ASSERT_TRUE(cluster_->create_topic(k_out, 1, 3, why)) << why;
  }
  std::string logs() const { return cluster_ ? cluster_->logs() : ""; }

  // client::connection hands a broker's Error frame back as an error: this gives it back as the
  // Error frame, so that a test reads every answer of the broker the same way. Failures on the
  // client's side (timeout, lost connection) stay errors.
  static client::result<v1::Frame> as_frame(client::result<v1::Frame> r) {
    if (r || r.error().code.category() != protocol::protocol_category()) return r;
    v1::Frame f;
    f.mutable_error()->set_code(static_cast<v1::ErrorCode>(r.error().code.value()));
    f.mutable_error()->set_message(r.error().message);
    return f;
  }

  // One request to the current leader of `topic`/0, retried (with a fresh Metadata) while the
  // answer is NOT_LEADER, a lost connection or not ready yet, for up to 30 s.
  v1::Frame to_leader(const std::string& topic, const v1::Frame& f) {
    v1::Frame last;
    const auto until = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < until) {
      auto v = cluster_->view(topic, 0);
      if (v && !v->leader_address.empty()) {
        if (auto c = cluster_->connect(v->leader_address, 20s)) {
          auto r = as_frame(c->request(f, 20s));
          if (r) {
            last = r.value();
            if (!last.has_error() || (last.error().code() != v1::NOT_LEADER &&
                                      last.error().code() != v1::NOT_ENOUGH_REPLICAS &&
                                      last.error().code() != v1::UNKNOWN_GROUP)) {
              return last;
            }
          }
        }
      }
      std::this_thread::sleep_for(200ms);  // a back-off between retries, not a synchronization
    }
    return last;
  }

  std::string produce_input(const std::string& key) {
    v1::Frame f;
    f.mutable_produce()->set_topic(k_in);
    auto m = make_message("in-" + key);
    m.set_key(key);
    const std::string id = m.id();
    *f.mutable_produce()->add_messages() = std::move(m);
    auto r = to_leader(k_in, f);
    EXPECT_TRUE(r.has_produce_response()) << r.ShortDebugString();
    return id;
  }

  // The deliveries one Fetch of group `group` hands out from `topic`'s leader.
  std::vector<v1::Message> fetch(const std::string& topic, const std::string& group, std::uint32_t wait_ms,
                                 std::uint32_t ack_deadline_ms = 0) {
    v1::Frame f;
    f.mutable_fetch()->set_group(group);
    f.mutable_fetch()->add_topics(topic);
    f.mutable_fetch()->set_max_wait_ms(wait_ms);
    f.mutable_fetch()->set_ack_deadline_ms(ack_deadline_ms);
    auto r = to_leader(topic, f);
    std::vector<v1::Message> out;
    if (!r.has_fetch_response()) return out;
    for (auto& d : r.fetch_response().deliveries()) out.push_back(d.message());
    return out;
  }

  // The transaction: one output (the input's id in a header) and the ack of `in`.
  v1::Frame prepare_rpw(const std::string& txid, const v1::Message& in, std::uint32_t tx_timeout_ms = 60'000) {
    auto out = tx_message(k_out, "out-" + in.body());
    out.set_key(in.key());
    // Header values are protobuf strings (UTF-8): the raw 16-byte id goes in as hex.
    (*out.mutable_headers())["input"] = hex(in.id());
    auto f = prepare_frame(txid, k_producers, {out});
    f.mutable_prepare()->set_tx_timeout_ms(tx_timeout_ms);
    f.mutable_prepare()->set_ack_group(k_group);
    auto* a = f.mutable_prepare()->add_acks();
    a->set_topic(in.topic());
    a->set_partition(in.partition());
    a->set_offset(in.offset());
    a->set_attempt(in.attempt());
    return to_leader(k_out, f);
  }

  static v1::Frame settle_frame(bool ack, const v1::Message& m) {
    v1::Frame f;
    auto* refs = ack ? f.mutable_ack()->mutable_refs() : f.mutable_nack()->mutable_refs();
    if (ack) {
      f.mutable_ack()->set_group(k_group);
    } else {
      f.mutable_nack()->set_group(k_group);
    }
    auto* r = refs->Add();
    r->set_topic(m.topic());
    r->set_partition(m.partition());
    r->set_offset(m.offset());
    r->set_attempt(m.attempt());
    return f;
  }

  // Whether the input (by id) is handed out again to group k_group within `window`.
  bool redelivered_within(const std::string& input_id, std::chrono::milliseconds window) {
    const auto until = std::chrono::steady_clock::now() + window;
    while (std::chrono::steady_clock::now() < until) {
      for (auto& m : fetch(k_in, k_group, 200, 60'000)) {
        if (m.id() == input_id) return true;
      }
    }
    return false;
  }

  static std::string hex(const std::string& raw) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (unsigned char c : raw) {
      out += digits[c >> 4];
      out += digits[c & 15];
    }
    return out;
  }
  static std::string unhex(const std::string& text) {
    std::string out;
    for (std::size_t i = 0; i + 1 < text.size(); i += 2) out += static_cast<char>(std::stoi(text.substr(i, 2), nullptr, 16));
    return out;
  }

  // The outputs visible to a reader group, by the input id in their header.
  std::map<std::string, int> outputs(std::chrono::milliseconds window) {
    std::map<std::string, int> seen;
    const auto until = std::chrono::steady_clock::now() + window;
    while (std::chrono::steady_clock::now() < until) {
      for (auto& m : fetch(k_out, "readers", 200, 60'000)) {
        auto h = m.headers().find("input");
        ++seen[h == m.headers().end() ? std::string() : unhex(h->second)];
      }
    }
    return seen;
  }

  std::unique_ptr<cluster_brokers> cluster_;
};

TEST_F(cluster_tx_rpw_windows_test, a_hold_refuses_the_consumers_own_settle_after_an_input_leader_failover) {
  ASSERT_NO_FATAL_FAILURE(start());
  const std::string input = produce_input("k1");
  auto got = fetch(k_in, k_group, 2000, 60'000);
  ASSERT_EQ(got.size(), 1u) << logs();
  const v1::Message in = got[0];
  const std::string txid = new_txid();
  auto p = prepare_rpw(txid, in);
  ASSERT_TRUE(p.has_prepare_response()) << p.ShortDebugString() << logs();

  // The input partition's leader goes; a new one takes over from the ISR.
  auto v = cluster_->view(k_in, 0);
  ASSERT_TRUE(v && v->leader > 0);
  const int victim = static_cast<int>(v->leader);
  cluster_->broker(victim).kill();
  ASSERT_TRUE(eventually([&] {
    auto now = cluster_->view(k_in, 0);
    return now && now->leader > 0 && now->leader != victim;
  }, 20s)) << logs();

  // The consumer's own Nack and Ack of the held delivery: refused by the new leader too.
  auto nack = to_leader(k_in, settle_frame(false, in));
  ASSERT_TRUE(nack.has_delivery_results()) << nack.ShortDebugString() << logs();
  EXPECT_EQ(nack.delivery_results().results(0), v1::UNKNOWN_DELIVERY) << "the new input leader took the consumer's "
                                                                        "Nack of a delivery its transaction holds";
  auto ack = to_leader(k_in, settle_frame(true, in));
  ASSERT_TRUE(ack.has_delivery_results()) << ack.ShortDebugString();
  EXPECT_EQ(ack.delivery_results().results(0), v1::UNKNOWN_DELIVERY);
  cluster_->broker(victim).start();

  // The transaction commits: its hold is still its own.
  auto end = to_leader(k_out, end_tx_frame(txid, v1::COMMIT));
  ASSERT_TRUE(end.has_end_tx_response()) << end.ShortDebugString() << logs();
  EXPECT_EQ(end.end_tx_response().state(), v1::COMMITTED);
  auto seen = outputs(4s);
  EXPECT_EQ(seen[input], 1) << "its output, once";
  EXPECT_FALSE(redelivered_within(input, 3s)) << "an input acked by a committed transaction came again";
}

TEST_F(cluster_tx_rpw_windows_test, an_undecided_transactions_hold_is_renewed_past_its_length) {
  // Every broker of this cluster holds inputs for 3 s (test builds only).
  ::setenv("TXMQ_TEST_ACK_HOLD_MS", "3000", 1);
  start();
  ::unsetenv("TXMQ_TEST_ACK_HOLD_MS");
  if (IsSkipped() || HasFatalFailure()) return;
  const std::string input = produce_input("k2");
  auto got = fetch(k_in, k_group, 2000, 2000);
  ASSERT_EQ(got.size(), 1u) << logs();
  const std::string txid = new_txid();
  auto p = prepare_rpw(txid, got[0]);
  ASSERT_TRUE(p.has_prepare_response()) << p.ShortDebugString() << logs();
  // Three hold lengths undecided: the input must stay with the transaction all along.
  EXPECT_FALSE(redelivered_within(input, 9s)) << "the hold ran out while its transaction was undecided";
  auto end = to_leader(k_out, end_tx_frame(txid, v1::COMMIT));
  ASSERT_TRUE(end.has_end_tx_response()) << end.ShortDebugString() << logs();
  EXPECT_EQ(end.end_tx_response().state(), v1::COMMITTED);
  EXPECT_EQ(outputs(3s)[input], 1);
  EXPECT_FALSE(redelivered_within(input, 2s));
}

// A COMMIT's ack answered UNKNOWN_GROUP by the input partition's leader (one that has not
// learned the group yet; TXMQ_TEST_TX_ACK_UNKNOWN_GROUP=3 makes the home leader's first three
// acks come back so, a test build's knob) is asked again, not taken as "settled already": the
// input is acked, so it never comes again once its hold (3 s here) has run out. Before, the
// follow-up was marked done with the ack unapplied, the hold ran out and the input was
// redelivered: its result would be published twice.
TEST_F(cluster_tx_rpw_windows_test, a_commits_ack_answered_unknown_group_is_asked_again_not_taken_as_done) {
  ::setenv("TXMQ_TEST_ACK_HOLD_MS", "3000", 1);
  ::setenv("TXMQ_TEST_TX_ACK_UNKNOWN_GROUP", "3", 1);
  start();
  ::unsetenv("TXMQ_TEST_ACK_HOLD_MS");
  ::unsetenv("TXMQ_TEST_TX_ACK_UNKNOWN_GROUP");
  if (IsSkipped() || HasFatalFailure()) return;
  const std::string input = produce_input("u1");
  auto got = fetch(k_in, k_group, 2000, 2000);
  ASSERT_EQ(got.size(), 1u) << logs();
  const std::string txid = new_txid();
  auto p = prepare_rpw(txid, got[0]);
  ASSERT_TRUE(p.has_prepare_response()) << p.ShortDebugString() << logs();
  auto end = to_leader(k_out, end_tx_frame(txid, v1::COMMIT));
  ASSERT_TRUE(end.has_end_tx_response()) << end.ShortDebugString() << logs();
  EXPECT_EQ(end.end_tx_response().state(), v1::COMMITTED);
  EXPECT_EQ(outputs(3s)[input], 1);
  // Past the hold twice over: an unapplied ack would let the input go back to the group.
  EXPECT_FALSE(redelivered_within(input, 7s)) << "the input of a committed transaction came again: its ack was "
                                                  "taken as done on UNKNOWN_GROUP\n" << logs();
  EXPECT_NE(logs().find("TXMQ_TEST_TX_ACK_UNKNOWN_GROUP: answering"), std::string::npos)
      << "the home leader never answered an ack UNKNOWN_GROUP: the case was not exercised\n" << logs();
}

TEST_F(cluster_tx_rpw_windows_test, a_contrary_commit_and_rollback_at_once_settle_the_input_once) {
  ASSERT_NO_FATAL_FAILURE(start());
  constexpr int k_rounds = 8;
  std::map<std::string, bool> committed;  // input id → its transaction committed
  int commits_won = 0, rollbacks_won = 0;
  // Inputs handed out again (an earlier round's released input may come with this round's
  // fetch: it counts, it is not lost to a 60 s deadline unseen).
  std::set<std::string> again;
  for (int i = 0; i < k_rounds; ++i) {
    const std::string input = produce_input("r" + std::to_string(i));
    std::vector<v1::Message> got;
    ASSERT_TRUE(eventually([&] {
      for (auto& m : fetch(k_in, k_group, 500, 60'000)) {
        if (m.id() == input) {
          got.push_back(m);
        } else {
          again.insert(m.id());
        }
      }
      return !got.empty();
    }, 20s)) << logs();
    const std::string txid = new_txid();
    auto p = prepare_rpw(txid, got[0]);
    ASSERT_TRUE(p.has_prepare_response()) << p.ShortDebugString() << logs();
    auto v = cluster_->view(k_out, 0);
    ASSERT_TRUE(v && !v->leader_address.empty());
    auto c = cluster_->connect(v->leader_address, 20s);
    ASSERT_TRUE(c);
    // Both pipelined on one connection, the first named by the round: the broker reads them in
    // that order, the second while the first is under way (a COMMIT's claim of its holds takes a
    // round trip to the input leader, a ROLLBACK's write an fsync and the home ISR).
    const bool commit_first = i % 2 == 0;
    std::promise<client::result<v1::Frame>> commit_answer, rollback_answer;
    auto send = [&c](v1::TxOutcome o, const std::string& tx, std::promise<client::result<v1::Frame>>& to) {
      c->async_request(end_tx_frame(tx, o), [&to](client::result<v1::Frame> r) { to.set_value(std::move(r)); }, 20s);
    };
    if (commit_first) {
      send(v1::COMMIT, txid, commit_answer);
      send(v1::ROLLBACK, txid, rollback_answer);
    } else {
      send(v1::ROLLBACK, txid, rollback_answer);
      send(v1::COMMIT, txid, commit_answer);
    }
    auto a = as_frame(commit_answer.get_future().get());
    auto b = as_frame(rollback_answer.get_future().get());
    ASSERT_TRUE(a && b) << "round " << i << ": COMMIT " << (a ? "answered" : a.error().to_string()) << ", ROLLBACK "
                        << (b ? "answered" : b.error().to_string()) << logs();
    const v1::Frame& commit = a.value();
    const v1::Frame& rollback = b.value();
    const bool commit_won = commit.has_end_tx_response() && commit.end_tx_response().state() == v1::COMMITTED &&
                            !commit.end_tx_response().already_resolved();
    const bool rollback_won = rollback.has_end_tx_response() &&
                              rollback.end_tx_response().state() == v1::ROLLED_BACK &&
                              !rollback.end_tx_response().already_resolved();
    EXPECT_NE(commit_won, rollback_won) << "round " << i << ": COMMIT answered " << commit.ShortDebugString()
                                        << ", ROLLBACK answered " << rollback.ShortDebugString();
    // One resolution at a time (tx_coordinator::take_turn): the request read first is resolved
    // first, the other waits for its outcome. Without it a ROLLBACK read during a COMMIT's claim
    // was written first, and the COMMIT the broker had read first lost.
    EXPECT_EQ(commit_won, commit_first) << "round " << i << ": the resolution read second won";
    const v1::Frame& loser = commit_won ? rollback : commit;
    EXPECT_TRUE(loser.has_error() && loser.error().code() == v1::TX_ALREADY_RESOLVED)
        << "round " << i << ": the other request answered " << loser.ShortDebugString();
    committed[input] = commit_won;
    std::cout << "round " << i << ": " << (commit_first ? "COMMIT" : "ROLLBACK") << " sent first, "
              << (commit_won ? "COMMIT" : "ROLLBACK") << " won; tx " << text(txid) << ", input " << text(input) << "\n";
    (commit_won ? commits_won : rollbacks_won) += 1;
  }
  // A rolled-back transaction's input comes again; a committed one's never, and its output shows.
  const auto until = std::chrono::steady_clock::now() + 10s;
  auto released_all = [&] {
    for (auto& [input, c] : committed) {
      if (!c && !again.contains(input)) return false;
    }
    return true;
  };
  while (std::chrono::steady_clock::now() < until && !released_all()) {
    for (auto& m : fetch(k_in, k_group, 200, 60'000)) again.insert(m.id());
  }
  for (auto& m : fetch(k_in, k_group, 1000, 60'000)) again.insert(m.id());
  auto seen = outputs(4s);
  std::cout << "CLUSTER-FIGURES rpw contrary: " << k_rounds << " rounds, COMMIT won " << commits_won
            << ", ROLLBACK won " << rollbacks_won << "\n";
  for (auto& [input, c] : committed) {
    if (c) {
      EXPECT_FALSE(again.contains(input)) << "a committed transaction's input came again: " << text(input) << logs();
      EXPECT_EQ(seen[input], 1) << "a committed transaction's output";
    } else {
      EXPECT_TRUE(again.contains(input)) << "a rolled-back transaction's input stayed held: " << text(input) << logs();
      EXPECT_EQ(seen[input], 0) << "a rolled-back transaction's output is visible";
    }
  }
}

}  // namespace
}  // namespace txmq::test
