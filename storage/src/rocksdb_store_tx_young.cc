// Young Prepares (rocksdb_store.h: young_; storage/README.md "Young Prepares"): a Prepare's due
// entry written a second late, if the transaction is still PREPARED then; the stored bounds of
// the young ones, and the open's scan between them after a crash.

#include "rocksdb_store.h"

namespace txmq::storage::detail {

namespace {

// "ty" in the default family: the earliest prepared_ms still young and the latest one deferred
// (the first above the second: none young). A store without it never deferred an entry.
constexpr std::string_view k_young_bounds_key = "ty";

std::string young_bounds(std::int64_t earliest, std::int64_t latest) {
  std::string v;
  put_u64(v, time_key(earliest));
  put_u64(v, time_key(latest));
  return v;
}

// The time of a UUIDv7 (RFC 9562 variant), or nothing for any other txid.
std::optional<std::int64_t> v7_ms(const txid& id) {
  if (id.version() != 7 || (id.bytes()[8] >> 6) != 2) return std::nullopt;
  return id.unix_ms();
}

// The smallest 16-byte key whose UUIDv7 time is `ms`: a txid of an earlier time sorts below it.
std::string v7_floor(std::int64_t ms) {
  std::string k(k_txid_bytes, '\0');
  const auto t = static_cast<std::uint64_t>(std::max<std::int64_t>(ms, 0));
  for (std::size_t i = 0; i < 6; ++i) k[i] = static_cast<char>((t >> (8 * (5 - i))) & 0xff);
  return k;
}

}  // namespace

bool rocksdb_store::defer_due_entry(group_ctx& ctx, const txid& id, const records::TxRecord& rec) {
  // A cluster's transaction travels to its followers with its entry: not deferred.
  if (!rec.home_topic().empty()) return false;
  const std::int64_t prepared = rec.prepared_ms();
  const auto at = v7_ms(id);
  if (!at || *at < prepared - k_young_skew_ms || *at > prepared + k_young_skew_ms) return false;
  // A first check sooner than the entry would be written (0: never checked, never due).
  if (rec.next_check_ms() != 0 && rec.next_check_ms() < prepared + 2 * k_young_ms) return false;
  young_.emplace(std::pair{prepared, id}, rec.next_check_ms());
  young_max_ms_ = std::max(young_max_ms_, prepared);
  ctx.young_changed = true;
  std::lock_guard lk(young_mu_);
  young_ids_.insert(id);
  return true;
}

bool rocksdb_store::take_young(group_ctx& ctx, const records::TxRecord& rec) {
  if (young_.empty()) return false;
  auto id = protocol::uuid::from_bytes(rec.txid());
  if (!id) return false;
  auto it = young_.find(std::pair{rec.prepared_ms(), id.value()});
  if (it == young_.end()) return false;
  // The stored bounds stay as they are: still around every young one (the next group that
  // changes the set narrows them).
  young_.erase(it);
  ctx.young_done.push_back(id.value());
  return true;
}

void rocksdb_store::index_young(group_ctx& ctx) {
  bool indexed = false;
  while (!young_.empty() && young_.begin()->first.first + k_young_ms <= ctx.now_ms) {
    auto node = young_.extract(young_.begin());
    ctx.put(cf_index_, tx_due_entry(node.mapped(), node.key().second.raw()), "");
    ctx.young_done.push_back(node.key().second);
    if (node.mapped() != 0) ctx.young_due_min = std::min(ctx.young_due_min, node.mapped());
    indexed = true;
  }
  if (!indexed && !ctx.young_changed) return;
  // Entries and records at one view: readers see these entries once durable.
  if (indexed) ctx.wrote_tx = true;
  const std::int64_t earliest = young_.empty() ? young_max_ms_ + 1 : young_.begin()->first.first;
  ctx.put(cf_default, std::string(k_young_bounds_key), young_bounds(earliest, young_max_ms_));
}

std::optional<std::chrono::milliseconds> rocksdb_store::young_due_in() const {
  if (young_.empty()) return std::nullopt;
  return std::chrono::milliseconds(std::max<std::int64_t>(young_.begin()->first.first + k_young_ms - now(), 0));
}

result<void> rocksdb_store::index_young_after_open() {
  std::string v;
  auto s = db_->Get(rocksdb::ReadOptions(), handles_[cf_default], std::string(k_young_bounds_key), &v);
  young_.clear();
  {
    std::lock_guard lk(young_mu_);
    young_ids_.clear();
  }
  if (s.IsNotFound()) return outcome::success();
  if (!s.ok()) return status_error(s, "reading the bounds of the young transactions");
  if (v.size() != 16) return error(errc::corruption, "the bounds of the young transactions are not 16 bytes");
  const auto earliest = static_cast<std::int64_t>(get_u64(v.data()));
  const auto latest = static_cast<std::int64_t>(get_u64(v.data() + 8));
  young_max_ms_ = std::max(young_max_ms_, latest);
  if (earliest > latest) return outcome::success();
  // Every young one had a UUIDv7 txid within k_young_skew_ms of its prepared_ms, which lies
  // between the bounds: its record sorts between these keys. Its due entry is written as
  // Prepare would have (a record indexed already gets the same key again).
  rocksdb::WriteBatch batch;
  std::size_t found = 0;
  std::int64_t due_min = std::numeric_limits<std::int64_t>::max();
  TXMQ_TRY(scan(cf_tx, v7_floor(earliest - k_young_skew_ms), v7_floor(latest + k_young_skew_ms + 1),
                [&](std::string_view k, std::string_view value) -> result<bool> {
                  records::TxRecord rec;
                  if (!rec.ParseFromArray(value.data(), static_cast<int>(value.size())) || k.size() != k_txid_bytes) {
                    return error(errc::corruption, "the txmq store at " + path_.string() +
                                                       " holds an unreadable transaction record");
                  }
                  if (static_cast<tx_state>(rec.state()) != tx_state::prepared || !rec.home_topic().empty()) return true;
                  rec.set_txid(std::string(k));
                  if (auto entry = tx_index_entry(rec)) batch.Put(handles_[cf_index_], *entry, "");
                  if (rec.next_check_ms() != 0) due_min = std::min(due_min, rec.next_check_ms());
                  ++found;
                  return true;
                }));
  batch.Put(handles_[cf_default], std::string(k_young_bounds_key), young_bounds(latest + 1, latest));
  rocksdb::WriteOptions wo;
  wo.sync = true;
  s = db_->Write(wo, &batch);
  if (!s.ok()) return status_error(s, "writing the due entries of " + std::to_string(found) + " young transactions");
  // A resume after a failed group runs this with the check-back's cursor wherever it was.
  lower_young_due_floor(due_min);
  return outcome::success();
}

void rocksdb_store::lower_young_due_floor(std::int64_t ms) const noexcept {
  auto floor = young_due_floor_.load(std::memory_order_relaxed);
  while (ms < floor && !young_due_floor_.compare_exchange_weak(floor, ms, std::memory_order_release)) {
  }
}

std::vector<protocol::uuid> rocksdb_store::young_ids() const {
  std::vector<protocol::uuid> out;
  {
    std::lock_guard lk(young_mu_);
    out.assign(young_ids_.begin(), young_ids_.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace txmq::storage::detail
