// The message and answer limits of docs/semantics.md §6 on an in-memory store: headers counted
// and validated at Produce and Prepare, fetch answers within max_frame_bytes.

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "handler_test_support.h"

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

}  // namespace
}  // namespace txmq::broker::test
