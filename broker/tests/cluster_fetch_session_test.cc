// Fetch sessions (cluster_mode/fetch_session.h, docs/cluster.md "Replication"): one ReplicaFetch
// answer for all the partitions a follower follows from one leader. How the per-partition
// answers share the frame limit, and, with two real stores, that a follower taking session
// answers cut under a small limit ends with the leader's two partitions (same offsets, ids,
// bodies and leader epochs), both partitions moving in the same answers.

#include "cluster_mode/fetch_session.h"

#include <gtest/gtest.h>

#include "store_test_fixture.h"  // storage/tests: the store fixture

namespace txmq::broker::cluster_mode {
namespace {

// build() stands for a partition whose next messages take `want[i]` bytes whatever the room
// (the store returns at least one message): the packing decides what stays.
struct fake_partitions {
  std::vector<std::size_t> want;
  std::vector<std::size_t> built;  // which partitions were read
  std::vector<std::string> pack(std::size_t start, std::size_t budget) {
    return pack_partition_answers(
        want.size(), start, budget,
        [&](std::size_t i, std::size_t) {
          built.push_back(i);
          return std::string(want[i], 'a' + static_cast<char>(i));
        },
        [](std::size_t i) { return "skipped " + std::to_string(i); });
  }
};

std::size_t total(const std::vector<std::string>& answers) {
  std::size_t n = 0;
  for (const auto& a : answers) n += a.size() + k_partition_answer_overhead;
  return n;
}

TEST(fetch_session_answer, partitions_that_do_not_fit_are_answered_without_data_and_the_total_stays_under_the_limit) {
  fake_partitions f{{600, 600, 100}, {}};
  auto a = f.pack(0, 1000);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0], std::string(600, 'a'));
  EXPECT_EQ(a[1], "skipped 1");  // 600 more bytes would pass 1000
  EXPECT_EQ(a[2], std::string(100, 'c'));
  EXPECT_LE(total(a), 1000u);
}

TEST(fetch_session_answer, the_first_partition_visited_rotates_so_a_skipped_one_gets_its_turn) {
  fake_partitions f{{600, 600, 100}, {}};
  auto a = f.pack(1, 1000);  // visiting 1, 2, 0
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0], std::string(600, 'b'));
  EXPECT_EQ(a[1], std::string(100, 'c'));
  EXPECT_EQ(a[2], "skipped 0");
  EXPECT_LE(total(a), 1000u);
}

TEST(fetch_session_answer, the_first_partition_is_kept_whole_like_a_single_partition_answer_and_no_room_reads_nothing) {
  fake_partitions f{{2000, 10, 10}, {}};
  auto a = f.pack(0, 1000);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].size(), 2000u);  // one message larger than the room still travels
  EXPECT_EQ(a[1], "skipped 1");
  EXPECT_EQ(a[2], "skipped 2");
  EXPECT_EQ(f.built, std::vector<std::size_t>{0});  // no store read without room
}

TEST(fetch_session_answer, everything_travels_when_it_fits) {
  fake_partitions f{{100, 200, 300}, {}};
  auto a = f.pack(2, 1000);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].size(), 300u);
  EXPECT_EQ(a[1].size(), 100u);
  EXPECT_EQ(a[2].size(), 200u);
}

// Two stores, the leader's and a follower's: the leader's side of a session answer (session_read,
// batches_of, pack_partition_answers, as replication_leader.cc composes them) and the follower's
// (each entry parsed as a ReplicaFetchResponse, its batches appended at the leader's offsets).
class fetch_session_store_test : public storage::test::store_test {
 protected:
  void SetUp() override {
    store_test::SetUp();
    follower_dir_ = dir_.string() + "-follower";
    std::filesystem::remove_all(follower_dir_);
    auto o = options();
    o.dir = follower_dir_;
    auto r = storage::open_store(o);
    if (!r) throw std::runtime_error("open_store failed: " + r.error().to_string());
    follower_ = std::move(r).value();
  }
  void TearDown() override {
    if (follower_) follower_->close();
    follower_.reset();
    std::error_code ec;
    std::filesystem::remove_all(follower_dir_, ec);
    store_test::TearDown();
  }
  std::uint64_t follower_end(std::uint32_t p) {
    if (!follower_->has_topic("t")) return 0;
    storage::read_request r;
    r.topic = "t";
    r.partition = p;
    r.max_messages = 0;
    return storage::test::value_of(follower_->read(r), "read").high_watermark;
  }
  std::vector<v1::Message> all_of(storage::store& s, std::uint32_t p) {
    std::vector<v1::Message> out;
    std::uint64_t from = 0;
    for (;;) {
      storage::read_request r;
      r.topic = "t";
      r.partition = p;
      r.from_offset = from;
      r.max_messages = 50;
      auto got = storage::test::value_of(s.read(r), "read");
      if (got.messages.empty()) return out;
      for (auto& m : got.messages) out.push_back(std::move(m));
      from = got.next_offset;
    }
  }

