// The delivery rules of docs/semantics.md §2, decided by group_tracker with an explicit clock, over a
// real (in-memory) store. It is one piece: every test drives one tracker through the same fixture
// (produce, fetch as the broker encodes it, persist, ack), and the rules build on each other.

#include "groups/group_tracker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "forwarding_store.h"

namespace txmq::broker {
namespace {

using namespace std::chrono_literals;
using protocol::errc;
using ::testing::ElementsAre;

// The in-memory store, whose raw reads can be given one entry whose key lies outside the read's
// bytes: what a corrupt record would make of the delivery code (it throws while building the
// delivery, as session 20's fuzz finding did).
class damaging_store final : public test::forwarding_store {
 public:
  using forwarding_store::forwarding_store;
  void damage_key_of(std::uint64_t offset) { damaged_ = offset; }
  void repair() { damaged_.reset(); }

  result<storage::read_result> read(const storage::read_request& r) const override {
    auto out = forwarding_store::read(r);
    if (out && damaged_) {
      for (auto& m : out.value().raw) {
        if (m.offset != *damaged_) continue;
        m.has_key = true;
        m.key_begin = out.value().raw_bytes.size() + 1;
      }
    }
    return out;
  }

 private:
  std::optional<std::uint64_t> damaged_;
};

class group_tracker_test : public ::testing::Test {
 protected:
  void SetUp() override {
    storage::store_options o;
    o.in_memory = true;
    auto s = storage::open_store(o);
    ASSERT_TRUE(s);
    auto damaging = std::make_unique<damaging_store>(std::move(s.value()));
    damage_ = damaging.get();
    store_ = std::move(damaging);
    storage::topic_config tc;
    tc.name = "t";
    tc.partitions = 1;
    ASSERT_TRUE(storage::call_sync<storage::topic_info>([&](auto d) { store_->create_topic(tc, d); }));
    settings_.ack_deadline = 1000ms;
    settings_.retry_schedule = {100ms, 200ms};
    settings_.max_attempts = 3;
  }

  void produce(std::vector<std::optional<std::string>> keys, std::int64_t deliver_at = 0) {
    storage::append_request req;
    req.topic = "t";
    for (auto& k : keys) {
      v1::Message m;
      m.set_id(std::string(protocol::uuid::make_v7().raw()));
      if (k) m.set_key(*k);
      m.set_body("b");
      m.set_deliver_at_ms(deliver_at);
      req.messages.push_back(std::move(m));
    }
    ASSERT_TRUE(storage::call_sync<storage::append_result>([&](auto d) { store_->append(req, d); }));
  }

  std::unique_ptr<group_tracker> make_tracker() {
    storage::group_info info{"g", {"t"}, 0};
    auto st = storage::call_sync<storage::group_state>(
        [&](auto d) { store_->ensure_group(info, storage::group_start::earliest, d); });
    EXPECT_TRUE(st);
    auto t = std::make_unique<group_tracker>("g", settings_, *store_, &visible_);
    EXPECT_TRUE(t->load(st.value(), now_));
    return t;
  }

  void persist(storage::group_update u) {
    u.group = "g";
    ASSERT_TRUE(storage::call_sync<storage::group_update_result>([&](auto d) { store_->update_group(u, d); }));
  }

  // A raw fetch, as the broker's Fetch handler makes it: its answer encoded from the stored
  // bytes (encode_fetch_response) and parsed back, so every rule below is checked on what a
  // client receives.
  std::vector<std::uint64_t> fetch_offsets(group_tracker& t, std::size_t max = 10) {
    auto r = t.fetch(1, {"t"}, max, 1u << 20, 0ms, now_, true);
    EXPECT_TRUE(r);
    persist(r.value().update);
    std::string bytes;
    encode_fetch_response(7, r.value(), bytes);
    v1::Frame answer;
    EXPECT_TRUE(answer.ParseFromString(bytes));
    EXPECT_EQ(answer.correlation_id(), 7u);
    EXPECT_TRUE(answer.has_fetch_response());
    EXPECT_EQ(answer.fetch_response().deliveries_size(), static_cast<int>(r.value().messages.size()));
    std::vector<std::uint64_t> out;
    last_.clear();
    for (auto& d : answer.fetch_response().deliveries()) {
      out.push_back(d.message().offset());
      last_.push_back({d.message(), d.deadline_ms()});
    }
    return out;
  }

