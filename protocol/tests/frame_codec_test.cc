#include "txmq/protocol/frame_codec.h"

#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <google/protobuf/unknown_field_set.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "txmq/protocol/errc.h"
#include "txmq/protocol/message_id.h"
#include "txmq/v1/message.pb.h"

namespace txmq::protocol {
namespace {

using google::protobuf::util::MessageDifferencer;

std::span<const std::byte> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

v1::Frame hello_frame(std::uint64_t correlation_id) {
  v1::Frame f;
  f.set_correlation_id(correlation_id);
  auto* h = f.mutable_hello();
  h->set_protocol_version(1);
  h->set_client_id("client-" + std::to_string(correlation_id));
  h->set_producer_group("orders");
  h->set_auth_token("secret");
  return f;
}

v1::Frame error_frame(std::uint64_t correlation_id, std::string text) {
  v1::Frame f;
  f.set_correlation_id(correlation_id);
  f.mutable_error()->set_code(v1::UNKNOWN_TOPIC);
  f.mutable_error()->set_message(std::move(text));
  return f;
}

std::string encode(const v1::Frame& f) {
  std::string out;
  auto r = encode_frame(f, out);
  EXPECT_TRUE(r) << r.error().message;
  return out;
}

// Feeds the stream in the given pieces and drains after each one.
std::vector<v1::Frame> read_all(frame_reader& reader, const std::vector<std::string_view>& pieces) {
  std::vector<v1::Frame> frames;
  for (auto piece : pieces) {
    reader.feed(as_bytes(piece));
    for (;;) {
      auto r = reader.next();
      EXPECT_TRUE(r) << r.error().message;
      if (!r || !r.value()) break;
      frames.push_back(std::move(*r.value()));
    }
  }
  return frames;
}

void expect_error(frame_reader& reader, errc expected) {
  auto r = reader.next();
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), expected) << r.error().message;
}

TEST(frame_codec_test, decode_frame_length_is_big_endian) {
  const std::string header("\x00\x01\x02\x03", 4);
  auto r = decode_frame_length(as_bytes(header).first<4>(), default_max_frame_bytes);
  ASSERT_TRUE(r);
  EXPECT_EQ(r.value(), 0x00010203u);
}

TEST(frame_codec_test, decode_frame_length_limits) {
  const std::string zero(4, '\0');
  auto r = decode_frame_length(as_bytes(zero).first<4>(), 100);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::frame_empty);

  const std::string at_limit = be32(100);
  EXPECT_EQ(decode_frame_length(as_bytes(at_limit).first<4>(), 100).value(), 100u);

  const std::string over = be32(101);
  r = decode_frame_length(as_bytes(over).first<4>(), 100);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::frame_too_large);

  const std::string max = "\xff\xff\xff\xff";
  EXPECT_EQ(decode_frame_length(as_bytes(max).first<4>(), default_max_frame_bytes).error(), errc::frame_too_large);
}

TEST(frame_codec_test, encode_writes_length_prefix_then_body) {
  const v1::Frame f = hello_frame(42);
  std::string out = "prefix";
  ASSERT_TRUE(encode_frame(f, out));
  ASSERT_EQ(out.substr(0, 6), "prefix");
  EXPECT_EQ(out.substr(6, 4), be32(static_cast<std::uint32_t>(f.ByteSizeLong())));
  EXPECT_EQ(out.substr(10), f.SerializeAsString());

  auto decoded = decode_frame_body(as_bytes(out).subspan(10));
  ASSERT_TRUE(decoded);
  EXPECT_TRUE(MessageDifferencer::Equals(decoded.value(), f));
}

// The example in docs/protocol.md, byte for byte: other-language clients check against it.
TEST(frame_codec_test, golden_hello_bytes) {
  v1::Frame f;
  f.set_correlation_id(1);
  f.mutable_hello()->set_protocol_version(1);
  f.mutable_hello()->set_client_id("cli");
  std::string out;
  ASSERT_TRUE(encode_frame(f, out));
  const std::string expected("\x00\x00\x00\x0b"
                             "\x08\x01"
                             "\x1a\x07\x08\x01\x12\x03"
                             "cli",
                             15);
  EXPECT_EQ(out, expected);
}

