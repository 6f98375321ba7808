// protocol/wire.h: the hand reader of protobuf's wire format, against protobuf's own encoding.

#include <string>
#include <string_view>

#include <gtest/gtest.h>
#include <google/protobuf/unknown_field_set.h>

#include "txmq/protocol/wire.h"
#include "txmq/v1/message.pb.h"

namespace txmq::protocol::wire {
namespace {

// Walks every top-level field of `bytes` with skip_field; true when all of them were skipped.
bool skips_all(std::string_view bytes) {
  while (!bytes.empty()) {
    std::uint64_t field = 0;
    std::uint32_t type = 0;
    if (!take_tag(bytes, field, type) || !skip_field(bytes, field, type)) return false;
  }
  return true;
}

std::string tag(std::uint64_t field, std::uint32_t type) {
  std::string out;
  put_varint(out, field << 3 | type);
  return out;
}

TEST(wire, skip_field_passes_over_every_wire_type_protobuf_writes_groups_included) {
  v1::Message m;
  m.set_id(std::string(16, '\1'));
  m.set_body("b");
  auto* u = m.GetReflection()->MutableUnknownFields(&m);
  u->AddVarint(40, 1u << 20);
  u->AddFixed32(41, 7);
  u->AddFixed64(42, 8);
  u->AddLengthDelimited(43, "len");
  auto* g = u->AddGroup(44);
  g->AddVarint(1, 2);
  g->AddGroup(44)->AddGroup(3)->AddLengthDelimited(4, "deep");  // the same number nested
  g->AddFixed32(5, 6);
  const std::string bytes = m.SerializeAsString();
  EXPECT_TRUE(skips_all(bytes));
  // Cut anywhere inside, the walk fails instead of reading past the end.
  for (std::size_t n = 1; n < bytes.size(); ++n) {
    const std::string_view cut(bytes.data(), n);
    v1::Message parsed;
    // protobuf agrees on which prefixes are whole messages.
    EXPECT_EQ(skips_all(cut), parsed.ParseFromArray(cut.data(), static_cast<int>(cut.size()))) << n;
  }
}

TEST(wire, a_group_ends_only_at_its_own_end_tag) {
  EXPECT_TRUE(skips_all(tag(7, k_start_group) + tag(1, k_varint) + "\x05" + tag(7, k_end_group)));
  EXPECT_FALSE(skips_all(tag(7, k_start_group) + tag(1, k_varint) + "\x05" + tag(8, k_end_group)));
  EXPECT_FALSE(skips_all(tag(7, k_start_group) + tag(1, k_varint) + "\x05"));  // never closed
  EXPECT_FALSE(skips_all(tag(7, k_end_group)));                               // closes nothing
  EXPECT_FALSE(skips_all(tag(7, 6)));                                         // no wire type 6
}

TEST(wire, groups_nest_to_protobufs_recursion_limit_and_no_deeper) {
  auto nested = [](int depth) {
    std::string open;
    std::string close;
    for (int i = 0; i < depth; ++i) {
      open += tag(9, k_start_group);
      close = tag(9, k_end_group) + close;
    }
    return open + close;
  };
  EXPECT_TRUE(skips_all(nested(100)));
  EXPECT_FALSE(skips_all(nested(101)));
  EXPECT_FALSE(skips_all(nested(100000)));  // refused, not a stack overflow
}

TEST(wire, skip_value_refuses_the_group_wire_types) {
  std::string_view s = "\x01";
  EXPECT_FALSE(skip_value(s, k_start_group));
  EXPECT_FALSE(skip_value(s, k_end_group));
}

}  // namespace
}  // namespace txmq::protocol::wire