  // The same group state fetched the old way: each message parsed, then encoded in a Frame.
  v1::Frame parsed_answer(group_tracker& t, const std::string& topic, std::uint64_t corr, std::size_t max) {
    auto r = t.fetch(1, {topic}, max, 1u << 20, 0ms, now_);
    EXPECT_TRUE(r);
    v1::Frame f;
    f.set_correlation_id(corr);
    auto* resp = f.mutable_fetch_response();
    for (auto& d : r.value().messages) {
      auto* del = resp->add_deliveries();
      *del->mutable_message() = std::move(d.message);
      del->set_deadline_ms(d.deadline_ms);
    }
    return f;
  }

  delivery_ref ref(std::uint64_t offset) { return {"t", 0, offset, 0}; }

  std::unique_ptr<storage::store> store_;
  damaging_store* damage_ = nullptr;  // store_, for the tests that corrupt a read
  delivery_settings settings_;
  std::int64_t now_ = 1'000'000;
  std::vector<delivered> last_;
  visible_end_fn visible_;  // unset: the log end (single-node mode)
};

TEST_F(group_tracker_test, delivers_in_offset_order_with_attempt_and_deadline) {
  produce({std::nullopt, std::nullopt, std::nullopt});
  auto t = make_tracker();
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0, 1, 2));
  for (auto& d : last_) {
    EXPECT_EQ(d.message.attempt(), 1u);
    EXPECT_EQ(d.deadline_ms, now_ + 1000);
    EXPECT_EQ(d.message.topic(), "t");
  }
  EXPECT_TRUE(fetch_offsets(*t).empty()) << "in-flight messages are not handed out twice";
}

TEST_F(group_tracker_test, a_raw_fetch_answers_what_parsing_each_message_would) {
  // Keys, headers, delays, redeliveries and a partition above 0, in two groups over the same
  // log: one fetched raw (stored bytes plus the delivery's fields), one parsed and re-encoded.
  storage::topic_config tc;
  tc.name = "t2";
  tc.partitions = 3;
  ASSERT_TRUE(storage::call_sync<storage::topic_info>([&](auto d) { store_->create_topic(tc, d); }));
  storage::append_request req;
  req.topic = "t2";
  for (int i = 0; i < 40; ++i) {
    v1::Message m;
    m.set_id(std::string(protocol::uuid::make_v7().raw()));
    if (i % 3) m.set_key("k" + std::to_string(i % 5));
    if (i % 4 == 0) (*m.mutable_headers())["h"] = "v" + std::to_string(i);
    m.set_body(std::string(static_cast<std::size_t>(i * 7), 'x'));
    if (i == 5) m.set_deliver_at_ms(now_ + 50);
    req.messages.push_back(std::move(m));
  }
  ASSERT_TRUE(storage::call_sync<storage::append_result>([&](auto d) { store_->append(req, d); }));
  std::vector<std::unique_ptr<group_tracker>> groups;
  for (std::string name : {"raw", "parsed"}) {
    storage::group_info info{name, {"t2"}, 0};
    auto st = storage::call_sync<storage::group_state>(
        [&](auto d) { store_->ensure_group(info, storage::group_start::earliest, d); });
    ASSERT_TRUE(st);
    groups.push_back(std::make_unique<group_tracker>(name, settings_, *store_, &visible_));
    ASSERT_TRUE(groups.back()->load(st.value(), now_));
  }
  int compared = 0;
  for (int round = 0; round < 6; ++round) {
    auto raw = groups[0]->fetch(1, {"t2"}, 7, 1u << 20, 0ms, now_, true);
    ASSERT_TRUE(raw);
    std::string bytes;
    encode_fetch_response(1000 + round, raw.value(), bytes);
    v1::Frame got;
    ASSERT_TRUE(got.ParseFromString(bytes));
    const v1::Frame want = parsed_answer(*groups[1], "t2", 1000 + round, 7);
    EXPECT_EQ(got.DebugString(), want.DebugString()) << "round " << round;
    // Partition 0 and offset 0 are written explicitly (2 bytes each), the parsed answer omits them.
    EXPECT_LE(bytes.size(), want.ByteSizeLong() + 4 * raw.value().messages.size());
    compared += got.fetch_response().deliveries_size();
    // Half of each answer is acked, the rest expires: the next rounds redeliver (attempt 2).
    std::vector<delivery_ref> acks;
    for (int i = 0; i < got.fetch_response().deliveries_size(); i += 2) {
      const auto& m = got.fetch_response().deliveries(i).message();
      acks.push_back({m.topic(), m.partition(), m.offset(), 0});
    }
    EXPECT_EQ(groups[0]->ack(acks, now_).results, groups[1]->ack(acks, now_).results);
    now_ += 1101;  // deadlines and the delay passed; retries due after 100 ms
    for (auto& g : groups) (void)g->expire(now_);
    now_ += 100;
  }
  EXPECT_GT(compared, 20);
}