TEST(frame_codec_test, encode_over_limit_appends_nothing) {
  const v1::Frame f = error_frame(7, std::string(200, 'x'));
  const auto size = static_cast<std::uint32_t>(f.ByteSizeLong());
  std::string out = "kept";
  auto r = encode_frame(f, out, size - 1);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::frame_too_large);
  EXPECT_EQ(out, "kept");
  // Exactly at the limit is allowed.
  ASSERT_TRUE(encode_frame(f, out, size));
  EXPECT_EQ(out.size(), 4 + frame_header_bytes + size);
}

TEST(frame_codec_test, encode_empty_frame_is_refused) {
  std::string out;
  auto r = encode_frame(v1::Frame{}, out);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error(), errc::frame_empty);
  EXPECT_TRUE(out.empty());
  // A Frame with only a body set, even an empty one, is not empty on the wire.
  v1::Frame only_body;
  only_body.mutable_hello();
  ASSERT_TRUE(encode_frame(only_body, out));
  frame_reader reader;
  auto frames = read_all(reader, {out});
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_TRUE(frames[0].has_hello());
}

TEST(frame_codec_test, zero_length_is_frame_empty) {
  frame_reader reader;
  const std::string zero(4, '\0');
  reader.feed(as_bytes(zero));
  expect_error(reader, errc::frame_empty);
}

TEST(frame_codec_test, oversized_length_rejected_before_body_arrives) {
  frame_reader reader(pre_hello_max_frame_bytes);
  const std::string header = be32(pre_hello_max_frame_bytes + 1);
  reader.feed(as_bytes(header));  // only the 4 length bytes
  expect_error(reader, errc::frame_too_large);
  // The body is never buffered, and the reader stays failed.
  const std::string body(1024, 'x');
  reader.feed(as_bytes(body));
  EXPECT_EQ(reader.buffered(), 0u);
  expect_error(reader, errc::frame_too_large);
  ASSERT_FALSE(reader.finish());
  EXPECT_EQ(reader.finish().error(), errc::frame_too_large);
}

TEST(frame_codec_test, oversized_length_in_one_feed_with_body_is_not_buffered) {
  frame_reader reader(1000);
  std::string stream = be32(5000) + std::string(5000, 'x');
  reader.feed(as_bytes(stream));
  EXPECT_EQ(reader.buffered(), 0u);
  expect_error(reader, errc::frame_too_large);
}

TEST(frame_codec_test, pre_hello_limit_then_raised) {
  frame_reader reader(pre_hello_max_frame_bytes);
  const v1::Frame big = error_frame(1, std::string(pre_hello_max_frame_bytes, 'y'));
  const v1::Frame small = hello_frame(1);
  std::string hello = encode(small);
  auto frames = read_all(reader, {hello});
  ASSERT_EQ(frames.size(), 1u);
  // After Hello succeeds the connection switches to max_frame_bytes.
  reader.set_max_frame_bytes(default_max_frame_bytes);
  frames = read_all(reader, {encode(big)});
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_TRUE(MessageDifferencer::Equals(frames[0], big));

  frame_reader strict(pre_hello_max_frame_bytes);
  strict.feed(as_bytes(encode(big)));
  expect_error(strict, errc::frame_too_large);
}

TEST(frame_codec_test, truncated_stream_reported_by_finish) {
  const std::string frame = encode(hello_frame(3));
  for (std::size_t cut = 1; cut < frame.size(); ++cut) {
    frame_reader reader;
    reader.feed(as_bytes(std::string_view(frame).substr(0, cut)));
    auto r = reader.next();
    ASSERT_TRUE(r) << cut;
    EXPECT_FALSE(r.value().has_value()) << cut;
    auto done = reader.finish();
    ASSERT_FALSE(done) << cut;
    EXPECT_EQ(done.error(), errc::frame_truncated) << cut;
  }
}

