// The message and answer limits of docs/semantics.md §6 on an in-memory store: headers counted
// and validated at Produce and Prepare, fetch answers within max_frame_bytes.

#include <set>
#include <string>
#include <vector>

#include <google/protobuf/unknown_field_set.h>
#include <gtest/gtest.h>

#include "handler_test_support.h"
#include "txmq/protocol/frame_codec.h"

namespace txmq::broker::test {
namespace {

class message_limits_test : public handler_test {
 protected:
  // Produce and Prepare both refuse `m` with `code`; returns the Produce error's text.
  std::string refused_by_both(const std::shared_ptr<recording_responder>& c, const v1::Message& m,
                              v1::ErrorCode code) {
    auto produced = request(c, produce_frame("t", {m}));
    EXPECT_TRUE(produced.has_error()) << produced.ShortDebugString();
    EXPECT_EQ(produced.error().code(), code) << produced.error().message();
    auto with_topic = m;
    with_topic.set_topic("t");
    auto prepared = request(c, prepare_frame(protocol::uuid::make_v4(), "pg", {with_topic}));
    EXPECT_TRUE(prepared.has_error()) << prepared.ShortDebugString();
    EXPECT_EQ(prepared.error().code(), code) << prepared.error().message();
    return produced.error().message();
  }
};

v1::Message with_headers(std::size_t count, std::size_t value_bytes) {
  auto m = message("body");
  for (std::size_t i = 0; i < count; ++i) {
    (*m.mutable_headers())["h" + std::to_string(i)] = std::string(value_bytes, 'v');
  }
  return m;
}

TEST_F(message_limits_test, headers_within_the_limits_are_stored_and_delivered) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  // 64 headers, 16 KiB of names and values in all, a tab in a value.
  auto m = with_headers(64, 0);
  std::size_t bytes = 0;
  for (auto& [name, value] : *m.mutable_headers()) {
    value = std::string(16 * 1024 / 64 - name.size(), 'v');
    bytes += name.size() + value.size();
  }
  ASSERT_EQ(bytes, 16u * 1024);
  (*m.mutable_headers())["h0"][0] = '\t';
  auto produced = request(c, produce_frame("t", {m}));
  ASSERT_TRUE(produced.has_produce_response()) << produced.ShortDebugString();
  auto fetched = request(c, fetch_frame("g", "t"));
  ASSERT_EQ(fetched.fetch_response().deliveries_size(), 1) << fetched.ShortDebugString();
  EXPECT_EQ(fetched.fetch_response().deliveries(0).message().headers_size(), 64);
}

TEST_F(message_limits_test, produce_and_prepare_refuse_too_many_headers_or_header_bytes) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  auto text = refused_by_both(c, with_headers(65, 1), v1::INVALID_ARGUMENT);
  EXPECT_NE(text.find("65 headers"), std::string::npos) << text;
  // 16 KiB + 1 of names and values in 10 headers.
  auto big = with_headers(10, 1);
  (*big.mutable_headers())["h0"] = std::string(16 * 1024 + 1 - (2 + 9 * 3), 'v');
  text = refused_by_both(c, big, v1::INVALID_ARGUMENT);
  EXPECT_NE(text.find("16385 bytes of header"), std::string::npos) << text;
  EXPECT_EQ(store_->topic("t")->partitions[0].next_offset, 0u);
}

TEST_F(message_limits_test, produce_and_prepare_refuse_bad_header_names_and_values_naming_the_header) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  struct bad_case {
    const char* what;
    std::string name;
    std::string value;
    std::string named;  // what the error must say
  };
  const std::vector<bad_case> cases = {
      {"an empty name", "", "v", "empty name"},
      {"CR LF in a value", "x-trace", "a\r\nSet-Cookie: evil", "header 'x-trace'"},
      {"LF in a value", "x-lf", "a\nb", "header 'x-lf'"},
      {"NUL in a value", "x-nul", std::string("a\0b", 3), "header 'x-nul'"},
      {"ESC in a value", "x-esc", "\x1b[31m", "header 'x-esc'"},
      {"DEL in a value", "x-del", "a\x7f", "header 'x-del'"},
      {"CR in a name", "x-\rname", "v", "header 'x-\\x0dname'"},
      {"0x1f in a name", "x\x1fname", "v", "0x1f"},
  };
  for (const auto& bad : cases) {
    SCOPED_TRACE(bad.what);
    auto m = message("body");
    (*m.mutable_headers())["ok"] = "fine";
    (*m.mutable_headers())[bad.name] = bad.value;
    const auto text = refused_by_both(c, m, v1::INVALID_ARGUMENT);
    EXPECT_NE(text.find(bad.named), std::string::npos) << text;
  }
  EXPECT_EQ(store_->topic("t")->partitions[0].next_offset, 0u);
}