TEST_F(group_tracker_test, a_key_is_never_in_flight_twice) {
  produce({"a", "a", "b", "a"});
  auto t = make_tracker();
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0, 2));
  EXPECT_TRUE(fetch_offsets(*t).empty());
  auto r = t->ack({ref(0)}, now_);
  EXPECT_THAT(r.results, ElementsAre(errc{}));
  persist(r.update);
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(1));
  persist(t->ack({ref(1)}, now_).update);
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(3));
}

TEST_F(group_tracker_test, ack_of_unknown_or_expired_delivery_is_refused) {
  produce({std::nullopt});
  auto t = make_tracker();
  fetch_offsets(*t);
  EXPECT_THAT(t->ack({ref(7)}, now_).results, ElementsAre(errc::unknown_delivery));
  EXPECT_THAT(t->ack({delivery_ref{"other", 0, 0, 0}}, now_).results, ElementsAre(errc::unknown_delivery));
  EXPECT_THAT(t->ack({delivery_ref{"t", 0, 0, 2}}, now_).results, ElementsAre(errc::unknown_delivery))
      << "attempt 2 was never delivered";
  EXPECT_THAT(t->ack({ref(0)}, now_ + 1001).results, ElementsAre(errc::unknown_delivery));
  EXPECT_THAT(t->ack({ref(0)}, now_ + 1000).results, ElementsAre(errc{}));
  EXPECT_THAT(t->ack({ref(0)}, now_).results, ElementsAre(errc::unknown_delivery)) << "acked twice";
}

TEST_F(group_tracker_test, an_expired_deadline_redelivers_on_the_retry_schedule) {
  produce({"k", "k"});
  auto t = make_tracker();
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0));
  now_ += 1001;  // deadline passed
  persist(t->expire(now_));
  EXPECT_TRUE(fetch_offsets(*t).empty()) << "waits 100ms (first retry) and holds the key";
  now_ += 100;
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0));
  EXPECT_EQ(last_[0].message.attempt(), 2u);
}

