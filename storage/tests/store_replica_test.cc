// Store unit tests of replication's part (replica.h): leader epochs, follower appends at the
// leader's offsets, truncation, and the epoch-boundary arithmetic of KIP-101.

#include <atomic>
#include <future>

#include <google/protobuf/unknown_field_set.h>

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

// The raw form (replica.h raw_messages): a leader reads its stored records without parsing
// them, a follower stores those bytes as they are. The follower ends with the same bytes, the
// same offsets and epochs, and every id in its dedupe index; a truncation inside a raw-appended
// record works as inside any other.
TEST_F(replica_test, a_raw_read_and_raw_append_copy_the_stored_bytes_ids_included) {
  create_topic("t", 1);
  begin_epoch("t", 0, 4);
  std::vector<v1::Message> batch;
  for (int i = 0; i < 6; ++i) {
    auto m = make_message("m" + std::to_string(i), i % 2 ? std::optional<std::string>("k") : std::nullopt);
    (*m.mutable_headers())["h" + std::to_string(i)] = "v";
    (*m.mutable_headers())["x"] = "y";
    batch.push_back(std::move(m));
  }
  std::vector<std::string> ids;
  for (const auto& m : batch) ids.push_back(m.id());
  append("t", std::move(batch));  // one record, offsets 0..5
  append("t", {make_message("m6"), make_message("m7")});
  read_request rr;
  rr.topic = "t";
  rr.from_offset = 2;  // inside the first record
  auto raw = value_of(store_->read_raw(rr), "read_raw");
  ASSERT_EQ(raw.runs.size(), 2u);
  EXPECT_EQ(raw.runs[0].base_offset, 2u);
  EXPECT_EQ(raw.runs[0].count, 4u);
  EXPECT_EQ(raw.runs[1].base_offset, 6u);
  EXPECT_EQ(raw.next_offset, 8u);
  // The parsed read of the same range: each entry is exactly a stored message's bytes.
  auto parsed = read("t", 0, 2);
  std::size_t i = 0;
  for (const auto& run : raw.runs) {
    std::string_view rest = run.entries;
    raw_entry e;
    while (!rest.empty()) {
      ASSERT_TRUE(next_raw_entry(rest, e, true));
      ASSERT_LT(i, parsed.messages.size());
      v1::Message m;
      ASSERT_TRUE(m.ParseFromArray(e.message.data(), static_cast<int>(e.message.size())));
      EXPECT_EQ(m.id(), parsed.messages[i].id());
      EXPECT_EQ(e.id, parsed.messages[i].id());
      EXPECT_EQ(e.body_bytes, parsed.messages[i].body().size());
      EXPECT_EQ(e.publish_time_ms, parsed.messages[i].publish_time_ms());
      ++i;
    }
  }
  EXPECT_EQ(i, 6u);

  // A follower (partition 1 of another topic here: the offsets are the leader's) takes them raw.
  rr.from_offset = 0;
  rr.max_bytes = 1;  // one message per read: many small raw appends
  std::uint64_t next = 0;
  std::string leader_bytes;
  while (next < 8) {
    rr.from_offset = next;
    auto one = value_of(store_->read_raw(rr), "read_raw");
    ASSERT_EQ(one.runs.size(), 1u);
    ASSERT_EQ(one.runs[0].count, 1u);
    leader_bytes += one.runs[0].entries;
    replica_append_request req;
    req.topic = "f";
    req.partition = 1;
    req.base_offset = one.runs[0].base_offset;
    req.leader_epoch = next < 4 ? 4 : 6;
    req.raw = std::move(one.runs[0]);
    req.auto_create_partitions = 2;
    next = value_of(call_sync<std::uint64_t>([&](auto done) { store_->replica_append(std::move(req), done); }),
                    "replica_append raw");
  }
  rr.topic = "f";
  rr.partition = 1;
  rr.from_offset = 0;
  rr.max_bytes = 1u << 20;
  std::string follower_bytes;
  for (auto& run : value_of(store_->read_raw(rr), "read_raw").runs) follower_bytes += run.entries;
  EXPECT_EQ(follower_bytes, leader_bytes);
  EXPECT_THAT(epochs("f", 1), ElementsAre(epoch_entry{4, 0}, epoch_entry{6, 4}));
  for (std::size_t k = 0; k < ids.size(); ++k) {
    auto where = value_of(store_->find_id(protocol::uuid::from_bytes(ids[k]).value()), "find_id");
    ASSERT_TRUE(where.has_value());
    // Stored twice (topic t and topic f): the dedupe entry points at the later copy.
    EXPECT_EQ(where->topic, "f");
    EXPECT_EQ(where->offset, k);
  }
  EXPECT_EQ(truncate("f", 1, 3), 3u);
  EXPECT_THAT(bodies(read("f", 1).messages), ElementsAre("m0", "m1", "m2"));
  EXPECT_FALSE(value_of(store_->find_id(protocol::uuid::from_bytes(ids[4]).value()), "find_id").has_value());
}

