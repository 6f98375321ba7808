// Store unit tests: append, read, dedupe.

#include <map>
#include <set>
#include <thread>

#include <google/protobuf/unknown_field_set.h>

#include "store_test_fixture.h"
#include "txmq/protocol/partitioner.h"

namespace txmq::storage::test {
namespace {

using ::testing::ElementsAre;
using ::testing::SizeIs;

// ---- Append and read ------------------------------------------------------------------------

TEST_F(store_test, append_assigns_dense_offsets_per_partition_from_zero) {
  create_topic("t", 1);
  auto first = append("t", {make_message("0"), make_message("1"), make_message("2")});
  EXPECT_THAT(first.positions, ElementsAre(position{0, 0, false}, position{0, 1, false}, position{0, 2, false}));
  auto second = append("t", {make_message("3"), make_message("4")});
  EXPECT_THAT(second.positions, ElementsAre(position{0, 3, false}, position{0, 4, false}));
  auto r = read("t", 0);
  EXPECT_THAT(offsets_of(r.messages), ElementsAre(0u, 1u, 2u, 3u, 4u));
  EXPECT_EQ(r.messages[3].body(), "3");
  EXPECT_EQ(r.high_watermark, 5u);
  EXPECT_EQ(r.start_offset, 0u);
  EXPECT_EQ(r.next_offset, 5u);
}

TEST_F(store_test, keyed_messages_go_to_their_keys_partition_in_order) {
  constexpr std::uint32_t parts = 4;
  create_topic("t", parts);
  const std::vector<std::string> keys = {"alice", "bob", "carol", "dave", "erin", "frank", "grace"};
  for (int round = 0; round < 3; ++round) {
    std::vector<v1::Message> batch;
    for (auto& k : keys) batch.push_back(make_message(k + "#" + std::to_string(round), k));
    auto res = append("t", std::move(batch));
    for (std::size_t i = 0; i < keys.size(); ++i) {
      EXPECT_EQ(res.positions[i].partition, protocol::partition_for_key(keys[i], parts)) << keys[i];
    }
  }
  std::map<std::string, std::vector<std::string>> seen;
  for (std::uint32_t p = 0; p < parts; ++p) {
    auto msgs = read_all("t", p);
    for (std::size_t i = 0; i < msgs.size(); ++i) {
      EXPECT_EQ(msgs[i].offset(), i) << "offsets not dense in partition " << p;
      EXPECT_EQ(protocol::partition_for_key(msgs[i].key(), parts), p);
      seen[msgs[i].key()].push_back(msgs[i].body());
    }
  }
  for (auto& k : keys) EXPECT_THAT(seen[k], ElementsAre(k + "#0", k + "#1", k + "#2"));
}

TEST_F(store_test, keyless_messages_spread_round_robin) {
  create_topic("t", 4);
  std::vector<v1::Message> batch;
  for (int i = 0; i < 8; ++i) batch.push_back(make_message(std::to_string(i)));
  auto res = append("t", std::move(batch));
  std::vector<int> per_partition(4, 0);
  for (auto& p : res.positions) per_partition.at(p.partition)++;
  EXPECT_THAT(per_partition, ElementsAre(2, 2, 2, 2));
  for (std::uint32_t p = 0; p < 4; ++p) EXPECT_EQ(partition_of("t", p).next_offset, 2u);
}

// Cluster mode: the broker picks the partitions (those it leads), the store keeps its choice
// even against the key's hash, and refuses a partition the topic does not have.
TEST_F(store_test, append_uses_the_callers_partitions_when_given) {
  create_topic("t", 4);
  append_request req{"t", {make_message("a", "alice"), make_message("b"), make_message("c", "alice")}, std::nullopt, true};
  const std::uint32_t other = (protocol::partition_for_key("alice", 4) + 1) % 4;
  req.partitions = {other, 3, other};
  auto r = try_append(std::move(req));
  ASSERT_THAT(r, is_ok());
  EXPECT_THAT(r.value().positions, ElementsAre(position{other, 0, false}, position{3, other == 3 ? 1u : 0u, false},
                                               position{other, other == 3 ? 2u : 1u, false}));

  append_request bad{"t", {make_message("x")}, std::nullopt, true};
  bad.partitions = {4};
  EXPECT_THAT(try_append(std::move(bad)), fails_with(errc::unknown_partition));
  append_request mismatched{"t", {make_message("x"), make_message("y")}, std::nullopt, true};
  mismatched.partitions = {0};
  EXPECT_THAT(try_append(std::move(mismatched)), fails_with(errc::invalid_argument));
}

TEST_F(store_test, read_can_start_inside_a_stored_batch) {
  create_topic("t", 1);
  std::vector<v1::Message> batch;
  for (int i = 0; i < 10; ++i) batch.push_back(make_message("m" + std::to_string(i)));
  append("t", std::move(batch));  // one request: one stored batch
  auto r = read("t", 0, 4, 3);
  EXPECT_THAT(offsets_of(r.messages), ElementsAre(4u, 5u, 6u));
  EXPECT_EQ(r.messages[0].body(), "m4");
  EXPECT_EQ(r.next_offset, 7u);
  r = read("t", 0, r.next_offset, 100);
  EXPECT_THAT(offsets_of(r.messages), ElementsAre(7u, 8u, 9u));
  EXPECT_EQ(r.next_offset, 10u);
}

TEST_F(store_test, read_honours_max_messages_across_batches) {
  create_topic("t", 1);
  for (int b = 0; b < 3; ++b) append("t", {make_message("a"), make_message("b"), make_message("c"), make_message("d")});
  auto r = read("t", 0, 2, 5);
  EXPECT_THAT(offsets_of(r.messages), ElementsAre(2u, 3u, 4u, 5u, 6u));
  EXPECT_EQ(r.next_offset, 7u);
  EXPECT_EQ(r.high_watermark, 12u);
}

TEST_F(store_test, read_honours_max_bytes_but_returns_at_least_one_message) {
  create_topic("t", 1);
  append("t", {make_message(std::string(1000, 'a')), make_message(std::string(1000, 'b')),
               make_message(std::string(1000, 'c'))});
  auto r = read("t", 0, 0, 500, 2500);
  EXPECT_THAT(offsets_of(r.messages), ElementsAre(0u, 1u));
  EXPECT_EQ(r.next_offset, 2u);
  r = read("t", 0, 1, 500, 10);
  EXPECT_THAT(offsets_of(r.messages), ElementsAre(1u));
  EXPECT_EQ(r.next_offset, 2u);
}

TEST_F(store_test, read_past_the_end_is_empty) {
  create_topic("t", 2);
  append("t", {make_message("x", "k"), make_message("y", "k"), make_message("z", "k")});
  const std::uint32_t p = protocol::partition_for_key("k", 2);
  auto r = read("t", p, 3);
  EXPECT_TRUE(r.messages.empty());
  EXPECT_EQ(r.next_offset, 3u);
  EXPECT_EQ(r.high_watermark, 3u);
  EXPECT_EQ(r.start_offset, 0u);
  EXPECT_TRUE(read("t", p, 100).messages.empty());
  auto other = read("t", 1 - p, 0);
  EXPECT_TRUE(other.messages.empty());
  EXPECT_EQ(other.high_watermark, 0u);
}

TEST_F(store_test, read_of_unknown_topic_or_partition_fails) {
  create_topic("t", 2);
  EXPECT_THAT(store_->read({"nope", 0, 0, 10, 1024}), fails_with(errc::unknown_topic));
  EXPECT_THAT(store_->read({"t", 2, 0, 10, 1024}), fails_with(errc::unknown_partition));
}

TEST_F(store_test, message_fields_round_trip) {
  create_topic("t", 1);
  constexpr char raw_body[] = "bin\0ary\xff\x01 body";
  v1::Message m = make_message(std::string(raw_body, sizeof raw_body - 1), "the-key");
  (*m.mutable_headers())["content-type"] = "application/octet-stream";
  (*m.mutable_headers())["trace"] = "abc";
  m.set_deliver_at_ms(k_start_ms + 60'000);
  m.set_partition(7);  // broker-owned fields are ignored on append
  m.set_offset(99);
  m.set_attempt(3);
  v1::Message stamped = make_message("stamped");
  stamped.set_publish_time_ms(12345);
  advance(42);
  append("t", {m, stamped});

  auto r = read("t", 0);
  ASSERT_THAT(r.messages, SizeIs(2));
  const auto& got = r.messages[0];
  EXPECT_EQ(got.id(), m.id());
  EXPECT_EQ(got.topic(), "t");
  EXPECT_EQ(got.partition(), 0u);
  EXPECT_EQ(got.offset(), 0u);
  EXPECT_EQ(got.key(), "the-key");
  EXPECT_EQ(got.body(), m.body());
  EXPECT_EQ(got.body().size(), sizeof raw_body - 1);
  EXPECT_EQ(got.headers().size(), 2u);
  EXPECT_EQ(got.headers().at("content-type"), "application/octet-stream");
  EXPECT_EQ(got.headers().at("trace"), "abc");
  EXPECT_EQ(got.deliver_at_ms(), k_start_ms + 60'000);
  EXPECT_EQ(got.publish_time_ms(), k_start_ms + 42);
  EXPECT_TRUE(got.txid().empty());
  EXPECT_FALSE(r.messages[1].has_key());
  EXPECT_EQ(r.messages[1].publish_time_ms(), 12345);

  reopen();
  auto again = read("t", 0);
  ASSERT_THAT(again.messages, SizeIs(2));
  const auto& back = again.messages[0];
  EXPECT_EQ(back.id(), got.id());
  EXPECT_EQ(back.key(), got.key());
  EXPECT_EQ(back.body(), got.body());
  EXPECT_EQ(back.headers().size(), 2u);
  EXPECT_EQ(back.headers().at("content-type"), "application/octet-stream");
  EXPECT_EQ(back.headers().at("trace"), "abc");
  EXPECT_EQ(back.deliver_at_ms(), got.deliver_at_ms());
  EXPECT_EQ(back.publish_time_ms(), got.publish_time_ms());
  EXPECT_EQ(back.offset(), 0u);
}

// Protobuf's parser keeps a field it does not know, or one of a known number but the wrong wire
// type, and serializes it again: a client's message is stored with them. The raw read that
// delivery uses must see what that parser sees. Before the fix a varint field 3 was taken as the
// key at a garbage position (the broker then threw from std::string::substr in a fetch: the
// frame_dispatch fuzzer's finding), and a group made the whole read fail as corruption.
TEST_F(store_test, a_raw_read_sees_a_message_with_unknown_fields_as_protobuf_parses_it) {
  // Each topic's raw read against the parsed read of the same messages.
  auto same_as_parsed = [&](const std::string& topic, const std::vector<int>& unknown_counts) {
    read_request rr;
    rr.topic = topic;
    rr.raw = true;
    auto raw = value_of(store_->read(rr), "raw read");
    auto parsed = read(topic, 0);
    ASSERT_EQ(raw.raw.size(), unknown_counts.size());
    ASSERT_EQ(parsed.messages.size(), unknown_counts.size());
    for (std::size_t i = 0; i < unknown_counts.size(); ++i) {
      SCOPED_TRACE(topic + " " + std::to_string(i));
      const auto& r = raw.raw[i];
      const auto& m = parsed.messages[i];
      EXPECT_EQ(r.offset, i);
      EXPECT_EQ(r.has_key, m.has_key());
      if (r.has_key) {
        EXPECT_EQ(raw.raw_bytes.substr(r.key_begin, r.key_size), m.key());
      }
      EXPECT_EQ(r.body_bytes, m.body().size());
      EXPECT_EQ(r.publish_time_ms, m.publish_time_ms());
      EXPECT_EQ(r.deliver_at_ms, m.deliver_at_ms());
      v1::Message again;
      ASSERT_TRUE(again.ParseFromString(raw.raw_bytes.substr(r.begin, r.size)));
      EXPECT_EQ(again.id(), m.id());
      EXPECT_EQ(again.GetReflection()->GetUnknownFields(again).field_count(), unknown_counts[i]);
    }
  };

  // Known numbers with the wrong wire type (the fuzzer's finding: a varint field 3).
  create_topic("wrong-types", 1);
  v1::Message keyless = make_message("a");
  auto* u = keyless.GetReflection()->MutableUnknownFields(&keyless);
  u->AddVarint(3, 7);              // the key's number, as a varint
  u->AddFixed32(5, 1);             // the body's number, as fixed32
  u->AddLengthDelimited(7, "zz");  // deliver_at_ms's number, length-delimited
  v1::Message keyed = make_message("bb", "k");
  keyed.set_deliver_at_ms(k_start_ms - 1);
  keyed.GetReflection()->MutableUnknownFields(&keyed)->AddVarint(3, 1);  // after the real key
  append("wrong-types", {keyless, keyed});
  same_as_parsed("wrong-types", {3, 1});

  // Groups, nested, one of them under the key's number.
  create_topic("groups", 1);
  v1::Message grouped = make_message("c", "k2");
  auto* g = grouped.GetReflection()->MutableUnknownFields(&grouped)->AddGroup(20);
  g->AddVarint(1, 5);
  g->AddGroup(2)->AddLengthDelimited(3, "x");
  grouped.GetReflection()->MutableUnknownFields(&grouped)->AddGroup(3)->AddVarint(1, 9);
  append("groups", {grouped, make_message("d")});
  same_as_parsed("groups", {2, 0});
}

TEST_F(store_test, append_to_unknown_topic_fails_unless_auto_create_is_asked) {
  EXPECT_THAT(try_append({"missing", {make_message("x")}, std::nullopt, true}), fails_with(errc::unknown_topic));
  EXPECT_FALSE(store_->topic("missing"));

  auto r = try_append({"missing", {make_message("x")}, 3u, true});
  ASSERT_THAT(r, is_ok());
  auto t = store_->topic("missing");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->config.partitions, 3u);
  EXPECT_EQ(total_messages("missing"), 1u);
}

TEST_F(store_test, append_with_a_bad_id_length_writes_nothing) {
  create_topic("t", 1);
  v1::Message good = make_message("good");
  for (std::string bad_id : {std::string(), std::string(15, 'x'), std::string(17, 'x')}) {
    v1::Message bad = make_message("bad");
    bad.set_id(bad_id);
    EXPECT_THAT(try_append({"t", {good, bad}, std::nullopt, true}), fails_with(errc::invalid_argument))
        << "id of " << bad_id.size() << " bytes";
  }
  EXPECT_EQ(partition_of("t", 0).next_offset, 0u);
  EXPECT_EQ(value_of(store_->find_id(protocol::uuid::from_bytes(good.id()).value()), "find_id"), std::nullopt);
  // Nor does it auto-create the topic.
  v1::Message bad = make_message("bad");
  bad.set_id("short");
  EXPECT_THAT(try_append({"auto", {bad}, 2u, true}), fails_with(errc::invalid_argument));
  EXPECT_FALSE(store_->topic("auto"));
  // The good message is taken afterwards as new.
  EXPECT_THAT(append("t", {good}).positions, ElementsAre(position{0, 0, false}));
}

TEST_F(store_test, concurrent_appenders_get_unique_dense_offsets_in_few_commit_groups) {
  constexpr std::uint32_t parts = 4;
  constexpr int threads = 8;
  constexpr int per_thread = 500;
  constexpr int total = threads * per_thread;
  create_topic("t", parts);
  const auto before = store_->stats();

  std::vector<result<append_result>> results(total, errc::io_error);
  std::vector<std::string> ids(total);
  countdown left(total);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        const auto slot = static_cast<std::size_t>(t * per_thread + i);
        // Even threads use one key each (their order must hold); odd threads are keyless.
        auto m = t % 2 == 0 ? make_message(std::to_string(slot), "thread-" + std::to_string(t))
                            : make_message(std::to_string(slot));
        ids[slot] = m.id();
        append_request req;
        req.topic = "t";
        req.messages.push_back(std::move(m));
        store_->append(std::move(req), [&results, &left, slot](result<append_result> r) {
          results[slot] = std::move(r);
          left.done();
        });
      }
    });
  }
  for (auto& w : workers) w.join();
  const bool finished = left.wait_for(std::chrono::seconds(40));
  if (!finished) store_->close();  // completions reference this frame
  ASSERT_TRUE(finished);

  std::set<std::pair<std::uint32_t, std::uint64_t>> unique;
  std::map<std::uint32_t, std::vector<std::uint64_t>> per_partition;
  for (std::size_t slot = 0; slot < results.size(); ++slot) {
    ASSERT_THAT(results[slot], is_ok());
    const auto pos = results[slot].value().positions.at(0);
    EXPECT_FALSE(pos.duplicate);
    EXPECT_TRUE(unique.insert({pos.partition, pos.offset}).second) << "position given twice";
    per_partition[pos.partition].push_back(pos.offset);
  }
  std::uint64_t sum = 0;
  for (auto& [p, offsets] : per_partition) {
    std::sort(offsets.begin(), offsets.end());
    for (std::size_t i = 0; i < offsets.size(); ++i) ASSERT_EQ(offsets[i], i) << "partition " << p << " not dense";
    EXPECT_EQ(partition_of("t", p).next_offset, offsets.size());
    sum += offsets.size();
  }
  EXPECT_EQ(sum, static_cast<std::uint64_t>(total));

  // Each keyed thread's messages are in its own issue order.
  for (int t = 0; t < threads; t += 2) {
    for (int i = 1; i < per_thread; ++i) {
      const auto& prev = results[static_cast<std::size_t>(t * per_thread + i - 1)].value().positions[0];
      const auto& cur = results[static_cast<std::size_t>(t * per_thread + i)].value().positions[0];
      ASSERT_EQ(cur.partition, prev.partition);
      ASSERT_GT(cur.offset, prev.offset);
    }
  }
  // What is stored at each position is the message that was told so.
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::string> stored;
  for (std::uint32_t p = 0; p < parts; ++p) {
    for (auto& m : read_all("t", p)) stored[{p, m.offset()}] = m.id();
  }
  for (std::size_t slot = 0; slot < results.size(); ++slot) {
    const auto pos = results[slot].value().positions[0];
    ASSERT_EQ(stored[std::make_pair(pos.partition, pos.offset)], ids[slot]);
  }

  const auto after = store_->stats();
  EXPECT_EQ(after.messages_appended - before.messages_appended, static_cast<std::uint64_t>(total));
  EXPECT_EQ(after.operations - before.operations, static_cast<std::uint64_t>(total));
  EXPECT_LT(after.commit_groups - before.commit_groups, static_cast<std::uint64_t>(total))
      << "group commit merged no requests";
  EXPECT_GT(after.largest_group, 1u);
}