// A fetch that throws halfway (the broker's io thread logs it, counts an internal error and
// serves on) must not cost the group a message: the cursor passes a message only once it is
// pending, so the next fetch meets it again; the ones the lost answer held come back after
// their ack deadline, as any unanswered delivery does (at least once).
TEST_F(group_tracker_test, a_message_whose_delivery_throws_is_fetched_again_not_skipped) {
  produce({"a", "b", "c"});
  auto t = make_tracker();
  damage_->damage_key_of(1);
  EXPECT_THROW((void)t->fetch(1, {"t"}, 10, 1u << 20, 0ms, now_, true), std::out_of_range);
  damage_->repair();
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(1, 2));
  persist(t->ack({ref(1), ref(2)}, now_).update);
  now_ += 1001;  // offset 0's deadline passed: the answer that held it was never sent
  persist(t->expire(now_));
  now_ += 100;
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0));
}

TEST_F(group_tracker_test, nack_with_delay_and_with_the_schedule) {
  produce({std::nullopt, std::nullopt});
  auto t = make_tracker();
  fetch_offsets(*t);
  persist(t->nack({ref(0)}, 500ms, now_).update);
  persist(t->nack({ref(1)}, 0ms, now_).update);
  now_ += 100;
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(1));
  now_ += 400;
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0));
}

TEST_F(group_tracker_test, extend_moves_the_deadline) {
  produce({std::nullopt});
  auto t = make_tracker();
  fetch_offsets(*t);
  persist(t->extend({ref(0)}, 5000ms, now_ + 900).update);
  now_ += 2000;
  persist(t->expire(now_));
  EXPECT_TRUE(fetch_offsets(*t).empty());
  EXPECT_THAT(t->ack({ref(0)}, now_).results, ElementsAre(errc{}));
}