  std::string follower_dir_;
  std::unique_ptr<storage::store> follower_;
};

TEST_F(fetch_session_store_test, a_follower_copies_two_partitions_through_session_answers_cut_under_the_limit) {
  create_topic("t", 2);
  // Epoch 3 from offset 0, epoch 5 from offset 20 on both partitions; 40 messages of ~700 bytes
  // each per partition.
  for (std::uint32_t epoch : {3u, 5u}) {
    for (std::uint32_t p = 0; p < 2; ++p) {
      storage::test::value_of(
          storage::call_sync<std::uint64_t>([&](auto done) { store_->begin_epoch("t", p, epoch, done); }), "begin_epoch");
      storage::append_request req;
      req.topic = "t";
      for (int i = 0; i < 20; ++i) {
        req.messages.push_back(storage::test::make_message(std::string(700, 'x') + std::to_string(p) + "-" +
                                                          std::to_string(epoch) + "-" + std::to_string(i)));
        req.partitions.push_back(p);
      }
      storage::test::value_of(try_append(std::move(req)), "append");
    }
  }
  std::vector<std::vector<storage::epoch_entry>> epochs;
  for (std::uint32_t p = 0; p < 2; ++p) epochs.push_back(storage::test::value_of(store_->leader_epochs("t", p), "epochs"));

  constexpr std::size_t budget = 8 * 1024;  // about 11 messages per answer in all
  std::size_t answers = 0;
  std::size_t answers_moving_both = 0;
  while (follower_end(0) < 40 || follower_end(1) < 40) {
    ASSERT_LT(++answers, 100u) << "the follower does not catch up";
    v1::ReplicaFetchRequest session;
    for (std::uint32_t p = 0; p < 2; ++p) {
      auto* sub = session.add_partition_fetches();
      sub->set_topic("t");
      sub->set_partition(p);
      sub->set_fetch_offset(follower_end(p));
    }
    auto fresh = [&](std::size_t i) {
      v1::ReplicaFetchResponse r;
      r.set_topic("t");
      r.set_partition(static_cast<std::uint32_t>(i));
      r.set_log_end(40);
      return r.SerializeAsString();
    };
    auto packed = pack_partition_answers(
        2, answers % 2, budget,
        [&](std::size_t i, std::size_t left) {
          auto read = storage::test::value_of(store_->read(session_read(session.partition_fetches(static_cast<int>(i)),
                                                                        4000, left)),
                                              "read");
          return batches_of(std::move(read.messages), epochs[i]).SerializeAsString() + fresh(i);
        },
        fresh);
    v1::ReplicaFetchResponse whole;
    for (auto& a : packed) whole.add_partition_answers(a);
    EXPECT_LE(whole.ByteSizeLong(), budget) << "answer " << answers;
    std::size_t moving = 0;
    for (const auto& bytes : whole.partition_answers()) {
      v1::ReplicaFetchResponse ans;
      ASSERT_TRUE(ans.ParseFromString(bytes));
      ASSERT_EQ(ans.topic(), "t");
      EXPECT_EQ(ans.log_end(), 40u);  // the fresh fields merged over the batches part
      if (ans.batches_size() > 0) ++moving;
      for (auto& b : *ans.mutable_batches()) {
        ASSERT_EQ(b.base_offset(), follower_end(ans.partition()));
        storage::replica_append_request ra;
        ra.topic = "t";
        ra.partition = ans.partition();
        ra.base_offset = b.base_offset();
        ra.leader_epoch = static_cast<std::uint32_t>(b.leader_epoch());
        for (auto& m : *b.mutable_messages()) ra.messages.push_back(std::move(m));
        ra.auto_create_partitions = 2;
        storage::test::value_of(
            storage::call_sync<std::uint64_t>([&](auto done) { follower_->replica_append(std::move(ra), done); }),
            "replica_append");
      }
    }
    if (moving == 2) ++answers_moving_both;
  }
  EXPECT_GT(answers_moving_both, 0u) << "no answer carried both partitions";
  for (std::uint32_t p = 0; p < 2; ++p) {
    auto lead = all_of(*store_, p);
    auto follow = all_of(*follower_, p);
    ASSERT_EQ(follow.size(), lead.size());
    for (std::size_t i = 0; i < lead.size(); ++i) {
      EXPECT_EQ(follow[i].id(), lead[i].id());
      EXPECT_EQ(follow[i].body(), lead[i].body());
      EXPECT_EQ(follow[i].offset(), lead[i].offset());
    }
    EXPECT_EQ(storage::test::value_of(follower_->leader_epochs("t", p), "epochs"), epochs[p]);
  }
}

