// The parts of txmq::pg that need no server; statements against a real PostgreSQL are tested
// by the producer, inbox and relay tests in the top-level tests/ (label pg).

#include "txmq/pg/pg.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace txmq::pg {
namespace {

using testing::HasSubstr;

TEST(pg, bytea_round_trips_through_its_hex_text_form) {
  const std::string bytes("\x00\x01\x7f\x80\xff", 5);
  EXPECT_EQ(bytea_literal(bytes), "\\x00017f80ff");
  EXPECT_EQ(bytea_value("\\x00017f80ff").value(), bytes);
  EXPECT_EQ(bytea_value("\\x00017F80FF").value(), bytes);
  EXPECT_EQ(bytea_value("\\x").value(), "");
}

TEST(pg, an_int_array_literal_lists_the_values_in_order) {
  EXPECT_EQ(int_array_literal({}), "{}");
  EXPECT_EQ(int_array_literal({7}), "{7}");
  EXPECT_EQ(int_array_literal({3, -1, 12}), "{-1,3,12}");
}

TEST(pg, malformed_bytea_text_is_a_database_error) {
  for (const char* bad : {"00ff", "\\x0", "\\xzz"}) {
    auto r = bytea_value(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_TRUE(r.error().is(errc::database)) << bad;
  }
}

// The binary uuid[] the relay deletes a round by: array_recv's layout (dimensions, no-NULL
// flag, element type uuid = 2950, length, lower bound 1; then length + bytes per element).
TEST(pg, a_uuid_array_in_binary_form_has_array_recvs_layout) {
  const std::string ids = std::string(16, '\x01') + std::string(16, '\x02');
  const std::string b = uuid_array_binary(ids);
  const std::string header("\0\0\0\1" "\0\0\0\0" "\0\0\x0b\x86" "\0\0\0\2" "\0\0\0\1", 20);
  ASSERT_EQ(b.size(), 20u + 2 * (4 + 16));
  EXPECT_EQ(b.substr(0, 20), header);
  EXPECT_EQ(b.substr(20, 4), std::string("\0\0\0\x10", 4));
  EXPECT_EQ(b.substr(24, 16), std::string(16, '\x01'));
  EXPECT_EQ(b.substr(44, 16), std::string(16, '\x02'));
  EXPECT_EQ(uuid_array_binary("").size(), 20u);
}

TEST(pg, sqlstate_is_read_from_statement_errors_only) {
  EXPECT_EQ(sqlstate(error(errc::database, "SQLSTATE 23505: duplicate key value violates unique constraint")),
            unique_violation);
  EXPECT_EQ(sqlstate(error(errc::database, "cannot connect to PostgreSQL: no such host")), "");
  EXPECT_EQ(sqlstate(error(std::make_error_code(std::errc::invalid_argument), "SQLSTATE 23505: x")), "");
}

TEST(pg, errors_name_their_category) {
  const error e(errc::database, "SQLSTATE 40001: could not serialize access");
  EXPECT_STREQ(e.code.category().name(), "txmq.pg");
  EXPECT_EQ(e.to_string(), "database error: SQLSTATE 40001: could not serialize access");
  EXPECT_FALSE(e.retriable());
}

TEST(pg, connecting_to_nothing_fails_with_libpq_text) {
  // Port 1 on loopback: refused at once, no server needed.
  auto c = connect("host=127.0.0.1 port=1 connect_timeout=2");
  ASSERT_FALSE(c);
  EXPECT_TRUE(c.error().is(errc::database));
  EXPECT_THAT(c.error().message, HasSubstr("cannot connect to PostgreSQL"));
}

}  // namespace
}  // namespace txmq::pg