// Read-process-write in a cluster (docs/cluster.md "Transactions"): an extend carrying a txid
// holds the delivery for that transaction only.
TEST_F(group_tracker_test, a_transactions_hold_keeps_the_delivery_for_it_alone) {
  produce({std::nullopt});
  auto t = make_tracker();
  fetch_offsets(*t);
  const std::string a = "tx-a", b = "tx-b";
  EXPECT_THAT(t->extend({ref(0)}, 60'000ms, now_, a).results, ElementsAre(errc{}));
  EXPECT_THAT(t->extend({ref(0)}, 60'000ms, now_, b).results, ElementsAre(errc::unknown_delivery)) << "held by a";
  EXPECT_THAT(t->ack({ref(0)}, now_).results, ElementsAre(errc::unknown_delivery)) << "the consumer's own ack";
  EXPECT_THAT(t->nack({ref(0)}, 0ms, now_).results, ElementsAre(errc::unknown_delivery)) << "the consumer's own nack";
  EXPECT_THAT(t->ack({ref(0)}, now_, b).results, ElementsAre(errc::unknown_delivery)) << "another transaction";
  // The consumer's extend never shortens the hold: past its own deadline it is still in flight.
  EXPECT_THAT(t->extend({ref(0)}, 100ms, now_).results, ElementsAre(errc{}));
  now_ += 5000;
  persist(t->expire(now_));
  EXPECT_TRUE(fetch_offsets(*t).empty()) << "held: not redelivered";
  EXPECT_THAT(t->extend({ref(0)}, 60'000ms, now_, a).results, ElementsAre(errc{})) << "the holder again (a claim)";
  EXPECT_THAT(t->ack({ref(0)}, now_, a).results, ElementsAre(errc{}));
  EXPECT_THAT(t->ack({ref(0)}, now_, a).results, ElementsAre(errc::unknown_delivery)) << "done once";
}

TEST_F(group_tracker_test, a_release_by_the_holding_transaction_redelivers_to_anyone) {
  produce({std::nullopt});
  auto t = make_tracker();
  fetch_offsets(*t);
  EXPECT_THAT(t->extend({ref(0)}, 60'000ms, now_, "tx-b").results, ElementsAre(errc{}));
  EXPECT_THAT(t->nack({ref(0)}, 10ms, now_, "tx-b").results, ElementsAre(errc{}));
  now_ += 20;
  persist(t->expire(now_));
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0));
  EXPECT_THAT(t->ack({ref(0)}, now_).results, ElementsAre(errc{})) << "no longer held";
}

// Read-process-write in a cluster, issue 14 (docs/cluster.md "Read-process-write"): the holder
// is stored with the delivery record, so the tracker of a new leader (loaded from the store that
// replication filled) refuses the consumer's own Ack/Nack and another transaction's settle as
// the old one did. Before the holder was stored, the reloaded tracker took the consumer's Nack.
TEST_F(group_tracker_test, a_hold_survives_a_reload_from_the_store) {
  produce({std::nullopt});
  auto t = make_tracker();
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0));
  const std::string a(16, 'a'), b(16, 'b');  // txids: 16 bytes
  auto held = t->extend({ref(0)}, 60'000ms, now_, a);
  EXPECT_THAT(held.results, ElementsAre(errc{}));
  ASSERT_EQ(held.update.deliveries.size(), 1u);
  EXPECT_EQ(held.update.deliveries[0].holder, a);
  persist(held.update);
  // The consumer extends the held delivery: the record written keeps the holder.
  auto own = t->extend({ref(0)}, 100ms, now_);
  ASSERT_EQ(own.update.deliveries.size(), 1u);
  EXPECT_EQ(own.update.deliveries[0].holder, a);
  persist(own.update);

  auto st = store_->load_group("g");
  ASSERT_TRUE(st);
  auto again = std::make_unique<group_tracker>("g", settings_, *store_, &visible_);
  ASSERT_TRUE(again->load(st.value(), now_));
  EXPECT_THAT(again->ack({ref(0)}, now_).results, ElementsAre(errc::unknown_delivery)) << "the consumer's own ack";
  EXPECT_THAT(again->nack({ref(0)}, 0ms, now_).results, ElementsAre(errc::unknown_delivery)) << "the consumer's nack";
  EXPECT_THAT(again->ack({ref(0)}, now_, b).results, ElementsAre(errc::unknown_delivery)) << "another transaction";
  EXPECT_THAT(again->extend({ref(0)}, 60'000ms, now_, b).results, ElementsAre(errc::unknown_delivery));
  // A node that starts leading the partition reloads only it (load_for_leadership, then
  // reload_partition): the hold is refused there too.
  auto one = load_for_leadership(*store_, "g", "t", 0);
  ASSERT_TRUE(one);
  auto leader = std::make_unique<group_tracker>("g", settings_, *store_, &visible_);
  ASSERT_TRUE(leader->reload_partition(one.value(), "t", 0, now_));
  EXPECT_THAT(leader->nack({ref(0)}, 0ms, now_).results, ElementsAre(errc::unknown_delivery))
      << "the consumer's nack, on a new leader";
  EXPECT_THAT(leader->ack({ref(0)}, now_).results, ElementsAre(errc::unknown_delivery))
      << "the consumer's own ack, on a new leader";
  EXPECT_THAT(leader->ack({ref(0)}, now_, b).results, ElementsAre(errc::unknown_delivery))
      << "another transaction, on a new leader";
  auto by_holder = again->ack({ref(0)}, now_, a);
  EXPECT_THAT(by_holder.results, ElementsAre(errc{})) << "the holder settles it";
  persist(by_holder.update);

  // A released hold is stored without a holder: reloaded, the next delivery is anyone's.
  produce({std::nullopt});
  auto t2 = make_tracker();
  EXPECT_THAT(fetch_offsets(*t2), ElementsAre(1));
  persist(t2->extend({ref(1)}, 60'000ms, now_, a).update);
  auto rel = t2->nack({ref(1)}, 10ms, now_, a);
  ASSERT_EQ(rel.update.deliveries.size(), 1u);
  EXPECT_TRUE(rel.update.deliveries[0].holder.empty());
  persist(rel.update);
}

TEST_F(group_tracker_test, max_attempts_moves_the_message_to_dead_letters_and_frees_its_key) {
  produce({"k", "k"});
  auto t = make_tracker();
  std::size_t dead = 0;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    EXPECT_THAT(fetch_offsets(*t), ElementsAre(0)) << "attempt " << attempt;
    auto r = t->nack({ref(0)}, 10ms, now_);
    dead += r.update.dead.size();
    persist(r.update);
    now_ += 10;
  }
  EXPECT_EQ(dead, 1u);
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(1)) << "the key's next message is free";
  auto letters = store_->dead_letters("g", 10);
  ASSERT_TRUE(letters);
  ASSERT_EQ(letters.value().size(), 1u);
  EXPECT_EQ(letters.value()[0].offset, 0u);
  EXPECT_EQ(letters.value()[0].attempts, 3u);
}

TEST_F(group_tracker_test, delayed_message_waits_for_its_time_and_holds_its_key) {
  produce({"k"}, now_ + 5000);
  produce({"k", std::nullopt});
  auto t = make_tracker();
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(2));
  now_ += 5000;
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0));
  EXPECT_EQ(last_[0].message.attempt(), 1u);
}

TEST_F(group_tracker_test, state_is_rebuilt_from_the_store) {
  produce({"a", "a", "b", std::nullopt});
  {
    auto t = make_tracker();
    EXPECT_THAT(fetch_offsets(*t), ElementsAre(0, 2, 3));
    persist(t->ack({ref(3)}, now_).update);
  }
  auto t = make_tracker();
  // First deliveries leave no record: after a restart 0 and 2 go out again at once, flagged as
  // possible redeliveries; 1 stays held behind 0; 3 was acked and never comes back.
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0, 2));
  EXPECT_EQ(last_[0].message.attempt(), 2u);
  EXPECT_EQ(last_[1].message.attempt(), 2u);
  persist(t->ack({ref(0)}, now_).update);
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(1));
}

TEST_F(group_tracker_test, a_retry_keeps_its_attempt_count_across_a_restart) {
  produce({std::nullopt});
  {
    auto t = make_tracker();
    fetch_offsets(*t);
    persist(t->nack({ref(0)}, 50ms, now_).update);
    now_ += 50;
    EXPECT_THAT(fetch_offsets(*t), ElementsAre(0));
    EXPECT_EQ(last_[0].message.attempt(), 2u);
  }
  auto t = make_tracker();
  EXPECT_TRUE(fetch_offsets(*t).empty()) << "attempt 2 is in flight until its deadline";
  now_ += 1001;
  persist(t->expire(now_));
  now_ += 200;
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0));
  EXPECT_EQ(last_[0].message.attempt(), 3u);
}

