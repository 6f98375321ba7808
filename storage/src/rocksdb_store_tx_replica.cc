// Transactions replicated with their home partition (cluster mode, docs/cluster.md
// "Transactions"): a home transaction's record travels in its home partition's change sequence
// (the one consumer-group changes use, replica.h) as a GroupChange whose `tx` holds the whole
// record after the change. A follower stores the record as it is; a snapshot carries every
// transaction whose home is the partition. Written only for records with a home (cluster mode):
// a single node's transactions never come here.

#include "rocksdb_store.h"

namespace txmq::storage::detail {

std::optional<group_change_ref> rocksdb_store::log_tx_change(group_ctx& ctx, const records::TxRecord& rec) {
  if (rec.home_topic().empty()) return std::nullopt;
  auto t = writer_topic(ctx, rec.home_topic());
  if (!t || rec.home_partition() >= t->record.partitions()) return std::nullopt;
  v1::GroupChange c;
  c.set_topic(rec.home_topic());
  c.set_time_ms(ctx.now_ms);
  c.set_tx(rec.SerializeAsString());
  const std::uint64_t end =
      log_group_change(ctx, t->record.id(), rec.home_partition(), *t->partitions[rec.home_partition()], c);
  return group_change_ref{rec.home_topic(), rec.home_partition(), end};
}

std::optional<group_change_ref> rocksdb_store::tx_home_end(group_ctx& ctx, const records::TxRecord& rec) {
  if (rec.home_topic().empty()) return std::nullopt;
  auto t = writer_topic(ctx, rec.home_topic());
  if (!t || rec.home_partition() >= t->record.partitions()) return std::nullopt;
  auto& ps = *t->partitions[rec.home_partition()];
  if (!ps.group_next) {
    auto v = wget(ctx, cf_groups, group_seq_key(t->record.id(), rec.home_partition()));
    ps.group_next = v && v->size() == 8 ? get_u64(v->data()) : 0;
  }
  return group_change_ref{rec.home_topic(), rec.home_partition(), *ps.group_next};
}

result<void> rocksdb_store::apply_tx_change(group_ctx& ctx, const std::string& value) {
  records::TxRecord rec;
  if (!rec.ParseFromString(value)) return error(errc::corruption, "a replicated transaction record does not parse");
  auto id = protocol::uuid::from_bytes(rec.txid());
  if (!id) return error(errc::corruption, "a replicated transaction record has no txid");
  forget_prepared(id.value());
  const std::string key(rec.txid());
  // The follower keeps the index as the leader does, so that it starts (gauges) and lists, and
  // leads after a failover, from the index alone.
  std::optional<std::string> was;
  if (auto existing = wget(ctx, cf_tx, key)) {
    records::TxRecord old;
    if (!old.ParseFromString(*existing)) return error(errc::corruption, "a stored transaction record does not parse");
    was = tx_index_entry(old);
  }
  move_tx_index(ctx, was, tx_index_entry(rec));
  ctx.put(cf_tx, key, value);
  return outcome::success();
}

result<void> rocksdb_store::snapshot_txs(std::string_view topic, std::uint32_t partition, const rocksdb::Snapshot* snap,
                                         v1::GroupSnapshot& out) const {
  // Every transaction record is read: no index by home partition is kept (a snapshot is taken
  // once per follower and leadership; resolved records go after dedupe_window).
  return scan(cf_tx, "", "", [&](std::string_view, std::string_view v) -> result<bool> {
    records::TxRecord rec;
    if (!rec.ParseFromArray(v.data(), static_cast<int>(v.size()))) return make_error_code(errc::corruption);
    if (rec.home_topic() == topic && rec.home_partition() == partition) out.add_txs(std::string(v));
    return true;
  }, snap);
}

result<void> rocksdb_store::install_txs(group_ctx& ctx, const std::string& topic, std::uint32_t partition,
                                        const v1::GroupSnapshot& snap) {
  // The follower's own records of the partition go first (one may hold an outcome its new
  // leader never wrote), then the leader's are written.
  std::vector<std::pair<std::string, std::optional<std::string>>> mine;  // key, index entry
  TXMQ_TRY(scan(cf_tx, "", "", [&](std::string_view k, std::string_view v) -> result<bool> {
    records::TxRecord rec;
    if (!rec.ParseFromArray(v.data(), static_cast<int>(v.size()))) return make_error_code(errc::corruption);
    if (rec.home_topic() == topic && rec.home_partition() == partition) mine.emplace_back(k, tx_index_entry(rec));
    return true;
  }));
  for (auto& [key, entry] : mine) {
    if (auto id = protocol::uuid::from_bytes(key)) forget_prepared(id.value());
    move_tx_index(ctx, entry, std::nullopt);
    ctx.del(cf_tx, key);
  }
  for (auto& v : snap.txs()) {
    records::TxRecord rec;
    if (!rec.ParseFromString(v)) return error(errc::corruption, "a snapshot's transaction record does not parse");
    // A record both deleted above and written here: the group keeps each key's last write.
    move_tx_index(ctx, std::nullopt, tx_index_entry(rec));
    ctx.put(cf_tx, rec.txid(), v);
  }
  return outcome::success();
}

void rocksdb_store::mark_copied(txid id, completion<std::optional<group_change_ref>> done) {
  submit<std::optional<group_change_ref>>(
      true, 128, std::move(done), [this, id](group_ctx& ctx) -> result<std::optional<group_change_ref>> {
        const std::string key(id.raw());
        auto existing = wget(ctx, cf_tx, key);
        if (ctx.poisoned) return *ctx.poisoned;
        if (!existing) return std::optional<group_change_ref>{};
        records::TxRecord rec;
        if (!rec.ParseFromString(*existing)) return errc::corruption;
        // A committed record: its messages (and acks) are in place; a rolled-back one with acks
        // (cluster read-process-write): its holds are released.
        const auto st = static_cast<tx_state>(rec.state());
        if ((st != tx_state::committed && st != tx_state::rolled_back) || rec.copied()) {
          return std::optional<group_change_ref>{};
        }
        for (auto& m : *rec.mutable_messages()) {
          m.clear_body();
          m.clear_headers();
        }
        rec.set_copied(true);
        ctx.put(cf_tx, key, rec.SerializeAsString());
        auto ref = log_tx_change(ctx, rec);
        if (ctx.poisoned) return *ctx.poisoned;
        return ref;
      });
}

}  // namespace txmq::storage::detail