// A client's message may carry fields protobuf's parser keeps as unknown (a group, a known number
// with the wrong wire type): the leader stores them, so its raw read and the follower's check of
// each entry must pass them over as that parser does. The check refused both before the fix, and
// replication of the partition stopped there.
TEST_F(replica_test, a_raw_read_and_append_carry_messages_with_unknown_fields) {
  create_topic("t", 1);
  begin_epoch("t", 0, 1);
  v1::Message odd = make_message("body");
  auto* u = odd.GetReflection()->MutableUnknownFields(&odd);
  u->AddVarint(5, 3);              // the body's number, as a varint
  u->AddLengthDelimited(6, "x");   // publish_time_ms's number, length-delimited
  u->AddGroup(30)->AddGroup(1)->AddFixed64(2, 8);
  append("t", {odd, make_message("plain")});

  read_request rr;
  rr.topic = "t";
  auto raw = value_of(store_->read_raw(rr), "read_raw");
  ASSERT_EQ(raw.runs.size(), 1u);
  ASSERT_EQ(raw.runs[0].count, 2u);
  auto parsed = read("t", 0);
  std::string_view rest = raw.runs[0].entries;
  for (std::size_t i = 0; i < 2; ++i) {
    raw_entry e;
    ASSERT_TRUE(next_raw_entry(rest, e, true)) << i;
    EXPECT_EQ(e.id, parsed.messages[i].id());
    EXPECT_EQ(e.body_bytes, parsed.messages[i].body().size());
    EXPECT_EQ(e.publish_time_ms, parsed.messages[i].publish_time_ms());
  }
  EXPECT_TRUE(rest.empty());

  replica_append_request req;
  req.topic = "f";
  req.base_offset = 0;
  req.leader_epoch = 1;
  req.raw = std::move(raw.runs[0]);
  req.auto_create_partitions = 1;
  EXPECT_EQ(value_of(call_sync<std::uint64_t>([&](auto done) { store_->replica_append(std::move(req), done); }),
                     "replica_append raw"),
            2u);
  auto copied = read("f", 0);
  ASSERT_EQ(copied.messages.size(), 2u);
  EXPECT_EQ(copied.messages[0].body(), "body");
  EXPECT_EQ(copied.messages[0].GetReflection()->GetUnknownFields(copied.messages[0]).field_count(), 3);
}

TEST_F(replica_test, a_raw_append_with_a_malformed_entry_writes_nothing) {
  auto m = make_message("ok");
  m.set_publish_time_ms(5);
  std::string good = m.SerializeAsString();
  auto entry = [](const std::string& bytes) {
    std::string e(1, 0x12);
    e.push_back(static_cast<char>(bytes.size()));  // < 128 bytes here
    return e + bytes;
  };
  auto append_raw = [&](std::string entries, std::uint32_t count) {
    replica_append_request req;
    req.topic = "t";
    req.base_offset = 0;
    req.leader_epoch = 1;
    req.raw = raw_messages{0, count, std::move(entries)};
    req.auto_create_partitions = 1;
    return call_sync<std::uint64_t>([&](auto done) { store_->replica_append(std::move(req), done); });
  };
  v1::Message no_id;
  no_id.set_body("x");
  EXPECT_THAT(append_raw(entry(good) + entry(no_id.SerializeAsString()), 2), fails_with(errc::invalid_argument));
  EXPECT_THAT(append_raw(entry(good) + entry(good).substr(0, 5), 2), fails_with(errc::invalid_argument));  // cut short
  EXPECT_THAT(append_raw(entry(good) + "\x1a\x01x", 2), fails_with(errc::invalid_argument));  // not field 2
  EXPECT_THAT(append_raw(entry(good), 2), fails_with(errc::invalid_argument));  // count differs
  EXPECT_THAT(append_raw("", 0), fails_with(errc::invalid_argument));
  EXPECT_FALSE(store_->has_topic("t") && !read("t", 0).messages.empty());
  ASSERT_THAT(append_raw(entry(good), 1), is_ok());
  auto r = read("t", 0);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].body(), "ok");
  EXPECT_EQ(r.messages[0].publish_time_ms(), 5);
}

}  // namespace
}  // namespace txmq::storage::test
