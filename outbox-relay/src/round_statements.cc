#include "round_statements.h"

#include <algorithm>


namespace txmq::relay::detail {
namespace {

// In binary result format: the payload as its raw bytes (no hex encoding in the backend, no
// decoding in the relay), the id, created_at, seq and shard in their binary forms (nothing to
// print as text there and to parse here; the headers as text, whose binary form is its text).
// No ORDER BY over the whole result: sorting it copied every row, payload and all, into a
// tuplesort (a fifth of the backend's time in a backlog, issue #15, ninth round); publish_order()
// orders the rows itself. $4 bounds the seqs read (round_reader.h, "the common ceiling": a guess
// that limits how much is read; k_no_ceiling when unbounded).
constexpr const char* k_read_sql =
    "SELECT r.id, r.topic::text, r.key::text, r.headers::text, r.payload, r.created_at, r.seq, s.shard "
    "FROM unnest($1::int[], $2::bigint[]) AS s(shard, after) CROSS JOIN LATERAL (SELECT * FROM "
    "txmq_outbox o WHERE o.shard = s.shard AND o.seq > s.after AND o.seq <= $4 ORDER BY o.seq LIMIT $3) r";
// The acked ids as a binary uuid[]: no text of thousands of ids to build in the relay and for
// array_in to parse in the backend (8 % of its time in a backlog).
constexpr const char* k_delete_sql = "DELETE FROM txmq_outbox WHERE id = ANY($1::uuid[])";

// PostgreSQL's binary int4 and int8: big-endian.
std::int64_t big_endian(const char* p, int length) {
  std::uint64_t v = 0;
  for (int i = 0; i < length; ++i) v = v << 8 | static_cast<unsigned char>(p[i]);
  if (length == 4) return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
  return static_cast<std::int64_t>(v);
}

}  // namespace

std::string round_statements_setup_sql() {
  // One generic plan for each, reused every round. Planned per run, the delete's `id = ANY($1)`
  // made the planner estimate every one of a round's thousands of ids (scalararraysel → eqsel):
  // 12 % of the backend's time in a backlog (issue #15, ninth round). Only named statements
  // follow plan_cache_mode; the relay's other statements are planned as before.
  // Appended, not chained with +: gcc 12 warns (-Warray-bounds, a false positive) on the chain.
  std::string sql = "SET plan_cache_mode = force_generic_plan; PREPARE ";
  sql.append(k_read_statement).append("(int[], bigint[], int, bigint) AS ").append(k_read_sql);
  sql.append("; PREPARE ").append(k_delete_statement).append("(uuid[]) AS ").append(k_delete_sql);
  return sql;
}

std::vector<row_position> publish_order(const PGresult* res) {
  const int n = PQntuples(res);
  std::vector<row_position> order(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    auto& p = order[static_cast<std::size_t>(i)];
    p.row = i;
    p.shard = static_cast<int>(big_endian(PQgetvalue(res, i, 7), PQgetlength(res, i, 7)));
    p.seq = big_endian(PQgetvalue(res, i, 6), PQgetlength(res, i, 6));
  }
  // seq order over all the round's shards, not shard by shard: each shard's rows stay in seq
  // order (per-key order), and the broker receives the round's ids (UUIDv7 made at INSERT, as
  // outbox_writer makes them) mostly ascending. Its dedupe lookup is skipped for an id above the
  // highest it stored, and its memtable inserts of ascending keys are cheaper: shard by shard,
  // every shard after the first restarted below that highest id (issue #15, thirteenth round).
  std::sort(order.begin(), order.end(), [](const row_position& a, const row_position& b) { return a.seq < b.seq; });
  return order;
}

outbox_row_binary binary_row(const PGresult* res, int row) {
  auto column = [&](int c) {
    return std::string_view(PQgetvalue(res, row, c), static_cast<std::size_t>(PQgetlength(res, row, c)));
  };
  return {column(0),
          column(1),
          PQgetisnull(res, row, 2) ? std::nullopt : std::optional<std::string_view>(column(2)),
          column(3),
          column(4),
          column(5),
          column(6)};
}

}  // namespace txmq::relay::detail