TEST_F(group_tracker_test, a_fetch_stops_at_its_byte_budget_and_the_rest_follows) {
  produce({std::nullopt, std::nullopt, std::nullopt});
  auto t = make_tracker();
  // Room for less than one message: the first is handed out all the same, the others wait.
  auto r = t->fetch(1, {"t"}, 10, 1, 0ms, now_);
  ASSERT_TRUE(r);
  ASSERT_EQ(r.value().messages.size(), 1u);
  // The estimate bounds the delivery as a FetchResponse encodes it (the stored message is
  // estimated; the delivered one carries the fields the fetch set).
  v1::FetchResponse answer;
  auto* d = answer.add_deliveries();
  *d->mutable_message() = r.value().messages.front().message;
  d->set_deadline_ms(r.value().messages.front().deadline_ms);
  auto stored = r.value().messages.front().message;
  stored.clear_topic();
  stored.clear_partition();
  stored.clear_offset();
  stored.clear_attempt();
  EXPECT_GE(encoded_delivery_bytes(stored, "t"), answer.ByteSizeLong());
  persist(r.value().update);
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(1, 2));
}

TEST_F(group_tracker_test, an_ack_for_an_earlier_attempt_is_refused) {
  produce({std::nullopt});
  auto t = make_tracker();
  fetch_offsets(*t);
  now_ += 1001;
  persist(t->expire(now_));
  now_ += 100;
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0));
  EXPECT_THAT(t->ack({delivery_ref{"t", 0, 0, 1}}, now_).results, ElementsAre(errc::unknown_delivery));
  EXPECT_THAT(t->ack({delivery_ref{"t", 0, 0, 2}}, now_).results, ElementsAre(errc{}));
}