TEST_F(message_limits_test, header_names_and_values_count_against_max_message_bytes) {
  settings.max_message_bytes = 100;
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  // key 10 + body 50 + headers 2 + 39 = 101.
  auto m = message(std::string(50, 'b'), std::string(10, 'k'));
  (*m.mutable_headers())["ab"] = std::string(39, 'v');
  refused_by_both(c, m, v1::MESSAGE_TOO_LARGE);
  (*m.mutable_headers())["ab"] = std::string(38, 'v');
  auto produced = request(c, produce_frame("t", {m}));
  EXPECT_TRUE(produced.has_produce_response()) << produced.ShortDebugString();
}

// A field the broker does not know is stored and delivered with the message (protobuf keeps it),
// so its bytes count against max_message_bytes like the body's.
TEST_F(message_limits_test, fields_unknown_to_the_broker_count_against_max_message_bytes) {
  settings.max_message_bytes = 100;
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  auto m = message(std::string(50, 'b'));
  // Field 15, 48 bytes: 1 tag byte + 1 length byte + 48 = 50, so 100 in all.
  m.GetReflection()->MutableUnknownFields(&m)->AddLengthDelimited(15, std::string(48, 'u'));
  auto produced = request(c, produce_frame("t", {m}));
  ASSERT_TRUE(produced.has_produce_response()) << produced.ShortDebugString();
  auto big = message(std::string(50, 'b'));
  big.GetReflection()->MutableUnknownFields(&big)->AddLengthDelimited(15, std::string(49, 'u'));
  const auto text = refused_by_both(c, big, v1::MESSAGE_TOO_LARGE);
  EXPECT_NE(text.find("101 bytes"), std::string::npos) << text;
  EXPECT_EQ(store_->topic("t")->partitions[0].next_offset, 1u);
}

// 64 headers of 256 bytes (name and value): the most a message may carry.
v1::Message with_full_headers(std::string body) {
  auto m = message(std::move(body));
  for (int i = 0; i < 64; ++i) {
    std::string name = "h" + std::to_string(100 + i);
    (*m.mutable_headers())[name] = std::string(256 - name.size(), 'v');
  }
  return m;
}

v1::Frame fetch_of(std::uint32_t max_messages) {
  auto f = fetch_frame("g", "t");
  f.mutable_fetch()->set_max_messages(max_messages);
  return f;
}

// The answer would be some 17 MB if headers were outside the size check: it holds fewer
// messages instead, encodes within max_frame_bytes, and the rest come in later fetches.
TEST_F(message_limits_test, a_fetch_answer_with_large_headers_stays_within_max_frame_bytes) {
  ASSERT_NO_FATAL_FAILURE(start());
  ASSERT_EQ(settings.max_frame_bytes, 8u << 20);
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  for (int batch = 0; batch < 10; ++batch) {
    std::vector<v1::Message> messages;
    for (int i = 0; i < 100; ++i) messages.push_back(with_full_headers("m" + std::to_string(batch * 100 + i)));
    ASSERT_TRUE(request(c, produce_frame("t", std::move(messages))).has_produce_response());
  }
  std::set<std::uint64_t> offsets;
  int fetches = 0;
  while (offsets.size() < 1000 && fetches < 10) {
    auto r = request(c, fetch_of(1000));
    ++fetches;
    ASSERT_TRUE(r.has_fetch_response()) << r.error().ShortDebugString();
    const int n = r.fetch_response().deliveries_size();
    ASSERT_GT(n, 0) << "fetch " << fetches;
    EXPECT_LT(n, 1000);
    EXPECT_LE(r.ByteSizeLong(), settings.max_frame_bytes) << "fetch " << fetches;
    std::string bytes;
    EXPECT_TRUE(protocol::encode_frame(r, bytes, settings.max_frame_bytes)) << "fetch " << fetches;
    // Nearly full: the size estimate does not waste half the frame.
    if (offsets.size() + static_cast<std::size_t>(n) < 1000) {
      EXPECT_GT(r.ByteSizeLong(), settings.max_frame_bytes * 9 / 10);
    }
    for (const auto& d : r.fetch_response().deliveries()) {
      EXPECT_EQ(d.message().headers_size(), 64);
      EXPECT_TRUE(offsets.insert(d.message().offset()).second) << "offset " << d.message().offset() << " twice";
    }
  }
  EXPECT_EQ(offsets.size(), 1000u);
  EXPECT_GE(fetches, 3);
}

