// Transactions (half messages): prepare, first-wins resolution, check-back schedule, lookups.

#include <set>

#include "rocksdb_store.h"

namespace txmq::storage::detail {

namespace {

// Everything of a stored record but its messages, which the full record and the summary copy
// differently (with bodies, or only where they went).
result<tx_record> record_fields(const records::TxRecord& rec) {
  auto id = protocol::uuid::from_bytes(rec.txid());
  if (!id || rec.state() < 1 || rec.state() > 4) return errc::corruption;
  tx_record out;
  out.id = id.value();
  out.producer_group = rec.producer_group();
  out.state = static_cast<tx_state>(rec.state());
  for (auto& a : rec.acks()) out.acks.push_back({a.group(), a.topic(), a.partition(), a.offset(), a.attempt()});
  out.prepared_ms = rec.prepared_ms();
  out.check_count = rec.check_count();
  out.next_check_ms = rec.next_check_ms();
  out.resolved_ms = rec.resolved_ms();
  if (rec.resolved_by() != 0) out.resolved_by = static_cast<resolver>(rec.resolved_by());
  out.home_topic = rec.home_topic();
  out.home_partition = rec.home_partition();
  out.copied = rec.copied();
  return out;
}

// A record after its outcome: the bodies dropped unless `keep_bodies` (a cluster commit: the
// home leader still copies them), no check due, when and by whom it was resolved.
void settle(records::TxRecord& rec, tx_state outcome, resolver by, std::int64_t now_ms, bool keep_bodies) {
  if (!keep_bodies) {
    for (auto& m : *rec.mutable_messages()) {
      m.clear_body();
      m.clear_headers();
    }
  }
  rec.set_state(static_cast<std::uint32_t>(outcome));
  rec.set_next_check_ms(0);
  rec.set_resolved_ms(now_ms);
  rec.set_resolved_by(static_cast<std::uint32_t>(by));
}

}  // namespace

result<tx_record> rocksdb_store::to_tx_record(std::string_view value) const {
  records::TxRecord rec;
  if (!rec.ParseFromArray(value.data(), static_cast<int>(value.size()))) return errc::corruption;
  auto out = record_fields(rec);
  if (!out) return out;
  out.value().messages.assign(rec.messages().begin(), rec.messages().end());
  return out;
}

result<tx_record> rocksdb_store::summary_of(const records::TxRecord& rec) const {
  auto out = record_fields(rec);
  if (!out) return out;
  auto& messages = out.value().messages;
  messages.reserve(static_cast<std::size_t>(rec.messages_size()));
  for (auto& m : rec.messages()) {
    auto& s = messages.emplace_back();
    s.set_topic(m.topic());
    s.set_partition(m.partition());
    s.set_offset(m.offset());
  }
  return out;
}

void rocksdb_store::prepare(prepare_request request, completion<prepare_result> done) {
  const std::size_t bytes = request_bytes(request.messages);
  const bool sync = request.sync;
  // Judged here, answered by the writer (a full store's refusal comes first, as for append).
  const bool valid = !request.id.is_nil() && valid_messages(request.messages) &&
                     valid_name(request.producer_group, k_max_group_name);
  // The record is built and serialized here, on the caller's thread, as append() encodes its
  // messages: the writer thread is the one every request waits for (issue #15, tenth round).
  // A refused Prepare wastes this work; the writer only checks, looks the txid up and writes.
  records::TxRecord rec;
  std::string value;
  if (valid) {
    rec.set_txid(std::string(request.id.raw()));
    rec.set_producer_group(std::move(request.producer_group));
    rec.set_state(static_cast<std::uint32_t>(tx_state::prepared));
    for (auto& m : request.messages) *rec.add_messages() = std::move(m);
    for (auto& a : request.acks) {
      auto* r = rec.add_acks();
      r->set_group(a.group);
      r->set_topic(a.topic);
      r->set_partition(a.partition);
      r->set_offset(a.offset);
      if (a.attempt != 0) r->set_attempt(a.attempt);
    }
    rec.set_prepared_ms(now());
    rec.set_next_check_ms(request.first_check_ms);
    if (request.home_partition) {
      rec.set_home_topic(request.home_topic);
      rec.set_home_partition(*request.home_partition);
    }
    value = rec.SerializeAsString();
  }
  submit<prepare_result>(sync, bytes, std::move(done),
                         [this, valid, id = request.id, acks = std::move(request.acks),
                          create = request.auto_create_partitions, home_topic = std::move(request.home_topic),
                          home_partition = request.home_partition, rec = std::move(rec),
                          value = std::move(value)](group_ctx& ctx) mutable -> result<prepare_result> {
    if (full_ && !failed_) return full_refusal();
    if (!valid) return errc::invalid_argument;
    const std::string key(id.raw());
    // Above every stored tx key and not written in this group: new, no RocksDB look-up.
    const bool unseen = key > max_tx_key_ && !ctx.overlay[cf_tx].contains(key);
    if (auto existing = unseen ? std::nullopt : wget(ctx, cf_tx, key)) {
      records::TxRecord stored;
      if (!stored.ParseFromString(*existing)) return errc::corruption;
      if (static_cast<tx_state>(stored.state()) == tx_state::prepared) {
        prepare_result dup{true, std::nullopt};
        // A retry may follow a first answer that never came: it waits for the same ISR.
        dup.change = tx_home_end(ctx, stored);
        return dup;
      }
      return errc::tx_not_prepared;
    }
    if (home_partition) {
      auto h = writer_topic(ctx, home_topic);
      if (!options_.log_group_changes || !h || *home_partition >= h->record.partitions() ||
          !group_owned(*h, *home_partition)) {
        return error(errc::invalid_argument, "transaction home partition " + home_topic + "/" +
                                                 std::to_string(*home_partition) + " is not led here");
      }
    }
    if (ctx.poisoned) return *ctx.poisoned;
    // Everything that can refuse the request comes before the first write into the batch.
    for (auto& a : acks) {
      if (!valid_name(a.group, k_max_group_name) || !writer_topic(ctx, a.topic)) return errc::invalid_argument;
    }
    for (auto& m : rec.messages()) {
      if (!valid_name(m.topic(), k_max_topic_name)) return errc::invalid_argument;
      if (!writer_topic(ctx, m.topic()) && !create) return errc::unknown_topic;
    }
    if (create && (*create == 0 || *create > k_max_partitions)) return errc::invalid_argument;
    for (auto& m : rec.messages()) {
      TXMQ_TRY(auto t, writer_topic_or_create(ctx, m.topic(), create));
      (void)t;
    }
    prepare_result out{false, std::nullopt};
    if (home_partition) out.change = log_tx_change(ctx, rec);
    const std::size_t value_bytes = value.size();
    ctx.put(cf_tx, key, std::move(value));
    if (!defer_due_entry(ctx, id, rec)) move_tx_index(ctx, std::nullopt, tx_index_entry(rec));
    if (prepared_bytes_ + value_bytes <= k_prepared_cache_bytes) {
      auto [it, inserted] = prepared_.try_emplace(id);
      if (!inserted) prepared_bytes_ -= it->second.bytes;
      it->second.record = std::move(rec);
      it->second.bytes = value_bytes;
      prepared_bytes_ += value_bytes;
    }
    return out;
  });
}

void rocksdb_store::resolve(resolve_request request, completion<resolve_result> done) {
  const bool sync = request.sync;
  submit<resolve_result>(sync, 128, std::move(done), [this, req = std::move(request)](group_ctx& ctx) -> result<resolve_result> {
    const std::string key(req.id.raw());
    records::TxRecord rec;
    if (auto cached = prepared_.find(req.id); cached != prepared_.end()) {
      // The record as Prepare wrote it (no other write touched it since): this resolve writes
      // its successor, or fails, after which RocksDB answers.
      rec = std::move(cached->second.record);
      prepared_bytes_ -= cached->second.bytes;
      prepared_.erase(cached);
    } else {
      auto existing = wget(ctx, cf_tx, key);
      if (ctx.poisoned) return *ctx.poisoned;
      if (!existing) return errc::unknown_tx;
      if (!rec.ParseFromString(*existing)) return errc::corruption;
    }
    const auto state = static_cast<tx_state>(rec.state());
    resolve_result out;
    auto before = summary_of(rec);
    if (!before) return before.error();
    out.before = std::move(before).value();
    const tx_state wanted = req.outcome == tx_outcome::commit ? tx_state::committed : tx_state::rolled_back;
    const bool home = !rec.home_topic().empty();
    if (state == tx_state::committed || state == tx_state::rolled_back) {
      out.status = state == wanted ? resolve_status::repeated : resolve_status::conflict;
      out.state = state;
      if (home) {
        // The outcome may not be on the home ISR yet (the first answer was lost): wait again.
        out.change = tx_home_end(ctx, rec);
        return out;
      }
      if (state == tx_state::committed) {
        for (auto& m : rec.messages()) out.positions.push_back({m.partition(), m.offset(), false});
      }
      return out;
    }
    // Validate before writing anything: every topic must still be there.
    if (home) {
      // Cluster mode: nothing is written into a partition here. The record keeps the messages
      // (with their target partitions and bodies) until the broker has copied them there.
      auto h = writer_topic(ctx, rec.home_topic());
      if (!h || rec.home_partition() >= h->record.partitions() || !group_owned(*h, rec.home_partition())) {
        return error(errc::invalid_argument, "transaction home partition " + rec.home_topic() + "/" +
                                                 std::to_string(rec.home_partition()) + " is not led here");
      }
      move_tx_index(ctx, tx_index_entry(rec), std::nullopt);
      settle(rec, wanted, req.by, ctx.now_ms, wanted == tx_state::committed);
      ctx.put(cf_tx, key, rec.SerializeAsString());
      out.change = log_tx_change(ctx, rec);
      if (ctx.poisoned) return *ctx.poisoned;
      out.status = resolve_status::applied;
      out.state = wanted;
      return out;
    }
    std::vector<std::shared_ptr<topic_state>> topics;
    if (wanted == tx_state::committed) {
      for (auto& m : rec.messages()) {
        auto t = writer_topic(ctx, m.topic());
        if (!t) return errc::unknown_topic;
        topics.push_back(std::move(t));
      }
    }
    // PREPARED or ABANDONED (an operator's decision): its index entry goes with the outcome
    // (a young Prepare has none yet).
    move_tx_index(ctx, take_young(ctx, rec) ? std::nullopt : tx_index_entry(rec), std::nullopt);
    if (wanted == tx_state::committed) {
      for (int i = 0; i < rec.messages_size(); ++i) {
        auto* m = rec.mutable_messages(i);
        // The body and headers move into the log's copy: settle() below drops them from the
        // record anyway, so only the small fields are copied (issue #15).
        v1::Message copy;
        copy.mutable_body()->swap(*m->mutable_body());
        copy.mutable_headers()->swap(*m->mutable_headers());
        copy.MergeFrom(*m);
        copy.set_txid(key);
        auto pos = append_one(ctx, *topics[static_cast<std::size_t>(i)], encode_message(std::move(copy), ctx.now_ms));
        out.positions.push_back(pos);
        m->set_partition(pos.partition);
        m->set_offset(pos.offset);
      }
      // Read-process-write: the consumed messages are done in the same atomic write.
      std::map<std::string, std::map<std::pair<std::uint32_t, std::uint32_t>, cursor_value>> cursors;
      for (auto& a : rec.acks()) {
        auto t = writer_topic(ctx, a.topic());
        if (!t || a.partition() >= t->record.partitions()) continue;
        apply_ack(ctx, a.group(), t->record.id(), a.partition(), a.offset(), std::nullopt, cursors[a.group()]);
      }
      for (auto& [group, cs] : cursors) {
        for (auto& [tp, c] : cs) ctx.put(cf_groups, cursor_key(group, tp.first, tp.second), encode(c));
      }
    }
    // Bodies live on in the log (commit) or are not wanted (rollback); keep the outcome small.
    settle(rec, wanted, req.by, ctx.now_ms, false);
    ctx.put(cf_tx, key, rec.SerializeAsString());  // moved into the group's overlay, not copied
    if (ctx.poisoned) return *ctx.poisoned;
    out.status = resolve_status::applied;
    out.state = wanted;
    return out;
  });
}

void rocksdb_store::record_checks(std::vector<check_update> updates, completion<void> done) {
  const std::size_t bytes = 64 * updates.size();
  submit<void>(true, bytes, std::move(done), [this, updates = std::move(updates)](group_ctx& ctx) -> result<void> {
    for (auto& u : updates) {
      const std::string key(u.id.raw());
      forget_prepared(u.id);
      auto existing = wget(ctx, cf_tx, key);
      if (ctx.poisoned) return *ctx.poisoned;
      if (!existing) continue;
      records::TxRecord rec;
      if (!rec.ParseFromString(*existing)) return errc::corruption;
      if (static_cast<tx_state>(rec.state()) != tx_state::prepared) continue;
      if (!rec.home_topic().empty()) {
        // Only the home partition's leader checks; a follower's record is the leader's.
        auto h = writer_topic(ctx, rec.home_topic());
        if (!h || rec.home_partition() >= h->record.partitions() || !group_owned(*h, rec.home_partition())) continue;
      }
      const auto was = take_young(ctx, rec) ? std::nullopt : tx_index_entry(rec);
      rec.set_check_count(u.check_count);
      if (u.abandon) {
        rec.set_state(static_cast<std::uint32_t>(tx_state::abandoned));
        rec.set_next_check_ms(0);
      } else {
        rec.set_next_check_ms(u.next_check_ms);
      }
      move_tx_index(ctx, was, tx_index_entry(rec));
      ctx.put(cf_tx, key, rec.SerializeAsString());
      // Check counts travel with the record (not waited for: a lost count costs one check).
      (void)log_tx_change(ctx, rec);
    }
    return outcome::success();
  });
}

result<std::optional<tx_record>> rocksdb_store::find_tx(const txid& id) const {
  return read_durable_txs([&](const rocksdb::Snapshot* at) { return find_tx_at(id, at); });
}

result<std::optional<tx_record>> rocksdb_store::find_tx_at(const txid& id, const rocksdb::Snapshot* at) const {
  std::string value;
  rocksdb::ReadOptions ro;
  ro.snapshot = at;
  auto s = db_->Get(ro, handles_[cf_tx], std::string(id.raw()), &value);
  if (s.IsNotFound()) return std::optional<tx_record>{};
  if (!s.ok()) return status_error(s, "looking up transaction " + id.to_string());
  TXMQ_TRY(auto rec, to_tx_record(value));
  return std::optional<tx_record>{std::move(rec)};
}

result<std::vector<tx_record>> rocksdb_store::due_checks(std::int64_t until_ms, std::size_t limit,
                                                         std::int64_t from_ms) const {
  // Young entries written since the last call with a check before from_ms (young_due_floor_).
  const std::int64_t late = young_due_floor_.exchange(std::numeric_limits<std::int64_t>::max(), std::memory_order_acquire);
  if (late < from_ms) from_ms = late;
  std::string lower(1, 't');
  put_u64(lower, time_key(from_ms));
  std::string upper(1, 't');
  put_u64(upper, time_key(until_ms) + 1);
  // Index and records at one view: an entry of a Prepare not yet durable is not listed either.
  auto due = read_durable_txs([&](const rocksdb::Snapshot* at) -> result<std::vector<tx_record>> {
    std::vector<tx_record> out;
    auto r = scan(
        cf_index_, lower, upper,
        [&](std::string_view k, std::string_view) -> result<bool> {
          if (k.size() != 1 + 8 + 16) return errc::corruption;
          auto id = protocol::uuid::from_bytes(k.substr(9));
          if (!id) return errc::corruption;
          auto rec = find_tx_at(id.value(), at);
          if (!rec) return rec.error();
          if (rec.value() && rec.value()->state == tx_state::prepared) out.push_back(std::move(*rec.value()));
          return out.size() < limit;
        },
        at);
    if (!r) return r.error();
    return out;
  });
  if (!due) lower_young_due_floor(late);  // the next call reads from there again
  return due;
}

void rocksdb_store::move_tx_index(group_ctx& ctx, const std::optional<std::string>& from,
                                  const std::optional<std::string>& to) {
  if (from == to) return;
  if (from) ctx.del(cf_index_, *from);
  if (to) ctx.put(cf_index_, *to, "");
}

result<std::vector<tx_record>> rocksdb_store::list_txs(std::optional<tx_state> state, std::size_t limit,
                                                      std::optional<txid> after) const {
  if (state == tx_state::prepared || state == tx_state::abandoned) {
    // Taken before the view: a txid that leaves the set has its entry in a durable group,
    // which every view taken after that sees.
    const auto young = state == tx_state::prepared ? young_ids() : decltype(young_ids()){};
    return read_durable_txs(
        [&](const rocksdb::Snapshot* at) { return list_indexed_txs(*state, limit, after, young, at); });
  }
  // prefix_end of a 16-byte id is the next id, which is what "after" means.
  std::string from = after ? prefix_end(std::string(after->raw())) : std::string();
  return read_durable_txs([&](const rocksdb::Snapshot* at) -> result<std::vector<tx_record>> {
    std::vector<tx_record> out;
    auto r = scan(
        cf_tx, from, "",
        [&](std::string_view, std::string_view v) -> result<bool> {
          TXMQ_TRY(auto rec, to_tx_record(v));
          if (!state || rec.state == *state) out.push_back(std::move(rec));
          return out.size() < limit;
        },
        at);
    if (!r) return r.error();
    return out;
  });
}

result<std::vector<tx_record>> rocksdb_store::list_indexed_txs(
    tx_state state, std::size_t limit, std::optional<txid> after,
    std::span<const protocol::uuid> young, const rocksdb::Snapshot* at) const {
  std::vector<tx_record> out;
  if (limit == 0) return out;
  // Index and records at one view: both change in one batch, so every entry names a record
  // in its state. A record that is not (a store damaged by hand) is skipped, not listed.
  rocksdb::ReadOptions ro;
  ro.snapshot = at;
  auto read = [&](std::string_view key) -> result<bool> {
    std::string value;
    auto s = db_->Get(ro, handles_[cf_tx], rocksdb::Slice(key.data(), key.size()), &value);
    if (s.IsNotFound()) return false;
    if (!s.ok()) return status_error(s, "reading a transaction record");
    TXMQ_TRY(auto rec, to_tx_record(value));
    if (rec.state != state) return false;
    out.push_back(std::move(rec));
    return true;
  };
  const std::string after_raw = after ? std::string(after->raw()) : std::string();
  if (state == tx_state::abandoned) {
    // 'a' + txid: already in txid order.
    const std::string from = after ? prefix_end(tx_abandoned_key(after_raw)) : std::string(1, 'a');
    TXMQ_TRY(scan(
        cf_index_, from, std::string(1, 'b'),
        [&](std::string_view k, std::string_view) -> result<bool> {
          if (k.size() != 1 + k_txid_bytes) return error(errc::corruption, "an abandoned-transaction index key is not 17 bytes");
          TXMQ_TRY(read(k.substr(1)));
          return out.size() < limit;
        },
        at));
    return out;
  }
  // PREPARED: the due index is in time order; the page is the `limit` smallest txids after
  // `after` among all its keys and the young Prepares' (a bounded set), then those records in
  // txid order.
  std::set<std::string, std::less<>> ids;
  const auto consider = [&](std::string_view id) {
    if (after && id <= after_raw) return;
    if (ids.size() == limit && id >= *ids.rbegin()) return;
    ids.emplace(id);
    if (ids.size() > limit) ids.erase(std::prev(ids.end()));
  };
  TXMQ_TRY(scan(
      cf_index_, std::string(1, 't'), std::string(1, 'u'),
      [&](std::string_view k, std::string_view) -> result<bool> {
        if (k.size() != 1 + 8 + k_txid_bytes) return error(errc::corruption, "a due-check index key is not 25 bytes");
        consider(k.substr(9));
        return true;
      },
      at));
  // A young one takes a place only if it is PREPARED at this view (resolved, or not yet durable,
  // it would leave the page short, and a short page ends a listing); in txid order, so only
  // those that can still make the page are read.
  for (auto& id : young) {
    const std::string_view raw = id.raw();
    if (after && raw <= after_raw) continue;
    if (ids.size() == limit && raw >= *ids.rbegin()) break;
    if (ids.contains(raw)) continue;  // its entry was written meanwhile
    TXMQ_TRY(auto rec, find_tx_at(id, at));
    if (rec && rec->state == tx_state::prepared) consider(raw);
  }
  for (auto& id : ids) {
    TXMQ_TRY(read(id));
  }
  return out;
}

result<tx_counts> rocksdb_store::count_unresolved_txs() const {
  const auto young = young_ids();  // before the view, as in list_txs
  return read_durable_txs([&](const rocksdb::Snapshot* at) -> result<tx_counts> {
    // The index entries of one kind ('a' abandoned, 't' prepared: keys.h).
    const auto count = [&](char kind, std::uint64_t& n) {
      return scan(
          cf_index_, std::string(1, kind), std::string(1, static_cast<char>(kind + 1)),
          [&](std::string_view, std::string_view) -> result<bool> {
            ++n;
            return true;
          },
          at);
    };
    tx_counts out;
    TXMQ_TRY(count('a', out.abandoned));
    TXMQ_TRY(count('t', out.prepared));
    // The young Prepares PREPARED at this view whose due entry is not (yet) in it.
    rocksdb::ReadOptions ro;
    ro.snapshot = at;
    for (auto& id : young) {
      TXMQ_TRY(auto rec, find_tx_at(id, at));
      if (!rec || rec->state != tx_state::prepared) continue;
      std::string ignored;
      const auto s = db_->Get(ro, handles_[cf_index_], tx_due_entry(rec->next_check_ms, id.raw()), &ignored);
      if (s.IsNotFound()) {
        ++out.prepared;
      } else if (!s.ok()) {
        return status_error(s, "reading the due index");
      }
    }
    return out;
  });
}

}  // namespace txmq::storage::detail
