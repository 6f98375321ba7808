#pragma once

// The two statements of a relay round (relay.cc) and the reading of the read's result: which
// SQL, prepared how, and the rows in the order they are published. Apart from the loop because
// they need none of its state.

#include <libpq-fe.h>

#include <cstdint>
#include <string>
#include <vector>

#include "txmq/client/error.h"
#include "txmq/relay/outbox_row.h"

namespace txmq::relay::detail {

// A round's read: the oldest $3 rows past a seq of each of several shards ($1 int[] of shards,
// $2 bigint[] of seqs) and not above the seq $4 (the read's upper bound, round_reader.h), through
// the (shard, seq) index, one index range per shard; the columns in binary result format
// (outbox_row_binary, then the shard as int4).
inline constexpr const char* k_read_statement = "txmq_relay_read";
// Deletes the rows of the ids in $1, a uuid[] in binary form (pg::uuid_array_binary).
inline constexpr const char* k_delete_statement = "txmq_relay_delete";
inline constexpr std::size_t k_id_bytes = 16;

// SQL that sets a new session up for the round statements and prepares both (a prepared
// statement lives as long as its session), to run with the session's other settings in one
// round trip (pg::exec without parameters), so that connecting meets no more steps than before.
[[nodiscard]] std::string round_statements_setup_sql();

// Where a row of the read's result goes: in seq order over all its shards (so each shard's rows,
// and each key's, in seq order), which is the order the rows are published in; never the order
// the plan returned them in.
struct row_position {
  int shard = 0;
  std::int64_t seq = 0;
  int row = 0;  // in the PGresult
};
[[nodiscard]] std::vector<row_position> publish_order(const PGresult* res);

// Row `row` of the read's result, as views into `res`.
[[nodiscard]] outbox_row_binary binary_row(const PGresult* res, int row);

}  // namespace txmq::relay::detail