TEST_F(group_tracker_test, the_cursor_stops_at_the_unacked_window) {
  settings_.max_unacked_per_partition = 2;
  produce({std::nullopt, std::nullopt, std::nullopt});
  auto t = make_tracker();
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0, 1));
  persist(t->ack({ref(0)}, now_).update);
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(2));
}

TEST_F(group_tracker_test, redriven_dead_letters_are_delivered_again) {
  settings_.max_attempts = 1;
  produce({std::nullopt});
  auto t = make_tracker();
  fetch_offsets(*t);
  persist(t->nack({ref(0)}, 0ms, now_).update);
  EXPECT_TRUE(fetch_offsets(*t).empty());
  storage::group_update u;
  u.redrive.push_back({"t", 0, 0});
  persist(u);
  t->redriven({{"t", 0, 0}}, now_);
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0));
  EXPECT_EQ(last_[0].message.attempt(), 1u);
}

TEST_F(group_tracker_test, acked_elsewhere_forgets_delivered_messages_and_frees_their_key) {
  produce({"k", "k", std::nullopt});
  auto t = make_tracker();
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0, 2));
  EXPECT_TRUE(t->outstanding("t", 0, 0));
  EXPECT_FALSE(t->outstanding("t", 0, 1)) << "held behind its key, never delivered";
  EXPECT_FALSE(t->outstanding("t", 0, 9));
  EXPECT_FALSE(t->outstanding("other", 0, 0));
  // A transaction carrying the ack of offset 0 committed: the store applied it.
  t->acked_elsewhere({{"t", 0, 0}, {"t", 0, 42}});
  EXPECT_FALSE(t->outstanding("t", 0, 0));
  EXPECT_EQ(t->in_flight(), 1u);
  now_ += 5000;  // past every deadline: only 2 comes back, 0 never does
  persist(t->expire(now_));
  now_ += 100;
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(1, 2));
  EXPECT_EQ(last_[1].message.attempt(), 2u);
}

TEST_F(group_tracker_test, acked_elsewhere_also_settles_a_message_waiting_for_its_retry) {
  produce({std::nullopt, std::nullopt});
  auto t = make_tracker();
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0, 1));
  persist(t->nack({ref(0)}, 50ms, now_).update);
  EXPECT_TRUE(t->outstanding("t", 0, 0)) << "waiting for a retry is still outstanding";
  t->acked_elsewhere({{"t", 0, 0}});
  persist(t->ack({ref(1)}, now_).update);
  now_ += 1000;
  EXPECT_TRUE(fetch_offsets(*t).empty());
  auto s = t->summary();
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].acked, 2u);
}

}  // namespace
}  // namespace txmq::broker

namespace txmq::broker {
namespace {

// Cluster mode's bound (docs/cluster.md "Consumers"): nothing at or above the visible end is
// handed out, retries of a partition no longer led here neither, and the lag counts up to it.
TEST_F(group_tracker_test, delivers_nothing_at_or_above_the_visible_end) {
  std::uint64_t end = 2;
  visible_ = [&](const std::string& topic, std::uint32_t partition, std::uint64_t log_end) {
    EXPECT_EQ(topic, "t");
    EXPECT_EQ(partition, 0u);
    EXPECT_EQ(log_end, 5u);
    return end;
  };
  produce({std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt});
  auto t = make_tracker();
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0, 1)) << "offsets 2-4 are above the high watermark";
  EXPECT_FALSE(t->has_deliverable(now_));
  EXPECT_TRUE(fetch_offsets(*t).empty());
  EXPECT_EQ(t->lag(read_end_offsets(*store_, &visible_)), 2u);
  EXPECT_EQ(t->summary().at(0).end_offset, std::optional<std::uint64_t>(2));
  end = 4;
  EXPECT_TRUE(t->has_deliverable(now_)) << "the high watermark moved";
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(2, 3));
  // Nacked: a retry, but this node no longer leads the partition (visible end 0).
  auto n = t->nack({ref(0)}, 1ms, now_);
  persist(n.update);
  now_ += 10;
  persist(t->expire(now_));
  end = 0;
  EXPECT_FALSE(t->has_deliverable(now_));
  EXPECT_TRUE(fetch_offsets(*t).empty()) << "a retry of a partition led elsewhere is not handed out";
  EXPECT_EQ(t->lag(read_end_offsets(*store_, &visible_)), 0u) << "a follower reports no lag for it";
  end = 5;
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0, 4)) << "leading again: the retry first, then the rest";
}

