#pragma once

// The order rule of a resumed read (README "Where a read starts"): which transactions may still
// commit outbox rows below the seqs the relay has already read, told from PostgreSQL snapshots
// alone. Pure: no database, unit-tested with hand-written snapshots.
//
// Why it holds: with schema version 3 a row's seq is taken after its transaction has an xid
// (txmq_outbox_next_seq()). A row invisible to a read but with a seq below one that read
// returned took its seq before that read's snapshot, so its transaction had an xid then and was
// still running: it is in the snapshot's in-progress list, or its xid lies in [xmax, X) where X
// is an xid assigned after the snapshot (PostgreSQL's xmax is the latest completed xid + 1, and
// running xids above it are not listed). Such a transaction stays in every later read's set
// until a snapshot shows it completed; that read must start low enough to return its rows.
// How low: a transaction first seen at read j has an xid above read j-1's X, so it got it after
// X was assigned, and its seqs after that: above the sequence's last value read before X was
// assigned. In a backlog that bound is the sequence's head, above every read point, so writers
// committing meanwhile move nothing; only transactions that took seqs long ago do.

#include <cstdint>
#include <deque>
#include <optional>
#include <string_view>
#include <vector>

namespace txmq::relay::detail {

// pg_current_snapshot()'s text "xmin:xmax:xip,xip,...": 64-bit xids (xid8), so no wraparound.
struct pg_snapshot {
  std::uint64_t xmin = 0;
  std::uint64_t xmax = 0;
  std::vector<std::uint64_t> xip;  // sorted ascending, each in [xmin, xmax)
};

// nullopt for text that is not a snapshot (or whose in-progress xids are outside [xmin, xmax)).
[[nodiscard]] std::optional<pg_snapshot> parse_snapshot(std::string_view text);

// Whether `xid` (a top-level transaction's) had not completed when `s` was taken: listed in
// progress, or at or above xmax. (A subtransaction's xid is never listed: it reads as completed,
// which only makes the rule below more cautious.)
[[nodiscard]] bool in_progress(const pg_snapshot& s, std::uint64_t xid);

// The transactions that may still commit rows below what the relay has read, across the reads
// of one PostgreSQL session (a new session starts a new one). Not thread-safe.
class open_transactions {
 public:
  // Call with each read's snapshot before the read uses it: `assigned_after` is an xid assigned
  // after the snapshot was taken (pg_current_xact_id() in the read's transaction), and
  // `seq_before_xid` the outbox sequence's last value read before that xid was assigned (0 when
  // it has none). Returns nullopt when every transaction that was running at the previous snapshot is still
  // running (reads may go on past what was read before), or else a seq F: rows that became
  // visible since the previous snapshot all have seqs above F, so every read point must come
  // down to at most F (0: the shard's start).
  [[nodiscard]] std::optional<std::int64_t> observe(const pg_snapshot& s, std::uint64_t assigned_after,
                                                    std::int64_t seq_before_xid);

  // Epochs kept (bounded: older ones merge, which only lowers their bound).
  [[nodiscard]] std::size_t epochs() const noexcept { return epochs_.size(); }

 private:
  // Transactions with xids below `end` (and at or above the previous epoch's end) have every
  // seq above `above`. Ordered by end; `above` never decreases along the deque.
  struct epoch {
    std::uint64_t end;
    std::int64_t above;
  };
  [[nodiscard]] std::int64_t bound_of(std::uint64_t xid) const;

  std::optional<pg_snapshot> last_;
  std::uint64_t last_assigned_after_ = 0;
  std::int64_t last_seq_before_xid_ = 0;
  std::deque<epoch> epochs_;
};

}  // namespace txmq::relay::detail