// A fetch's answer holds the largest message the broker accepts, with its headers, when
// max_frame_bytes is the least validate() allows.
TEST_F(message_limits_test, the_largest_message_fits_the_smallest_frame) {
  settings.max_message_bytes = 64 * 1024;
  settings.max_frame_bytes = 128 * 1024;
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  std::vector<v1::Message> messages;
  for (int i = 0; i < 3; ++i) {
    auto m = with_full_headers("");
    m.set_key(std::string(199, 'k') + std::to_string(i));  // distinct keys: none waits for another
    m.set_body(std::string(64 * 1024 - 16 * 1024 - 200, 'b'));
    messages.push_back(std::move(m));
  }
  ASSERT_TRUE(request(c, produce_frame("t", std::move(messages))).has_produce_response());
  std::size_t got = 0;
  for (int i = 0; i < 3 && got < 3; ++i) {
    auto r = request(c, fetch_of(10));
    ASSERT_TRUE(r.has_fetch_response()) << r.error().ShortDebugString();
    EXPECT_LE(r.ByteSizeLong(), settings.max_frame_bytes);
    got += static_cast<std::size_t>(r.fetch_response().deliveries_size());
  }
  EXPECT_EQ(got, 3u);
}

v1::Frame dlq_list_frame(const std::string& group, std::uint32_t limit) {
  v1::Frame f;
  f.mutable_dlq_list()->set_group(group);
  f.mutable_dlq_list()->set_limit(limit);
  return f;
}

v1::Frame tx_list_frame(std::uint32_t limit, std::string after = {}) {
  v1::Frame f;
  f.mutable_tx_list()->set_limit(limit);
  f.mutable_tx_list()->set_after_txid(std::move(after));
  return f;
}

// Dead letters carry their messages: a DlqList of large ones holds fewer than asked for.
TEST_F(message_limits_test, a_dlq_list_of_large_messages_stays_within_max_frame_bytes) {
  settings.max_message_bytes = 64 * 1024;
  settings.max_frame_bytes = 128 * 1024;
  settings.delivery.max_attempts = 1;
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client();
  ASSERT_TRUE(request(c, create_topic_frame("t", 1)).has_topic_info());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(request(c, produce_frame("t", {message(std::string(40 * 1024, 'b'))})).has_produce_response());
  }
  std::size_t dead = 0;
  for (int round = 0; round < 20 && dead < 10; ++round) {
    auto r = request(c, fetch_of(10));
    ASSERT_TRUE(r.has_fetch_response()) << r.error().ShortDebugString();
    for (const auto& d : r.fetch_response().deliveries()) {
      auto n = request(c, nack_frame("g", d.message(), 0));
      ASSERT_TRUE(n.has_delivery_results()) << n.ShortDebugString();
      ++dead;
    }
  }
  ASSERT_EQ(dead, 10u);
  // Dead-letter writes are not awaited by the nack: wait until the store has them all.
  ASSERT_TRUE(run_until([&] {
    auto d = store_->dead_letters("g", 100);
    return d && d.value().size() == 10;
  }));
  auto listed = request(c, dlq_list_frame("g", 10));
  ASSERT_TRUE(listed.has_dlq_list_response()) << listed.error().ShortDebugString();
  EXPECT_GT(listed.dlq_list_response().dead_letters_size(), 0);
  EXPECT_LT(listed.dlq_list_response().dead_letters_size(), 10);
  EXPECT_LE(listed.ByteSizeLong(), settings.max_frame_bytes);
  EXPECT_TRUE(listed.dlq_list_response().more());
  // Paging on after the last entry sees each dead letter once, then says no more follow.
  std::set<std::uint64_t> offsets;
  auto page = listed;
  for (int round = 0; round < 20; ++round) {
    for (const auto& dl : page.dlq_list_response().dead_letters()) {
      EXPECT_TRUE(offsets.insert(dl.message().offset()).second) << "listed twice";
    }
    if (!page.dlq_list_response().more()) break;
    const auto& last = page.dlq_list_response().dead_letters().rbegin()->message();
    auto next = dlq_list_frame("g", 10);
    next.mutable_dlq_list()->set_after_topic(last.topic());
    next.mutable_dlq_list()->set_after_partition(last.partition());
    next.mutable_dlq_list()->set_after_offset(last.offset());
    page = request(c, next);
    ASSERT_TRUE(page.has_dlq_list_response()) << page.ShortDebugString();
    EXPECT_LE(page.ByteSizeLong(), settings.max_frame_bytes);
  }
  EXPECT_EQ(offsets.size(), 10u);
  EXPECT_FALSE(page.dlq_list_response().more());
  // A limit above 1,000 is clamped, not refused.
  auto clamped = request(c, dlq_list_frame("g", 1'000'000));
  EXPECT_TRUE(clamped.has_dlq_list_response()) << clamped.ShortDebugString();
}