// The stored records passed through (docs/cluster.md "Replication"): the leader's answers built
// from store::read_raw by encode_raw_batches parse, for a follower of the previous version, to
// exactly what batches_of made from a parsed read; the follower's split_partition_answer and a
// raw replica_append leave it with the leader's stored bytes, offsets, epochs and dedupe ids.
TEST_F(fetch_session_store_test, stored_records_pass_through_to_the_follower_byte_for_byte) {
  create_topic("t", 2);
  for (std::uint32_t epoch : {3u, 5u}) {
    for (std::uint32_t p = 0; p < 2; ++p) {
      storage::test::value_of(
          storage::call_sync<std::uint64_t>([&](auto done) { store_->begin_epoch("t", p, epoch, done); }), "begin_epoch");
      for (int round = 0; round < 2; ++round) {  // two records per epoch: answers span records
        storage::append_request req;
        req.topic = "t";
        for (int i = 0; i < 10; ++i) {
          auto m = storage::test::make_message(std::string(300, 'x') + std::to_string(i),
                                               i % 3 ? std::optional<std::string>("key") : std::nullopt);
          (*m.mutable_headers())["a"] = "1";
          (*m.mutable_headers())["b" + std::to_string(i)] = "2";
          req.messages.push_back(std::move(m));
          req.partitions.push_back(p);
        }
        storage::test::value_of(try_append(std::move(req)), "append");
      }
    }
  }
  std::vector<std::vector<storage::epoch_entry>> epochs;
  for (std::uint32_t p = 0; p < 2; ++p) epochs.push_back(storage::test::value_of(store_->leader_epochs("t", p), "epochs"));

  constexpr std::size_t budget = 6 * 1024;
  std::size_t answers = 0;
  while (follower_end(0) < 40 || follower_end(1) < 40) {
    ASSERT_LT(++answers, 100u) << "the follower does not catch up";
    v1::ReplicaFetchRequest session;
    for (std::uint32_t p = 0; p < 2; ++p) {
      auto* sub = session.add_partition_fetches();
      sub->set_topic("t");
      sub->set_partition(p);
      sub->set_fetch_offset(follower_end(p));
    }
    auto fresh = [&](std::size_t i) {
      v1::ReplicaFetchResponse r;
      r.set_topic("t");
      r.set_partition(static_cast<std::uint32_t>(i));
      r.set_log_end(40);
      r.set_partitions(2);
      return r.SerializeAsString();
    };
    auto packed = pack_partition_answers(
        2, answers % 2, budget,
        [&](std::size_t i, std::size_t left) -> std::string {
          const auto req = session_read(session.partition_fetches(static_cast<int>(i)), 4000, left);
          auto raw = storage::test::value_of(store_->read_raw(req), "read_raw");
          std::string encoded;
          EXPECT_TRUE(encode_raw_batches(raw.runs, epochs[i], encoded));
          // What a follower of the previous version parses: the same batches as batches_of's.
          // (read_raw counts encoded bytes against max_bytes, read() bodies and keys: the same
          // number of messages is asked.)
          auto same = req;
          same.max_messages = 0;
          for (const auto& run : raw.runs) same.max_messages += run.count;
          same.max_bytes = 1u << 30;
          auto parsed = storage::test::value_of(store_->read(same), "read");
          auto expected = batches_of(std::move(parsed.messages), epochs[i]);
          v1::ReplicaFetchResponse got;
          EXPECT_TRUE(got.ParseFromString(encoded));
          EXPECT_EQ(got.batches_size(), expected.batches_size());
          for (int b = 0; b < std::min(got.batches_size(), expected.batches_size()); ++b) {
            EXPECT_EQ(got.batches(b).leader_epoch(), expected.batches(b).leader_epoch());
            EXPECT_EQ(got.batches(b).base_offset(), expected.batches(b).base_offset());
            EXPECT_EQ(got.batches(b).messages_size(), expected.batches(b).messages_size());
            for (int m = 0; m < std::min(got.batches(b).messages_size(), expected.batches(b).messages_size()); ++m) {
              EXPECT_EQ(got.batches(b).messages(m).id(), expected.batches(b).messages(m).id());
              EXPECT_EQ(got.batches(b).messages(m).body(), expected.batches(b).messages(m).body());
              EXPECT_EQ(got.batches(b).messages(m).headers_size(), 2);
            }
          }
          return encoded + fresh(i);
        },
        fresh);
    v1::ReplicaFetchResponse whole;
    for (auto& a : packed) whole.add_partition_answers(a);
    EXPECT_LE(whole.ByteSizeLong(), budget) << "answer " << answers;
    for (const auto& bytes : whole.partition_answers()) {
      v1::ReplicaFetchResponse ans;
      std::vector<raw_batch> batches;
      ASSERT_TRUE(split_partition_answer(bytes, ans, batches));
      ASSERT_EQ(ans.topic(), "t");
      EXPECT_EQ(ans.log_end(), 40u);
      EXPECT_EQ(ans.batches_size(), 0);  // kept apart, as stored bytes
      for (auto& b : batches) {
        ASSERT_EQ(b.messages.base_offset, follower_end(ans.partition()));
        storage::replica_append_request ra;
        ra.topic = "t";
        ra.partition = ans.partition();
        ra.base_offset = b.messages.base_offset;
        ra.leader_epoch = static_cast<std::uint32_t>(b.leader_epoch);
        ra.raw = std::move(b.messages);
        ra.auto_create_partitions = ans.partitions();
        storage::test::value_of(
            storage::call_sync<std::uint64_t>([&](auto done) { follower_->replica_append(std::move(ra), done); }),
            "replica_append");
      }
    }
  }
  for (std::uint32_t p = 0; p < 2; ++p) {
    auto stored = [&](storage::store& s) {
      storage::read_request r;
      r.topic = "t";
      r.partition = p;
      r.max_messages = 1000;
      std::string bytes;
      for (auto& run : storage::test::value_of(s.read_raw(r), "read_raw").runs) bytes += run.entries;
      return bytes;
    };
    EXPECT_EQ(stored(*follower_), stored(*store_)) << "partition " << p;
    EXPECT_EQ(storage::test::value_of(follower_->leader_epochs("t", p), "epochs"), epochs[p]);
    for (const auto& m : all_of(*store_, p)) {
      auto where = storage::test::value_of(follower_->find_id(protocol::uuid::from_bytes(m.id()).value()), "find_id");
      ASSERT_TRUE(where.has_value());
      EXPECT_EQ(where->partition, p);
      EXPECT_EQ(where->offset, m.offset());
    }
  }
}

TEST(fetch_session_answer, a_malformed_answer_or_stored_entry_is_refused) {
  v1::ReplicaFetchResponse rest;
  std::vector<raw_batch> batches;
  EXPECT_FALSE(split_partition_answer(std::string("\x0a\x05\x08\x01", 4), rest, batches));  // batch cut short
  EXPECT_FALSE(split_partition_answer(std::string("\x0a\x02\x1a\x05", 4), rest, batches));  // message cut short
  std::string out;
  EXPECT_FALSE(encode_raw_batches({storage::raw_messages{0, 1, std::string("\x1a\x00", 2)}}, {}, out));
  EXPECT_TRUE(encode_raw_batches({}, {}, out));
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace txmq::broker::cluster_mode
