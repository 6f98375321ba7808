// Store unit tests of replication's part (replica.h): leader epochs, follower appends at the
// leader's offsets, truncation, and the epoch-boundary arithmetic of KIP-101.

#include <atomic>
#include <future>

#include "store_test_fixture.h"

namespace txmq::storage::test {
namespace {

using ::testing::ElementsAre;

class replica_test : public store_test {
 protected:
  std::uint64_t begin_epoch(const std::string& topic, std::uint32_t p, std::uint32_t epoch) {
    return value_of(call_sync<std::uint64_t>([&](auto done) { store_->begin_epoch(topic, p, epoch, done); }),
                    "begin_epoch");
  }
  result<std::uint64_t> replica_append(const std::string& topic, std::uint32_t p, std::uint64_t base,
                                       std::uint32_t epoch, std::vector<v1::Message> messages) {
    replica_append_request req;
    req.topic = topic;
    req.partition = p;
    req.base_offset = base;
    req.leader_epoch = epoch;
    req.messages = std::move(messages);
    req.auto_create_partitions = 2;
    return call_sync<std::uint64_t>([&](auto done) { store_->replica_append(std::move(req), done); });
  }
  std::uint64_t truncate(const std::string& topic, std::uint32_t p, std::uint64_t offset) {
    return value_of(call_sync<std::uint64_t>([&](auto done) { store_->truncate(topic, p, offset, done); }),
                    "truncate");
  }
  std::vector<epoch_entry> epochs(const std::string& topic, std::uint32_t p) {
    return value_of(store_->leader_epochs(topic, p), "leader_epochs");
  }
  static std::vector<std::string> bodies(const std::vector<v1::Message>& ms) {
    std::vector<std::string> out;
    for (auto& m : ms) out.push_back(m.body());
    return out;
  }
};

TEST(epoch_arithmetic, end_offset_for_epoch_follows_kip_101) {
  const std::vector<epoch_entry> e = {{1, 0}, {3, 10}, {4, 15}};
  EXPECT_EQ(end_offset_for_epoch(e, 1, 20), (epoch_end{1, 10}));
  EXPECT_EQ(end_offset_for_epoch(e, 2, 20), (epoch_end{1, 10}));  // unknown epoch: the greatest below
  EXPECT_EQ(end_offset_for_epoch(e, 3, 20), (epoch_end{3, 15}));
  EXPECT_EQ(end_offset_for_epoch(e, 4, 20), (epoch_end{4, 20}));
  EXPECT_EQ(end_offset_for_epoch(e, 9, 20), (epoch_end{4, 20}));
  EXPECT_EQ(end_offset_for_epoch({{5, 7}}, 2, 20), (epoch_end{std::nullopt, 7}));
  EXPECT_EQ(end_offset_for_epoch({}, 2, 20), (epoch_end{std::nullopt, 20}));
  EXPECT_EQ(epoch_at(e, 0), 1u);
  EXPECT_EQ(epoch_at(e, 12), 3u);
  EXPECT_EQ(epoch_at(e, 99), 4u);
}

// Replication's leader sends its followers what it has written before its own fsync
// (docs/cluster.md "Replication"): on_written runs once the group is written, and a read with
// `unsynced` returns the messages while a plain read (consumers, the high watermark) does not
// until the group is durable. The fsync is held in observe_fsync (after SyncWAL, before the
// high watermark is published), so the test sees the in-between state.
TEST_F(replica_test, an_unsynced_read_returns_what_is_written_before_the_high_watermark_moves) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> hold{false};
  tweak_options = [&](store_options& o) {
    o.observe_fsync = [&hold, released](std::chrono::nanoseconds) {
      if (hold) released.wait();
    };
  };
  reopen();
  create_topic("t", 1);
  append("t", {make_message("a")});
  hold = true;
  std::promise<void> written;
  std::promise<result<append_result>> done;
  append_request req;
  req.topic = "t";
  req.messages = {make_message("b"), make_message("c")};
  req.on_written = [&written] { written.set_value(); };
  store_->append(std::move(req), [&done](result<append_result> r) { done.set_value(std::move(r)); });
  ASSERT_EQ(written.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto plain = read("t", 0);
  EXPECT_THAT(bodies(plain.messages), ElementsAre("a"));
  EXPECT_EQ(plain.high_watermark, 1u);
  read_request unsynced;
  unsynced.topic = "t";
  unsynced.unsynced = true;
  auto ahead = value_of(store_->read(unsynced), "unsynced read");
  EXPECT_THAT(bodies(ahead.messages), ElementsAre("a", "b", "c"));
  EXPECT_EQ(ahead.high_watermark, 1u);
  EXPECT_EQ(ahead.written_end, 3u);
  hold = false;
  release.set_value();
  ASSERT_THAT(done.get_future().get(), is_ok());
  auto after = read("t", 0);
  EXPECT_THAT(bodies(after.messages), ElementsAre("a", "b", "c"));
  EXPECT_EQ(after.high_watermark, 3u);
  EXPECT_EQ(after.written_end, 3u);
}

TEST_F(replica_test, a_leader_records_its_epochs_at_its_next_offset_and_they_survive_a_reopen) {
  create_topic("t", 1);
  EXPECT_EQ(begin_epoch("t", 0, 1), 0u);
  append("t", {make_message("a"), make_message("b")});
  EXPECT_EQ(begin_epoch("t", 0, 3), 2u);
  EXPECT_EQ(begin_epoch("t", 0, 2), 2u);  // older: no entry
  EXPECT_THAT(epochs("t", 0), ElementsAre(epoch_entry{1, 0}, epoch_entry{3, 2}));
  reopen();
  EXPECT_THAT(epochs("t", 0), ElementsAre(epoch_entry{1, 0}, epoch_entry{3, 2}));
}

TEST_F(replica_test, a_follower_appends_at_the_leaders_offsets_with_ids_for_dedupe) {
  auto m0 = make_message("a", "k");
  auto m1 = make_message("b", "k");
  m0.set_publish_time_ms(1111);
  const auto id1 = protocol::uuid::from_bytes(m1.id()).value();
  // A follower's partition 1 gets offsets 0..1 whatever the key hashes to.
  ASSERT_THAT(replica_append("t", 1, 0, 2, {m0, m1}), is_ok());
  EXPECT_EQ(replica_append("t", 1, 2, 2, {make_message("c")}).value(), 3u);
  auto r = read("t", 1);
  EXPECT_THAT(bodies(r.messages), ElementsAre("a", "b", "c"));
  EXPECT_EQ(r.messages[0].publish_time_ms(), 1111);
  EXPECT_EQ(r.high_watermark, 3u);
  auto where = value_of(store_->find_id(id1), "find_id");
  ASSERT_TRUE(where.has_value());
  EXPECT_EQ(where->partition, 1u);
  EXPECT_EQ(where->offset, 1u);
  EXPECT_THAT(epochs("t", 1), ElementsAre(epoch_entry{2, 0}));
  // A leader append of the same id is a duplicate answered with the replicated position.
  auto again = append("t", {m1});
  EXPECT_THAT(again.positions, ElementsAre(position{1, 1, true}));
}

TEST_F(replica_test, a_follower_append_at_the_wrong_offset_or_with_an_older_epoch_writes_nothing) {
  ASSERT_THAT(replica_append("t", 0, 0, 5, {make_message("a")}), is_ok());
  EXPECT_THAT(replica_append("t", 0, 3, 5, {make_message("gap")}), fails_with(errc::invalid_argument));
  EXPECT_THAT(replica_append("t", 0, 0, 5, {make_message("overlap")}), fails_with(errc::invalid_argument));
  EXPECT_THAT(replica_append("t", 0, 1, 4, {make_message("stale")}), fails_with(errc::invalid_argument));
  ASSERT_THAT(replica_append("t", 0, 1, 6, {make_message("b")}), is_ok());
  EXPECT_THAT(bodies(read("t", 0).messages), ElementsAre("a", "b"));
  EXPECT_THAT(epochs("t", 0), ElementsAre(epoch_entry{5, 0}, epoch_entry{6, 1}));
}

TEST_F(replica_test, truncation_drops_messages_their_ids_and_later_epochs_even_inside_a_batch) {
  create_topic("t", 1);
  begin_epoch("t", 0, 1);
  std::vector<v1::Message> batch;
  for (int i = 0; i < 5; ++i) batch.push_back(make_message("m" + std::to_string(i)));
  const auto id3 = protocol::uuid::from_bytes(batch[3].id()).value();
  const auto id1 = protocol::uuid::from_bytes(batch[1].id()).value();
  auto kept_copy = batch[3];
  append("t", std::move(batch));  // one log record holding offsets 0..4
  begin_epoch("t", 0, 2);
  append("t", {make_message("m5"), make_message("m6")});
  EXPECT_THAT(epochs("t", 0), ElementsAre(epoch_entry{1, 0}, epoch_entry{2, 5}));

  EXPECT_EQ(truncate("t", 0, 3), 3u);
  auto r = read("t", 0);
  EXPECT_THAT(bodies(r.messages), ElementsAre("m0", "m1", "m2"));
  EXPECT_EQ(r.high_watermark, 3u);
  EXPECT_THAT(epochs("t", 0), ElementsAre(epoch_entry{1, 0}));
  EXPECT_FALSE(value_of(store_->find_id(id3), "find_id").has_value());
  EXPECT_TRUE(value_of(store_->find_id(id1), "find_id").has_value());
  // The next offsets continue from the truncation point, and a truncated id is new again.
  auto again = append("t", {kept_copy});
  EXPECT_THAT(again.positions, ElementsAre(position{0, 3, false}));
  // Truncating past the end changes nothing.
  EXPECT_EQ(truncate("t", 0, 100), 4u);
  reopen();
  r = read("t", 0);
  EXPECT_THAT(bodies(r.messages), ElementsAre("m0", "m1", "m2", "m3"));
  EXPECT_EQ(r.high_watermark, 4u);
  EXPECT_EQ(truncate("t", 0, 0), 0u);
  EXPECT_TRUE(read("t", 0).messages.empty());
  EXPECT_TRUE(epochs("t", 0).empty());
}

}  // namespace
}  // namespace txmq::storage::test