// TxList answers at most 1,000 (a larger limit is clamped) and pages on with its cursor.
TEST_F(message_limits_test, a_tx_list_answers_at_most_1000_and_pages_on) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client("pg");
  for (int i = 0; i < 1001; ++i) {
    auto r = request(c, prepare_frame(protocol::uuid::make_v4(), "pg", {message("x", std::nullopt, "t")}, 600'000));
    ASSERT_TRUE(r.has_prepare_response()) << r.ShortDebugString();
  }
  auto first = request(c, tx_list_frame(5000));
  ASSERT_TRUE(first.has_tx_list_response()) << first.ShortDebugString();
  EXPECT_EQ(first.tx_list_response().txs_size(), 1000);
  ASSERT_FALSE(first.tx_list_response().next_after_txid().empty());
  auto second = request(c, tx_list_frame(5000, first.tx_list_response().next_after_txid()));
  ASSERT_TRUE(second.has_tx_list_response()) << second.ShortDebugString();
  EXPECT_EQ(second.tx_list_response().txs_size(), 1);
}

// A TxInfo lists the transaction's keys: many large keys make a TxList answer end early, and its
// cursor continues after the last transaction it holds, so paging sees each one once.
TEST_F(message_limits_test, a_tx_list_of_large_transactions_stays_within_max_frame_bytes) {
  settings.max_message_bytes = 64 * 1024;
  settings.max_frame_bytes = 128 * 1024;
  ASSERT_NO_FATAL_FAILURE(start());
  auto c = client("pg");
  std::set<std::string> prepared;
  for (int i = 0; i < 10; ++i) {
    const auto id = protocol::uuid::make_v4();
    std::vector<v1::Message> messages;
    for (int k = 0; k < 4; ++k) messages.push_back(message("x", std::to_string(k) + std::string(10'000, 'k'), "t"));
    auto r = request(c, prepare_frame(id, "pg", std::move(messages), 600'000));
    ASSERT_TRUE(r.has_prepare_response()) << r.ShortDebugString();
    prepared.insert(std::string(id.raw()));
  }
  std::set<std::string> listed;
  std::string after;
  int pages = 0;
  do {
    auto r = request(c, tx_list_frame(100, after));
    ASSERT_TRUE(r.has_tx_list_response()) << r.ShortDebugString();
    EXPECT_LE(r.ByteSizeLong(), settings.max_frame_bytes);
    for (const auto& tx : r.tx_list_response().txs()) EXPECT_TRUE(listed.insert(tx.txid()).second);
    after = r.tx_list_response().next_after_txid();
  } while (!after.empty() && ++pages < 20);
  EXPECT_EQ(listed, prepared);
  EXPECT_GE(pages, 2);
}

}  // namespace
}  // namespace txmq::broker::test