TEST(frame_codec_test, finish_accepts_clean_end) {
  frame_reader reader;
  EXPECT_TRUE(reader.finish());
  const std::string two = encode(hello_frame(1)) + encode(hello_frame(2));
  reader.feed(as_bytes(two));
  // Complete frames not yet taken are not a truncation.
  EXPECT_TRUE(reader.finish());
  EXPECT_TRUE(reader.next().value().has_value());
  EXPECT_TRUE(reader.next().value().has_value());
  EXPECT_FALSE(reader.next().value().has_value());
  EXPECT_TRUE(reader.finish());
  EXPECT_EQ(reader.buffered(), 0u);
}

// Bytes that the protobuf parser must refuse, each for a different reason.
TEST(frame_codec_test, garbage_body_is_frame_malformed) {
  const std::vector<std::pair<std::string, std::string>> bodies = {
      // Tag of field 0 with wire type 7: no such wire type.
      {"invalid wire type", std::string("\x07", 1)},
      // Field 3 (hello), length-delimited, claims 127 bytes but 2 follow.
      {"length overruns the body", std::string("\x1a\x7f\x08\x01", 4)},
      // Field 1 (correlation_id) varint never terminates.
      {"unterminated varint", std::string("\x08\xff\xff\xff", 4)},
      // Field 2 (error) holding Error.message = "\xff": proto3 strings must be UTF-8.
      {"invalid UTF-8 in a string", std::string("\x12\x03\x12\x01\xff", 5)},
      // Field number 0 is reserved.
      {"field number zero", std::string("\x00\x01", 2)},
  };
  for (const auto& [what, body] : bodies) {
    auto direct = decode_frame_body(as_bytes(body));
    ASSERT_FALSE(direct) << what;
    EXPECT_EQ(direct.error(), errc::frame_malformed) << what;

    frame_reader reader;
    const std::string stream = be32(static_cast<std::uint32_t>(body.size())) + body + encode(hello_frame(9));
    reader.feed(as_bytes(stream));
    expect_error(reader, errc::frame_malformed);
    // Sticky: the good frame after it is never handed out.
    expect_error(reader, errc::frame_malformed);
    EXPECT_EQ(reader.finish().error(), errc::frame_malformed) << what;
  }
}

TEST(frame_codec_test, several_frames_in_one_feed) {
  std::string stream;
  std::vector<v1::Frame> sent;
  for (std::uint64_t i = 1; i <= 20; ++i) {
    sent.push_back(i % 2 ? hello_frame(i) : error_frame(i, "no topic " + std::to_string(i)));
    ASSERT_TRUE(encode_frame(sent.back(), stream));
  }
  frame_reader reader;
  auto got = read_all(reader, {stream});
  ASSERT_EQ(got.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i) EXPECT_TRUE(MessageDifferencer::Equals(got[i], sent[i])) << i;
  EXPECT_EQ(reader.buffered(), 0u);
  EXPECT_TRUE(reader.finish());
}

TEST(frame_codec_test, frames_split_at_every_byte_boundary) {
  std::vector<v1::Frame> sent = {hello_frame(1), error_frame(2, "unknown topic \"orders\""), v1::Frame{}};
  sent[2].set_correlation_id(3);
  sent[2].mutable_hello_ok()->set_broker_id("b1");
  sent[2].mutable_hello_ok()->set_max_frame_bytes(default_max_frame_bytes);
  std::string stream;
  for (const auto& f : sent) ASSERT_TRUE(encode_frame(f, stream));

  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    frame_reader reader;
    const std::string_view s(stream);
    auto got = read_all(reader, {s.substr(0, cut), s.substr(cut)});
    ASSERT_EQ(got.size(), sent.size()) << cut;
    for (std::size_t i = 0; i < sent.size(); ++i) EXPECT_TRUE(MessageDifferencer::Equals(got[i], sent[i])) << cut;
    EXPECT_TRUE(reader.finish()) << cut;
  }

  // And one byte at a time.
  std::vector<std::string_view> bytes;
  for (std::size_t i = 0; i < stream.size(); ++i) bytes.push_back(std::string_view(stream).substr(i, 1));
  frame_reader reader;
  auto got = read_all(reader, bytes);
  ASSERT_EQ(got.size(), sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i) EXPECT_TRUE(MessageDifferencer::Equals(got[i], sent[i]));
}