TEST_F(store_test, offsets_continue_after_reopen) {
  create_topic("t", 1);
  append("t", {make_message("0"), make_message("1"), make_message("2")});
  reopen();
  EXPECT_EQ(partition_of("t", 0).next_offset, 3u);
  auto res = append("t", {make_message("3"), make_message("4")});
  EXPECT_THAT(res.positions, ElementsAre(position{0, 3, false}, position{0, 4, false}));
  auto all = read_all("t", 0);
  ASSERT_THAT(all, SizeIs(5));
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].body(), std::to_string(i));
}

// ---- Dedupe ---------------------------------------------------------------------------------

TEST_F(store_test, reappending_an_id_answers_the_original_position_and_writes_nothing) {
  create_topic("t", 3);
  auto original = make_message("original");
  const auto first = append("t", {original}).positions[0];
  append("t", {make_message("other"), make_message("other")});
  const auto total_before = total_messages("t");
  const auto bytes_before = store_->stats().bytes_appended;

  auto retry = original;
  retry.set_body("changed body");
  auto again = append("t", {retry}).positions[0];
  EXPECT_EQ(again, (position{first.partition, first.offset, true}));
  EXPECT_EQ(total_messages("t"), total_before);
  EXPECT_EQ(store_->stats().bytes_appended, bytes_before);
  EXPECT_EQ(read("t", first.partition, first.offset, 1).messages.at(0).body(), "original");

  reopen();
  EXPECT_EQ(append("t", {retry}).positions[0], (position{first.partition, first.offset, true}));
  EXPECT_EQ(total_messages("t"), total_before);
}

