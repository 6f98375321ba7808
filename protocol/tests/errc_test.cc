#include "txmq/protocol/errc.h"

#include <string>

#include <gtest/gtest.h>

#include "txmq/v1/frame.pb.h"

namespace txmq::protocol {
namespace {

constexpr errc k_all[] = {
    errc::frame_too_large,   errc::frame_malformed,   errc::hello_required,      errc::unsupported_version,
    errc::unknown_request,   errc::not_authenticated,   errc::invalid_argument,    errc::unknown_topic,
    errc::topic_exists,      errc::message_too_large, errc::unknown_group,       errc::unknown_delivery,
    errc::unknown_tx,        errc::tx_already_resolved, errc::not_authorized, errc::limit_exceeded,
    errc::storage_error,     errc::shutting_down,     errc::internal,            errc::store_unavailable,
    errc::store_full,        errc::not_leader,        errc::fenced,              errc::frame_empty,
    errc::frame_truncated,   errc::bad_message_id,    errc::not_enough_replicas,
};

TEST(errc_test, category_name) {
  const std::error_code ec = errc::frame_empty;
  EXPECT_STREQ(ec.category().name(), "txmq.protocol");
  EXPECT_EQ(&ec.category(), &protocol_category());
  EXPECT_EQ(ec, errc::frame_empty);
  EXPECT_NE(ec, errc::frame_truncated);
}

TEST(errc_test, names_and_messages) {
  EXPECT_EQ(errc_name(errc::tx_already_resolved), "TX_ALREADY_RESOLVED");
  EXPECT_EQ(errc_name(errc::frame_empty), "FRAME_EMPTY");
  EXPECT_EQ(errc_name(errc::frame_truncated), "FRAME_TRUNCATED");
  EXPECT_EQ(errc_name(errc::bad_message_id), "BAD_MESSAGE_ID");
  for (errc e : k_all) {
    const std::error_code ec = e;
    EXPECT_NE(errc_name(e), "UNKNOWN") << static_cast<int>(e);
    EXPECT_EQ(ec.message().find("unknown txmq.protocol error"), std::string::npos) << errc_name(e);
  }
  EXPECT_EQ(errc_name(static_cast<errc>(9999)), "UNKNOWN");
}

// Codes below 100 are txmq.v1.ErrorCode values with the same name.
TEST(errc_test, wire_codes_match_proto_enum) {
  for (errc e : k_all) {
    const int value = static_cast<int>(e);
    if (value >= 100) {
      EXPECT_FALSE(v1::ErrorCode_IsValid(value)) << errc_name(e);
      continue;
    }
    ASSERT_TRUE(v1::ErrorCode_IsValid(value)) << errc_name(e);
    EXPECT_EQ(v1::ErrorCode_Name(static_cast<v1::ErrorCode>(value)), errc_name(e));
  }
  // And every wire code has a C++ counterpart.
  const auto* descriptor = v1::ErrorCode_descriptor();
  for (int i = 0; i < descriptor->value_count(); ++i) {
    const int value = descriptor->value(i)->number();
    if (value == 0) continue;
    EXPECT_EQ(errc_name(static_cast<errc>(value)), descriptor->value(i)->name());
  }
}

}  // namespace
}  // namespace txmq::protocol
