#include "txmq/producer/outbox_writer.h"

#include <boost/json.hpp>

#include "txmq/pg/pg.h"

namespace txmq::producer {
namespace {

std::string headers_json(const std::map<std::string, std::string>& headers) {
  boost::json::object o;
  for (const auto& [k, v] : headers) o[k] = v;
  return boost::json::serialize(o);
}

}  // namespace

client::result<outbox_row> outbox_writer::add(const outbox_message& message) {
  auto rows = add(std::span<const outbox_message>(&message, 1));
  if (!rows) return rows.error();
  return rows.value().front();
}

client::result<std::vector<outbox_row>> outbox_writer::add(std::span<const outbox_message> messages) {
  if (messages.empty()) return std::vector<outbox_row>{};
  if (PQtransactionStatus(conn_) != PQTRANS_INTRANS) {
    return client::error(client::errc::invalid_argument,
                         "outbox rows must be written inside the caller's open transaction (BEGIN first, e.g. "
                         "pg::in_transaction); a row committed on its own would not follow the business rows");
  }
  // One multi-row INSERT: one round trip however many rows, and VALUES order is insert order,
  // so the rows' seq follow the order given.
  std::string sql = "INSERT INTO txmq_outbox (id, topic, key, headers, payload) VALUES ";
  std::vector<pg::param> params;
  params.reserve(messages.size() * 5);
  std::vector<protocol::message_id> ids;
  ids.reserve(messages.size());
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (m.topic.empty()) return client::error(client::errc::invalid_argument, "an outbox row needs a topic");
    ids.push_back(m.id ? *m.id : protocol::uuid::make_v7());
    const auto n = i * 5;
    sql += (i ? ", (" : "(") + std::string("$") + std::to_string(n + 1) + "::uuid, $" + std::to_string(n + 2) + ", $" +
           std::to_string(n + 3) + ", $" + std::to_string(n + 4) + "::jsonb, $" + std::to_string(n + 5) + "::bytea)";
    params.emplace_back(ids.back().to_string());
    params.emplace_back(m.topic);
    params.emplace_back(m.key);
    params.emplace_back(headers_json(m.headers));
    params.emplace_back(pg::bytea_literal(m.payload));
  }
  sql += " RETURNING id, shard, seq";
  auto r = pg::exec(conn_, sql, std::span<const pg::param>(params));
  if (!r) return r.error();
  // PostgreSQL does not promise RETURNING in VALUES order: match the rows by id.
  std::map<std::string, std::pair<int, std::int64_t>> placed;
  for (int row = 0; row < PQntuples(r.value().get()); ++row) {
    placed[PQgetvalue(r.value().get(), row, 0)] = {std::stoi(PQgetvalue(r.value().get(), row, 1)),
                                                   std::stoll(PQgetvalue(r.value().get(), row, 2))};
  }
  std::vector<outbox_row> out;
  out.reserve(ids.size());
  for (const auto& id : ids) {
    const auto& [shard, seq] = placed[id.to_string()];
    out.push_back({id, shard, seq});
  }
  return out;
}

}  // namespace txmq::producer
