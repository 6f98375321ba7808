// Fuzz target: the relay's decoding of one txmq_outbox row (decode_row), with every column
// taken from the input. The input is the columns separated by 0xff bytes (id, topic, key,
// headers JSON, payload hex, created_at ms, seq); a missing key column means SQL NULL. Never a
// crash; a decoded row keeps the topic and key it was given.

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <vector>

#include "txmq/relay/outbox_row.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> columns;
  while (columns.size() < 6) {
    const auto cut = rest.find('\xff');
    if (cut == std::string_view::npos) break;
    columns.push_back(rest.substr(0, cut));
    rest.remove_prefix(cut + 1);
  }
  columns.push_back(rest);
  columns.resize(7);
  txmq::relay::outbox_row_text row;
  row.id = columns[0];
  row.topic = columns[1];
  if (!columns[2].empty()) row.key = columns[2];
  row.headers_json = columns[3];
  row.payload_hex = columns[4];
  row.created_at_ms = columns[5];
  row.seq = columns[6];
  auto decoded = txmq::relay::decode_row(row);
  if (decoded) {
    const auto& m = decoded.value().message;
    if (m.topic != row.topic) std::abort();
    if (row.key.has_value() != m.key.has_value() || (row.key && *m.key != *row.key)) std::abort();
  }
  return 0;
}