// --- Round-trip property test -------------------------------------------------------------

// Field number, in Frame, under which the property test carries a serialized Message. Frame has
// no Message-carrying body yet (requests are added as the broker grows); an unknown field is
// exactly what a newer peer's request looks like to this schema, so this also checks that the
// codec passes bodies it does not know through unchanged.
constexpr int k_message_field = 1000;

class random_source {
 public:
  explicit random_source(std::uint64_t seed) : rng_(seed) {}

  std::uint64_t u64() { return rng_(); }
  std::uint64_t below(std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng_); }
  bool chance(int percent) { return below(100) < static_cast<std::uint64_t>(percent); }

  std::string bytes(std::size_t n) {
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng_());
    return s;
  }

  // Valid UTF-8 (proto3 string fields reject anything else), mixing 1- to 4-byte characters.
  std::string text(std::size_t max_chars) {
    static const char* const k_pieces[] = {"a", "Z", "0", "-", " ", "\"", "\n", "é", "ß", "分", "区", "😀", "\x7f"};
    std::string s;
    const std::size_t n = below(max_chars + 1);
    for (std::size_t i = 0; i < n; ++i) s += k_pieces[below(std::size(k_pieces))];
    return s;
  }

  std::size_t body_size() {
    switch (below(4)) {
      case 0: return 0;
      case 1: return below(64);
      case 2: return below(4096);
      default: return below(64 * 1024 + 1);
    }
  }

  std::uint64_t correlation_id() {
    switch (below(4)) {
      case 0: return 0;
      case 1: return UINT64_MAX;
      case 2: return below(1000);
      default: return u64();
    }
  }

  v1::Message message() {
    v1::Message m;
    m.set_id(chance(80) ? std::string(uuid::make_v7().raw()) : bytes(below(17)));
    m.set_topic(text(20));
    if (chance(50)) m.set_key(bytes(below(40)));  // present, possibly empty
    const std::size_t headers = below(8);
    for (std::size_t i = 0; i < headers; ++i) (*m.mutable_headers())[text(12)] = text(30);
    m.set_body(bytes(body_size()));
    if (chance(50)) m.set_publish_time_ms(static_cast<std::int64_t>(u64()));
    if (chance(30)) m.set_deliver_at_ms(static_cast<std::int64_t>(u64() >> 20));
    if (chance(40)) m.set_txid(std::string(uuid::make_v4().raw()));
    m.set_partition(static_cast<std::uint32_t>(below(64)));
    m.set_offset(chance(50) ? u64() : below(100));
    m.set_attempt(static_cast<std::uint32_t>(below(17)));
    return m;
  }

  v1::Frame frame(std::vector<std::optional<v1::Message>>& carried) {
    v1::Frame f;
    f.set_correlation_id(correlation_id());
    switch (below(4)) {
      case 0: break;
      case 1: {
        auto* e = f.mutable_error();
        e->set_code(static_cast<v1::ErrorCode>(v1::ErrorCode_descriptor()->value(static_cast<int>(
            below(static_cast<std::uint64_t>(v1::ErrorCode_descriptor()->value_count()))))->number()));
        e->set_message(text(200));
        break;
      }
      case 2: {
        auto* h = f.mutable_hello();
        h->set_protocol_version(static_cast<std::uint32_t>(below(4)));
        h->set_client_id(text(30));
        if (chance(50)) h->set_producer_group(text(20));
        if (chance(50)) h->set_auth_token(text(60));
        break;
      }
      default: {
        auto* h = f.mutable_hello_ok();
        h->set_protocol_version(1);
        h->set_broker_id(text(10));
        h->set_max_frame_bytes(static_cast<std::uint32_t>(u64()));
        h->set_max_message_bytes(static_cast<std::uint32_t>(u64()));
        break;
      }
    }
    if (chance(70)) {
      carried.push_back(message());
      f.GetReflection()->MutableUnknownFields(&f)->AddLengthDelimited(k_message_field,
                                                                      carried.back()->SerializeAsString());
    } else {
      carried.push_back(std::nullopt);
    }
    // An all-default frame cannot be framed (see encode_empty_frame_is_refused).
    if (f.ByteSizeLong() == 0) f.set_correlation_id(1);
    return f;
  }

  std::size_t chunk_size() {
    switch (below(3)) {
      case 0: return 1 + below(16);
      case 1: return 1 + below(4096);
      default: return 1 + below(100'000);
    }
  }

 private:
  std::mt19937_64 rng_;
};