TEST_F(store_test, duplicate_inside_one_request_is_stored_once) {
  create_topic("t", 2);
  auto a = make_message("a");
  auto b = make_message("b");
  auto res = append("t", {a, b, a});
  ASSERT_THAT(res.positions, SizeIs(3));
  EXPECT_FALSE(res.positions[0].duplicate);
  EXPECT_FALSE(res.positions[1].duplicate);
  EXPECT_EQ(res.positions[2], (position{res.positions[0].partition, res.positions[0].offset, true}));
  EXPECT_EQ(total_messages("t"), 2u);
}

TEST_F(store_test, id_is_taken_as_new_once_the_dedupe_window_has_passed) {
  create_topic("t", 1);
  auto m = make_message("m");
  EXPECT_EQ(append("t", {m}).positions[0], (position{0, 0, false}));
  advance(k_dedupe_window.count() - 1);
  EXPECT_EQ(append("t", {m}).positions[0], (position{0, 0, true}));
  advance(2);
  EXPECT_EQ(append("t", {m}).positions[0], (position{0, 1, false}));
  EXPECT_EQ(append("t", {m}).positions[0], (position{0, 1, true}));  // remembered anew
  EXPECT_EQ(partition_of("t", 0).next_offset, 2u);
}

TEST_F(store_test, find_id_locates_a_stored_message_within_the_window) {
  create_topic("t", 4);
  auto m = make_message("m", "key");
  const auto pos = append("t", {m}).positions[0];
  const auto id = protocol::uuid::from_bytes(m.id()).value();
  auto found = value_of(store_->find_id(id), "find_id");
  ASSERT_TRUE(found);
  EXPECT_EQ(found->topic, "t");
  EXPECT_EQ(found->partition, pos.partition);
  EXPECT_EQ(found->offset, pos.offset);
  EXPECT_EQ(value_of(store_->find_id(protocol::uuid::make_v7()), "find_id"), std::nullopt);
  reopen();
  EXPECT_TRUE(value_of(store_->find_id(id), "find_id"));
  advance(k_dedupe_window.count() + 1);
  EXPECT_EQ(value_of(store_->find_id(id), "find_id"), std::nullopt);
}

TEST_F(store_test, compaction_drops_only_expired_dedupe_entries) {
  create_topic("t", 1);
  for (int i = 0; i < 5; ++i) append("t", {make_message("old")});
  EXPECT_EQ(value_of(store_->count_dedupe_entries(), "count"), 5u);
  check_ok(store_->compact(), "compact");
  EXPECT_EQ(value_of(store_->count_dedupe_entries(), "count"), 5u) << "unexpired entries were dropped";

  advance(k_dedupe_window.count() + 1);
  auto fresh = make_message("fresh");
  append("t", {fresh, make_message("fresh2")});
  EXPECT_EQ(value_of(store_->count_dedupe_entries(), "count"), 7u) << "expired entries go only in compaction";
  check_ok(store_->compact(), "compact");
  EXPECT_EQ(value_of(store_->count_dedupe_entries(), "count"), 2u);
  // The surviving entries still dedupe; the messages themselves are untouched.
  EXPECT_TRUE(append("t", {fresh}).positions[0].duplicate);
  EXPECT_EQ(partition_of("t", 0).next_offset, 7u);

  reopen();
  EXPECT_EQ(value_of(store_->count_dedupe_entries(), "count"), 2u);
}

}  // namespace
}  // namespace txmq::storage::test
