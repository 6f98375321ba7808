#pragma once

// Where each shard's next read starts, and the read itself (README "Where a read starts"): past
// what this session already read and deleted when the order rule allows it
// (open_transactions.h), lower when a transaction that was running at the previous read has
// completed since. Apart from the loop (relay.cc) so that a test can drive reads and writers
// step by step against a real PostgreSQL.
//
// A read that uses or may set a point past 0 is its own REPEATABLE READ transaction: the snapshot
// the rule judges is the one the read sees (pg_current_snapshot() returns the transaction's
// snapshot), and pg_current_xact_id() in it is an xid assigned after that snapshot. Three round
// trips: BEGIN with the snapshot, the prepared read (binary result, round_statements.h), COMMIT.
// A read of drained shards without resume points is the prepared read alone. The relay's role
// needs SELECT (or USAGE) on the outbox's seq sequence, whose last value the opening reads.
//
// The common ceiling (README "The common ceiling"): a round takes, of every shard it reads, only
// rows up to one seq, the ceiling, so that a drain's rounds are one ascending run of seqs (and of
// the UUIDv7 ids made with them) over all shards. The ceiling is the smallest last seq of the
// shards whose read came back full (`batch` rows: they may have more below the others' rows);
// rows above it are read but not taken, and read again by the next round. A read of several
// shards with a snapshot also gets an upper bound, a guess from the previous round (its ceiling
// plus its width), so that little is read only to be left; the guess decides nothing but how much
// is read. A shard is drained only when its read came back short of `batch` with no bound below
// the sequence's value and nothing left above the ceiling.
//
// Not thread-safe: one per relay session, used by the session's thread.

#include <libpq-fe.h>

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "open_transactions.h"
#include "round_statements.h"
#include "txmq/client/error.h"
#include "txmq/pg/pg.h"

namespace txmq::relay::detail {

// How a read started, for txmq_relay_reads_total{start}.
enum class read_start {
  resume,    // some shard was read past its resume point (or its in-flight round), none moved down
  lowered,   // the rule moved read points down (to a seq above 0): a transaction completed late
  full,      // every shard from its start (no resume point, or the rule moved them to 0)
  deferred,  // nothing read: a point would come below the round in flight, or that round was read
             // without a snapshot (read())
};

inline constexpr read_start k_read_starts[] = {read_start::resume, read_start::lowered, read_start::full, read_start::deferred};
[[nodiscard]] const char* read_start_name(read_start s);
inline constexpr const char* k_reads_help =
    "outbox reads by where they started: resume = past the rows read before, lowered = below that because a transaction "
    "completed late, full = from the shards' start, deferred = not read while the previous round was in flight";
// What the relay logs on a schema older than version 3.
[[nodiscard]] std::string old_schema_warning(int version);

// No ceiling: every row a shard's read returns is taken.
inline constexpr std::int64_t k_no_ceiling = std::numeric_limits<std::int64_t>::max();

struct read_result {
  pg::result_ptr rows;  // the read's rows (round_statements.h's columns); null when deferred
  // The rows to take, in publish order (publish_order): those up to the ceiling. Empty when deferred.
  std::vector<row_position> order;
  // Where each shard's read started (its resume point, the round in flight's last seq, or 0).
  std::map<int, std::int64_t> from;
  // Shards that may have rows past what is taken: their read came back full, or was bounded below
  // the sequence's value, or had rows above the ceiling. The others drained.
  std::set<int> unfinished;
  std::size_t above_ceiling = 0;  // rows read but not taken (read again by the next round)
  read_start start = read_start::full;
  std::uint64_t read_no = 0;  // this read's number in the session (for resume_after)
};

class round_reader {
 public:
  // batch: rows per shard per read. order_rule: the schema takes seqs after xids (version 3);
  // without it no read may go past rows already read, so every read starts at seq 0 and a
  // round's successor is never read while the round is in flight (always deferred).
  round_reader(int batch, bool order_rule);

  // Reads the oldest `batch` rows of each of `shards` past its read point and takes those up to
  // the common ceiling (above). The read point: for a shard in
  // `in_flight` (the round being published; null when none) past that round's last seq, else past
  // its resume point, else from its start (`in_flight_read_no`: the read number of the round in
  // flight). A read of shards that all drained and have no resume point takes no snapshot (one
  // statement); a round it returns gives no resume point. When the rule moves a point below a shard's in-flight
  // seq, nothing is read (read_start::deferred): read those shards again, without in_flight, once
  // that round is deleted and resume_after() recorded it. Errors: the database's (the session is
  // left outside any transaction when it is alive).
  [[nodiscard]] client::result<read_result> read(PGconn* conn, const std::set<int>& shards,
                                                 const std::map<int, std::int64_t>* in_flight,
                                                 std::uint64_t in_flight_read_no = 0);

  // Every row of a round read by read `read_no` up to `last_seq` of `shard` was acked and
  // deleted: the shard's next read may start past it (or lower, if a later read's snapshot
  // said so).
  void resume_after(int shard, std::int64_t last_seq, std::uint64_t read_no);
  // The shard's next read starts at seq 0 (it drained, or moved to or from this relay).
  void read_from_start(int shard);
  // A new session: no resume points, no snapshots.
  void reset();

  [[nodiscard]] std::optional<std::int64_t> resume_point(int shard) const;
  [[nodiscard]] bool order_rule() const noexcept { return order_rule_; }

 private:
  // Moves every resume point above `floor` down to it (0: erased); remembers the floor for rounds
  // still in flight. Returns whether a point moved.
  bool lower_all(std::int64_t floor, std::uint64_t read_no);
  // Fills out's order and unfinished from its rows (read with upper bound `bound`, past
  // the guess's `base`), and makes the next read's guess.
  void take_up_to_ceiling(read_result& out, std::int64_t bound, std::int64_t base);

  int batch_;
  bool order_rule_;
  open_transactions open_;
  std::map<int, std::int64_t> resume_;
  std::uint64_t reads_ = 0;
  // Floors the rule returned at recent reads (read number, floor), for a round still in flight
  // then whose resume point is recorded afterwards.
  std::map<std::uint64_t, std::int64_t> recent_floors_;
  std::uint64_t forgotten_floors_up_to_ = 0;  // the newest read whose floor was dropped
  std::set<std::uint64_t> unobserved_;        // recent reads that took no snapshot
  std::set<int> needs_snapshot_;              // shards whose last round came from such a read
  // The guess of the next read's upper bound: the last ceiling (every shard read then took all its
  // rows up to it) plus the seqs a round spanned. Only how much is read depends on it.
  std::int64_t last_ceiling_ = 0;
  std::int64_t span_ = 0;
  [[nodiscard]] bool observed(std::uint64_t read_no) const;
};

}  // namespace txmq::relay::detail
