#include "round.h"

#include "round_statements.h"
#include "txmq/relay/outbox_row.h"

namespace txmq::relay::detail {

void take_rows(const PGresult* res, round& out, const send_check& check) {
  const auto order = publish_order(res);
  out.messages.reserve(order.size());
  out.shards.reserve(order.size());
  out.created.reserve(order.size());
  out.ids.reserve(order.size() * k_id_bytes);
  for (const auto& [shard, seq, i] : order) {
    if (out.stopped.contains(shard)) continue;
    const outbox_row_binary binary = binary_row(res, i);
    auto row = decode_row(binary);
    if (row) {
      if (auto ok = check(shard, row.value().message); !ok) {
        row = client::error(ok.error().code,
                            "outbox row " + row.value().message.id->to_string() + ": " + ok.error().message);
      }
    }
    if (!row) {
      out.stopped.emplace(shard, row.error());
      continue;
    }
    ++out.rows[shard];
    out.last_seq[shard] = row.value().seq;
    out.ids.append(binary.id);
    out.created.push_back(row.value().created_at);
    out.messages.push_back(std::move(row.value().message));
    out.shards.push_back(shard);
  }
}

}  // namespace txmq::relay::detail
