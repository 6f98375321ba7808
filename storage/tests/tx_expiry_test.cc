// The transaction family's compaction filter reads two fields of a record without parsing it
// (src/tx_expiry.h): what it decides must be what a parse of the record decides.

#include <google/protobuf/stubs/logging.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "tx_expiry.h"
#include "txmq/storage/store.h"
#include "txmq/storage/v1/records.pb.h"

namespace txmq::storage::detail {
namespace {

// The filter's rule on a parsed record, as it was written before the field reader.
bool parsed_resolved_before(const records::TxRecord& rec, std::int64_t cutoff_ms) {
  const auto st = static_cast<tx_state>(rec.state());
  return (st == tx_state::committed || st == tx_state::rolled_back) && rec.resolved_ms() < cutoff_ms;
}

records::TxRecord record(tx_state state, std::int64_t resolved_ms, int messages) {
  records::TxRecord rec;
  rec.set_txid(std::string(16, '\x7'));
  rec.set_producer_group("orders");
  rec.set_state(static_cast<std::uint32_t>(state));
  rec.set_prepared_ms(resolved_ms - 5);
  rec.set_next_check_ms(resolved_ms + 6000);
  rec.set_resolved_ms(resolved_ms);
  rec.set_home_topic("t");
  for (int i = 0; i < messages; ++i) {
    auto* m = rec.add_messages();
    m->set_id(std::string(16, static_cast<char>(i)));
    m->set_topic("payments");
    m->set_key("k" + std::to_string(i));
    m->set_body(std::string(256, 'b'));
    (*m->mutable_headers())["h"] = "v";
  }
  rec.add_acks()->set_group("g");
  return rec;
}

TEST(tx_expiry, a_resolved_record_expires_only_before_the_cutoff) {
  for (auto state : {tx_state::committed, tx_state::rolled_back}) {
    const std::string bytes = record(state, 1'000, 3).SerializeAsString();
    EXPECT_TRUE(resolved_before(bytes, 1'001));
    EXPECT_FALSE(resolved_before(bytes, 1'000));
    EXPECT_FALSE(resolved_before(bytes, 0));
  }
}

TEST(tx_expiry, prepared_and_abandoned_records_never_expire) {
  for (auto state : {tx_state::prepared, tx_state::abandoned}) {
    EXPECT_FALSE(resolved_before(record(state, 1'000, 2).SerializeAsString(), 1'000'000));
  }
}

TEST(tx_expiry, a_field_given_twice_counts_with_its_last_value_as_in_a_parse) {
  // Two serialized records one after the other parse as one record: the later scalars win.
  const std::string first = record(tx_state::committed, 1'000, 1).SerializeAsString();
  const std::string second = record(tx_state::prepared, 1'000, 0).SerializeAsString();
  records::TxRecord merged;
  ASSERT_TRUE(merged.ParseFromString(first + second));
  EXPECT_EQ(resolved_before(first + second, 2'000), parsed_resolved_before(merged, 2'000));
  EXPECT_FALSE(resolved_before(first + second, 2'000));
  EXPECT_TRUE(resolved_before(second + first, 2'000));
}

TEST(tx_expiry, bytes_that_are_not_a_record_are_kept) {
  const std::string bytes = record(tx_state::committed, 1'000, 2).SerializeAsString();
  // Cut inside the last field, and a field number 0 (no valid tag).
  EXPECT_FALSE(resolved_before(bytes.substr(0, bytes.size() - 1), 2'000));
  EXPECT_FALSE(resolved_before(std::string("\x00\x01", 2), 2'000));
  // A length past the end.
  EXPECT_FALSE(resolved_before(std::string("\x22\x7f\x01", 3), 2'000));
}

TEST(tx_expiry, damaged_records_decide_as_a_parse_does_wherever_it_succeeds) {
  // The parse logs each damaged string it refuses; thousands of lines would bury a failure.
  const google::protobuf::LogSilencer quiet;
  std::mt19937 rng(20261128);
  int parsed = 0;
  for (int i = 0; i < 20'000; ++i) {
    const auto state = static_cast<tx_state>(1 + rng() % 4);
    std::string bytes = record(state, 1'000 + static_cast<std::int64_t>(rng() % 2'000), static_cast<int>(rng() % 3)).SerializeAsString();
    const int changes = 1 + static_cast<int>(rng() % 3);
    for (int c = 0; c < changes; ++c) bytes[rng() % bytes.size()] = static_cast<char>(rng());
    if (rng() % 4 == 0) bytes.resize(rng() % bytes.size());
    records::TxRecord rec;
    if (!rec.ParseFromString(bytes)) continue;  // the reader may decide either way (tx_expiry.h)
    ++parsed;
    ASSERT_EQ(resolved_before(bytes, 2'000), parsed_resolved_before(rec, 2'000)) << "input " << i;
  }
  EXPECT_GT(parsed, 1'000);  // the comparison ran on enough inputs to mean something
}

}  // namespace
}  // namespace txmq::storage::detail