const std::string* carried_message(const v1::Frame& f) {
  const auto& unknown = f.GetReflection()->GetUnknownFields(f);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const auto& field = unknown.field(i);
    if (field.number() == k_message_field && field.type() == google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      return &field.length_delimited();
    }
  }
  return nullptr;
}

TEST(frame_codec_test, round_trip_random_frames_in_random_chunks) {
  constexpr int rounds = 50;
  constexpr int frames_per_round = 50;  // 2,500 frames in all
  const std::uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  random_source rnd(seed);

  int checked_messages = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<v1::Frame> sent;
    std::vector<std::optional<v1::Message>> carried;
    std::vector<std::size_t> encoded_size;
    std::string stream;
    for (int i = 0; i < frames_per_round; ++i) {
      sent.push_back(rnd.frame(carried));
      const std::size_t before = stream.size();
      auto r = encode_frame(sent.back(), stream);
      ASSERT_TRUE(r) << r.error().message;
      encoded_size.push_back(stream.size() - before);
    }

    frame_reader reader;
    std::vector<v1::Frame> got;
    for (std::size_t pos = 0; pos < stream.size();) {
      const std::size_t n = std::min(rnd.chunk_size(), stream.size() - pos);
      reader.feed(as_bytes(std::string_view(stream).substr(pos, n)));
      pos += n;
      for (;;) {
        auto r = reader.next();
        ASSERT_TRUE(r) << r.error().message;
        if (!r.value()) break;
        got.push_back(std::move(*r.value()));
      }
      // After draining, what is left is a strict prefix of the next frame.
      if (got.size() < sent.size()) {
        EXPECT_LT(reader.buffered(), encoded_size[got.size()]);
      } else {
        EXPECT_EQ(reader.buffered(), 0u);
      }
    }
    ASSERT_TRUE(reader.finish());
    EXPECT_EQ(reader.buffered(), 0u);

    ASSERT_EQ(got.size(), sent.size()) << "round " << round;
    for (std::size_t i = 0; i < sent.size(); ++i) {
      std::string diff;
      MessageDifferencer differencer;
      differencer.ReportDifferencesToString(&diff);
      EXPECT_TRUE(differencer.Compare(sent[i], got[i])) << "round " << round << " frame " << i << ": " << diff;

      const std::string* raw = carried_message(got[i]);
      if (!carried[i]) {
        EXPECT_EQ(raw, nullptr);
        continue;
      }
      ASSERT_NE(raw, nullptr) << "round " << round << " frame " << i;
      v1::Message m;
      ASSERT_TRUE(m.ParseFromString(*raw));
      EXPECT_TRUE(MessageDifferencer::Equals(m, *carried[i])) << "round " << round << " frame " << i;
      EXPECT_EQ(m.has_key(), carried[i]->has_key());
      ++checked_messages;
    }
  }
  // The generator carries a Message in ~70% of frames.
  EXPECT_GT(checked_messages, 1000);
}

}  // namespace
}  // namespace txmq::protocol