TEST_F(group_tracker_test, an_unset_visible_end_is_the_log_end) {
  produce({std::nullopt, std::nullopt});
  auto t = make_tracker();
  EXPECT_TRUE(t->has_deliverable(now_));
  EXPECT_THAT(fetch_offsets(*t), ElementsAre(0, 1));
  EXPECT_EQ(t->summary().at(0).end_offset, std::nullopt);
}

// Cluster mode (docs/cluster.md "Consumer groups"): a node that starts following a partition
// drops it; one that starts leading it takes it again from what the store holds (there, what
// replication applied). Acks stay done, a nack's attempt count carries over, a message in
// flight at the drop comes again, and messages read ahead of the answer (taken from the log,
// held back) come as attempt 2: the store cannot tell them from delivered ones.
TEST_F(group_tracker_test, a_partition_dropped_and_reloaded_keeps_acks_and_attempts_from_the_store) {
  produce({std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt});
  auto t = make_tracker();
  EXPECT_THAT(fetch_offsets(*t, 3), ElementsAre(0u, 1u, 2u));
  auto a = t->ack({ref(0)}, now_);
  persist(a.update);
  auto n = t->nack({ref(1)}, 0ms, now_);  // waiting for its retry (100 ms), attempt 1
  persist(n.update);
  EXPECT_EQ(t->in_flight(), 1u);  // offset 2

  t->drop_partition("t", 0);
  EXPECT_EQ(t->in_flight(), 0u);
  EXPECT_TRUE(t->summary().empty());
  EXPECT_FALSE(t->has_deliverable(now_ + 10'000));
  EXPECT_TRUE(fetch_offsets(*t).empty());
  EXPECT_THAT(t->ack({ref(2)}, now_).results, ElementsAre(errc::unknown_delivery));

  auto st = store_->load_group("g");
  ASSERT_TRUE(st);
  ASSERT_TRUE(t->reload_partition(st.value(), "t", 0, now_));
  now_ += 150;  // past offset 1's retry time
  auto r = t->fetch(1, {"t"}, 10, 1u << 20, 0ms, now_);
  ASSERT_TRUE(r);
  std::vector<std::pair<std::uint64_t, std::uint32_t>> got;
  for (auto& d : r.value().messages) got.emplace_back(d.message.offset(), d.message.attempt());
  EXPECT_THAT(got, ElementsAre(std::pair<std::uint64_t, std::uint32_t>{1, 2}, std::pair<std::uint64_t, std::uint32_t>{2, 2},
                               std::pair<std::uint64_t, std::uint32_t>{3, 2}, std::pair<std::uint64_t, std::uint32_t>{4, 2}));
  // Reloading a partition the tracker holds replaces its state (the store's is newer).
  ASSERT_TRUE(t->reload_partition(st.value(), "t", 0, now_));
  EXPECT_EQ(t->in_flight(), 0u);
  ASSERT_EQ(t->summary().size(), 1u);
  EXPECT_EQ(t->summary()[0].acked, 1u);
}

}  // namespace
}  // namespace txmq::broker
