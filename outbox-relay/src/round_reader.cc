#include "round_reader.h"

#include <algorithm>
#include <charconv>
#include <string>

#include "round_statements.h"

namespace txmq::relay::detail {
namespace {

// Reads whose floors are kept for rounds still in flight. Only one round is in flight when its
// successor is read, so two would do; a few more cost nothing.
constexpr std::size_t k_recent_floors = 8;

// The read's opening: its snapshot (the transaction's first statement takes it), the outbox
// sequence's last value, then an xid. OFFSET 0 keeps the inner query a separate step, so the
// sequence is read before pg_current_xact_id() assigns the xid (the rule's bound needs that order).
constexpr const char* k_open_sql =
    "BEGIN ISOLATION LEVEL REPEATABLE READ; "
    "SELECT s::text, coalesce(v, 0), pg_current_xact_id()::text FROM (SELECT pg_current_snapshot() AS s, "
    "pg_sequence_last_value(pg_get_serial_sequence('txmq_outbox', 'seq')::regclass) AS v OFFSET 0) q";

}  // namespace

const char* read_start_name(read_start s) {
  switch (s) {
    case read_start::resume: return "resume";
    case read_start::lowered: return "lowered";
    case read_start::full: return "full";
    case read_start::deferred: return "deferred";
  }
  return "full";
}

std::string old_schema_warning(int version) {
  return "the outbox schema is version " + std::to_string(version) +
         ": every read starts at each shard's beginning (per-key order needs version 3 to read past rows already "
         "read), which is slow in a backlog; run `txmq outbox init --pg CONN` (idempotent) to upgrade it";
}

round_reader::round_reader(int batch, bool order_rule) : batch_(batch), order_rule_(order_rule) {}

void round_reader::reset() {
  open_ = open_transactions();
  resume_.clear();
  recent_floors_.clear();
  forgotten_floors_up_to_ = 0;
  unobserved_.clear();
  needs_snapshot_.clear();
  last_ceiling_ = 0;
  span_ = 0;
}

bool round_reader::observed(std::uint64_t read_no) const {
  // Reads older than the window are counted as unobserved: cautious, never wrong.
  return read_no + k_recent_floors > reads_ && !unobserved_.contains(read_no);
}

std::optional<std::int64_t> round_reader::resume_point(int shard) const {
  if (auto it = resume_.find(shard); it != resume_.end()) return it->second;
  return std::nullopt;
}

void round_reader::read_from_start(int shard) {
  resume_.erase(shard);
  needs_snapshot_.erase(shard);
}

void round_reader::resume_after(int shard, std::int64_t last_seq, std::uint64_t read_no) {
  if (!order_rule_) return;
  if (!observed(read_no)) {
    // Read without a snapshot: nothing says which transactions might still commit below
    // last_seq. Its next read takes one and starts from the beginning.
    resume_.erase(shard);
    needs_snapshot_.insert(shard);
    return;
  }
  // A read after this round's (its pipelined successor's) may have seen a transaction complete
  // whose rows lie below last_seq.
  if (read_no < forgotten_floors_up_to_) {
    resume_.erase(shard);  // a floor of a later read is no longer remembered: from the start
    return;
  }
  for (auto it = recent_floors_.upper_bound(read_no); it != recent_floors_.end(); ++it) {
    last_seq = std::min(last_seq, it->second);
  }
  if (last_seq <= 0) {
    resume_.erase(shard);
  } else {
    resume_[shard] = last_seq;
  }
}

bool round_reader::lower_all(std::int64_t floor, std::uint64_t read_no) {
  bool moved = false;
  for (auto it = resume_.begin(); it != resume_.end();) {
    if (it->second <= floor) {
      ++it;
      continue;
    }
    moved = true;
    if (floor <= 0) {
      it = resume_.erase(it);
    } else {
      it->second = floor;
      ++it;
    }
  }
  recent_floors_[read_no] = floor;
  while (recent_floors_.size() > k_recent_floors) {
    forgotten_floors_up_to_ = recent_floors_.begin()->first;
    recent_floors_.erase(recent_floors_.begin());
  }
  return moved;
}

client::result<read_result> round_reader::read(PGconn* conn, const std::set<int>& shards,
                                               const std::map<int, std::int64_t>* in_flight, std::uint64_t in_flight_read_no) {
  read_result out;
  out.read_no = ++reads_;
  // A snapshot is needed only where a read point past 0 is used now or may be set from this
  // read's rows: shards with resume points or a backlog, a round in flight. A relay keeping up
  // (every shard drained each round) reads with one statement, as before the rule.
  bool observe = order_rule_ && in_flight != nullptr;
  for (int s : shards) observe = observe || resume_.contains(s) || needs_snapshot_.contains(s);
  if (order_rule_ && in_flight && !observed(in_flight_read_no)) {
    out.start = read_start::deferred;  // past a round read without a snapshot: never
    return out;
  }
  if (order_rule_ && !observe) {
    unobserved_.insert(out.read_no);
    while (!unobserved_.empty() && *unobserved_.begin() + k_recent_floors <= reads_) unobserved_.erase(unobserved_.begin());
  }
  std::optional<std::int64_t> floor;
  std::optional<std::int64_t> sequence_value;  // the seq sequence's last value at the snapshot
  bool lowered = false;  // the rule moved some read point down
  bool in_transaction = false;
  // Ends the snapshot's transaction, if one was opened: COMMIT after a read, ROLLBACK after a
  // failure (whose own error is the one reported).
  const auto end_transaction = [&](bool commit) -> client::result<void> {
    if (!in_transaction) return outcome::success();
    in_transaction = false;
    if (!commit) {
      (void)pg::exec(conn, "ROLLBACK");
      return outcome::success();
    }
    if (auto c = pg::exec(conn, "COMMIT"); !c) return c.error();
    return outcome::success();
  };
  if (observe) {
    in_transaction = true;  // a failed BEGIN leaves nothing to roll back; ROLLBACK is harmless then
    auto snap = pg::exec(conn, k_open_sql);
    if (!snap) {
      (void)end_transaction(false);
      return snap.error();
    }
    PGresult* sr = snap.value().get();
    const std::string_view snapshot_text = PQgetvalue(sr, 0, 0);
    const std::string_view seq_text = PQgetvalue(sr, 0, 1);
    const std::string_view xid_text = PQgetvalue(sr, 0, 2);
    auto snapshot = parse_snapshot(snapshot_text);
    std::uint64_t xid = 0;
    std::int64_t seq = 0;
    const auto x = std::from_chars(xid_text.data(), xid_text.data() + xid_text.size(), xid);
    const auto q = std::from_chars(seq_text.data(), seq_text.data() + seq_text.size(), seq);
    if (!snapshot || x.ec != std::errc() || x.ptr != xid_text.data() + xid_text.size() || q.ec != std::errc() ||
        q.ptr != seq_text.data() + seq_text.size()) {
      (void)end_transaction(false);
      return client::error(pg::errc::database, "PostgreSQL returned a snapshot the relay cannot read: '" +
                                                   std::string(snapshot_text) + "', xid '" + std::string(xid_text) +
                                                   "', sequence value '" + std::string(seq_text) + "'");
    }
    sequence_value = seq;
    floor = open_.observe(*snapshot, xid, seq);
    if (floor) lowered = lower_all(*floor, out.read_no);
  }

  std::string shard_list = "{", after_list = "{";
  bool past = false;
  std::int64_t highest_from = 0;
  for (int s : shards) {
    std::int64_t from = 0;
    if (in_flight) {
      if (auto it = in_flight->find(s); it != in_flight->end()) {
        from = it->second;
        // Past the round in flight only if nothing below its end may have become visible since
        // it was read; reading lower would return its rows again (they are not deleted yet).
        if (!order_rule_ || (floor && *floor < from)) {
          out.start = read_start::deferred;
          if (auto c = end_transaction(true); !c) return c.error();
          return out;
        }
      }
    } else if (order_rule_) {
      if (auto it = resume_.find(s); it != resume_.end()) from = it->second;
    }
    past = past || from > 0;
    out.from[s] = from;
    highest_from = std::max(highest_from, from);
    shard_list += (shard_list.size() > 1 ? "," : "") + std::to_string(s);
    after_list += (after_list.size() > 1 ? "," : "") + std::to_string(from);
  }
  shard_list += "}";
  after_list += "}";
  out.start = !past ? read_start::full : lowered ? read_start::lowered : read_start::resume;

  // The upper bound: a guess, past the last ceiling by the seqs a round spanned. Only where the
  // snapshot says which seqs exist (its sequence value): a bound at or above it bounds nothing, and
  // below it a short read no longer means drained. A read without a snapshot (shards keeping up)
  // is unbounded, as before the ceiling.
  const std::int64_t base = std::max(highest_from, last_ceiling_);
  std::int64_t bound = k_no_ceiling;
  // One shard cannot run ahead of another: its reads are bounded by `batch` alone.
  if (sequence_value && shards.size() > 1 && base > 0 && span_ > 0 && span_ < *sequence_value - base) bound = base + span_;

  const pg::param params[] = {shard_list, after_list, std::to_string(batch_), std::to_string(bound)};
  auto rows = pg::exec_prepared(conn, k_read_statement, params, true);
  if (!rows) {
    (void)end_transaction(false);
    return rows.error();
  }
  if (auto c = end_transaction(true); !c) return c.error();
  out.rows = std::move(rows).value();
  take_up_to_ceiling(out, bound, base);
  return out;
}

void round_reader::take_up_to_ceiling(read_result& out, std::int64_t bound, std::int64_t base) {
  out.order = publish_order(out.rows.get());
  struct shard_rows {
    int n = 0;
    std::int64_t first = 0, last = 0;
  };
  std::map<int, shard_rows> per_shard;
  for (const auto& p : out.order) {  // in seq order: a shard's first row comes first
    auto& r = per_shard[p.shard];
    if (r.n++ == 0) r.first = p.seq;
    r.last = p.seq;
  }
  // A full shard's next rows lie right above its last: another shard's rows above that, taken now,
  // would go to the broker before them, and the drain's ids would no longer ascend.
  std::int64_t ceiling = bound;
  bool full = false;
  std::int64_t lowest_first = k_no_ceiling;
  for (const auto& [shard, r] : per_shard) {
    lowest_first = std::min(lowest_first, r.first);
    if (r.n < batch_) continue;
    full = true;
    ceiling = std::min(ceiling, r.last);
    out.unfinished.insert(shard);
  }
  const auto cut = std::upper_bound(out.order.begin(), out.order.end(), ceiling,
                                    [](std::int64_t c, const row_position& p) { return c < p.seq; });
  for (auto it = cut; it != out.order.end(); ++it) out.unfinished.insert(it->shard);
  out.above_ceiling = static_cast<std::size_t>(out.order.end() - cut);
  out.order.erase(cut, out.order.end());
  if (bound != k_no_ceiling) {
    // Bounded below the sequence's value: every shard may have rows above the bound.
    for (const auto& [shard, from] : out.from) out.unfinished.insert(shard);
  }

  // The next guess. A full shard set the ceiling: the next round spans as many seqs. Else the
  // bound came first (rows were sparser than guessed): widen it. Every shard read took all its
  // rows up to the ceiling, so the next round starts there.
  if (full) {
    const std::int64_t start = bound != k_no_ceiling ? base : lowest_first - 1;
    if (ceiling > start) span_ = ceiling - start;
    last_ceiling_ = ceiling;
  } else if (bound != k_no_ceiling) {
    span_ += span_ / 8 + 1;
    last_ceiling_ = bound;
  } else {
    last_ceiling_ = 0;  // every shard drained: the next backlog starts afresh
  }
}

}  // namespace txmq::relay::detail
