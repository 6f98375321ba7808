#include "round.h"

#include "txmq/protocol/errc.h"
#include "txmq/protocol/message_id.h"

#include "round_statements.h"
#include "txmq/relay/outbox_row.h"

namespace txmq::relay::detail {

settled settle(round& r, common::histogram& row_age) {
  std::string acked;
  std::optional<client::error> failed;
  const auto now = std::chrono::system_clock::now();
  if (r.acks) {
    std::unique_lock lock(r.acks->mutex);
    r.acks->all_done.wait(lock, [&] { return r.acks->done.load() == r.acks->results.size(); });
  }
  acked.reserve(r.sent * k_id_bytes);
  for (std::size_t i = 0; i < r.sent; ++i) {
    auto& a = *r.acks->results[i];
    if (!a) {
      if (!failed) failed = a.error();
      continue;
    }
    acked.append(r.ids, i * k_id_bytes, k_id_bytes);
    row_age.observe(now - r.created[i]);
  }
  return {std::move(acked), failed};
}

void take_rows(const read_result& read, round& out, const send_check& check) {
  const PGresult* res = read.rows.get();
  const auto& order = read.order;
  out.last_seq = read.from;  // raised below for the shards rows are taken of
  out.unfinished = read.unfinished;
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
    // A round has few topics, and rows of one topic mostly follow each other: look from the last.
    const std::string& topic = out.messages.back().topic;
    std::size_t t = out.topic_names.size();
    while (t > 0 && out.topic_names[t - 1] != topic) --t;
    if (t == 0) {
      out.topic_names.push_back(topic);
      t = out.topic_names.size();
    }
    out.topic_of.push_back(static_cast<std::uint32_t>(t - 1));
  }
}

bool refuses_topic(const client::error& e) noexcept {
  using protocol::errc;
  return e.code == errc::not_authorized || e.code == errc::unknown_topic || e.code == errc::invalid_argument ||
         e.code == errc::message_too_large;
}

round_failures sort_failures(round& r) {
  round_failures out;
  if (!r.acks) return out;
  // The first refusal of each refused topic: its code and text are the reason of every shard it stops.
  std::map<std::uint32_t, const client::error*> refusal;
  for (std::size_t i = 0; i < r.sent; ++i) {
    const auto& a = *r.acks->results[i];
    if (!a && refuses_topic(a.error())) refusal.emplace(r.topic_of[i], &a.error());
  }
  for (std::size_t i = 0; i < r.sent; ++i) {
    const auto& a = *r.acks->results[i];
    if (a) continue;
    const auto why = refusal.find(r.topic_of[i]);
    if (why == refusal.end()) {
      if (!out.broker_error) out.broker_error = a.error();
      continue;
    }
    const int shard = r.shards[i];
    if (!out.refused.insert(shard).second) continue;  // stopped at an earlier row already
    const auto id = protocol::message_id::from_bytes(std::string_view(r.ids).substr(i * k_id_bytes, k_id_bytes));
    // Replaces a stop take_rows found later in the shard: this row comes first.
    r.stopped.insert_or_assign(
        shard, client::error(why->second->code, "outbox row " + (id ? id.value().to_string() : std::string("?")) +
                                                    ": the broker refuses topic '" + r.topic_names[r.topic_of[i]] +
                                                    "': " + why->second->to_string()));
  }
  return out;
}

}  // namespace txmq::relay::detail
