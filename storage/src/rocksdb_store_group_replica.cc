// Consumer-group state replicated with its partition (replica.h, docs/cluster.md "Consumer
// groups"): each partition's group change sequence, the leader's reads of it (changes, a
// snapshot) and a follower's writes (apply changes at the leader's seqs, install a snapshot).
// Written only with store_options::log_group_changes (cluster mode): single-node mode runs none
// of it.
//
// Keys (CF groups): 'r' tid:4 p:4 seq:8 → txmq.v1.GroupChange; 'S' tid:4 p:4 → next seq:8. A
// change carries the partition's cursor after it, so a follower's cursor is the leader's
// whatever it held before; its other parts (deliveries, acks, dead letters, redrives) are
// applied with the same code update_group uses, on the same prior state (a follower starts
// from a snapshot and then applies every change in order), so they have the same effect.

#include "rocksdb_store.h"

namespace txmq::storage::detail {

namespace {

std::string change_prefix(std::uint32_t tid, std::uint32_t p) {
  std::string k(1, 'r');
  put_u32(k, tid);
  put_u32(k, p);
  return k;
}

std::string u64_bytes(std::uint64_t v) {
  std::string s;
  put_u64(s, v);
  return s;
}

void to_wire(const delivery_record& d, v1::GroupDelivery& out) {
  out.set_offset(d.offset);
  out.set_attempt(d.attempt);
  out.set_visible_at_ms(d.visible_at_ms);
  out.set_status(static_cast<std::uint32_t>(d.status));
  if (!d.holder.empty()) out.set_holder(d.holder);
}

}  // namespace

std::uint64_t rocksdb_store::log_group_change(group_ctx& ctx, std::uint32_t tid, std::uint32_t p, partition_state& ps,
                                              v1::GroupChange& change) {
  if (!ps.group_next) {
    auto v = wget(ctx, cf_groups, group_seq_key(tid, p));
    ps.group_next = v && v->size() == 8 ? get_u64(v->data()) : 0;
  }
  const std::uint64_t seq = (*ps.group_next)++;
  change.set_seq(seq);
  if (change.leader_epoch() == 0) {  // a follower keeps the leader's
    const auto& epochs = writer_epochs(tid, p);
    change.set_leader_epoch(epochs.empty() ? 0 : epochs.back().epoch);
  }
  ctx.put(cf_groups, group_change_key(tid, p, seq), change.SerializeAsString());
  ctx.put(cf_groups, group_seq_key(tid, p), u64_bytes(*ps.group_next));
  // Keep the last k_group_change_window changes: one range delete every 1024 changes.
  if (seq % 1024 == 0 && seq > k_group_change_window) {
    ctx.batch.DeleteRange(ctx.handles[cf_groups], group_change_key(tid, p, 0),
                          group_change_key(tid, p, seq - k_group_change_window));
  }
  if (std::find(ctx.group_touched.begin(), ctx.group_touched.end(), &ps) == ctx.group_touched.end()) {
    ctx.group_touched.push_back(&ps);
  }
  return *ps.group_next;
}

void rocksdb_store::log_update(group_ctx& ctx, const group_update& u, const std::string& group_record,
                               std::unordered_map<std::string, std::shared_ptr<topic_state>>& topics,
                               std::map<std::pair<std::uint32_t, std::uint32_t>, cursor_value>& cursors,
                               group_update_result& out) {
  records::GroupRecord rec;
  (void)rec.ParseFromString(group_record);
  std::map<std::pair<std::string, std::uint32_t>, v1::GroupChange> changes;
  auto change = [&](const std::string& topic, std::uint32_t p) -> v1::GroupChange& {
    auto& c = changes[{topic, p}];
    if (c.topic().empty()) {
      c.set_group(u.group);
      c.set_topic(topic);
      c.set_group_created_ms(rec.created_ms());
      c.set_time_ms(ctx.now_ms);
    }
    return c;
  };
  auto owned = [&](const std::string& topic, std::uint32_t p) { return group_owned(*topics.at(topic), p); };
  for (auto& c : u.dispatched) {
    if (owned(c.topic, c.partition)) change(c.topic, c.partition);
  }
  for (auto& d : u.deliveries) {
    if (owned(d.topic, d.partition)) to_wire(d, *change(d.topic, d.partition).add_deliveries());
  }
  for (auto& a : u.acks) {
    if (owned(a.topic, a.partition)) change(a.topic, a.partition).add_acks(a.offset);
  }
  for (auto& d : u.dead) {
    if (!owned(d.topic, d.partition)) continue;
    auto* x = change(d.topic, d.partition).add_dead();
    x->set_offset(d.offset);
    x->set_attempts(d.attempts);
    x->set_dead_at_ms(d.dead_at_ms ? d.dead_at_ms : ctx.now_ms);
    x->set_reason(d.reason);
  }
  for (auto& r : u.redrive) {
    if (owned(r.topic, r.partition)) change(r.topic, r.partition).add_redrive(r.offset);
  }
  for (auto& [tp, c] : changes) {
    auto& t = topics.at(tp.first);
    const std::uint32_t tid = t->record.id();
    auto& cv = cursor_for(ctx, u.group, tid, tp.second, cursors);
    c.set_cursor_floor(cv.ack_floor);
    c.set_cursor_next(cv.next_offset);
    const std::uint64_t end = log_group_change(ctx, tid, tp.second, *t->partitions[tp.second], c);
    out.changes.push_back({tp.first, tp.second, end});
  }
}

void rocksdb_store::ensure_group_record(group_ctx& ctx, const std::string& group, const std::string& topic,
                                        std::int64_t created_ms, const std::vector<std::string>& more_topics) {
  const std::string gkey = group_record_key(group);
  records::GroupRecord rec;
  bool changed = false;
  if (auto existing = wget(ctx, cf_default, gkey); !existing || !rec.ParseFromString(*existing)) {
    rec.Clear();
    rec.set_name(group);
    rec.set_created_ms(created_ms ? created_ms : ctx.now_ms);
    changed = true;
  }
  auto add = [&](const std::string& t) {
    if (t.empty() || std::find(rec.topics().begin(), rec.topics().end(), t) != rec.topics().end()) return;
    rec.add_topics(t);
    changed = true;
  };
  add(topic);
  for (auto& t : more_topics) add(t);
  if (changed) ctx.put(cf_default, gkey, rec.SerializeAsString());
}

result<group_changes_read> rocksdb_store::group_changes(std::string_view topic, std::uint32_t partition,
                                                        std::uint64_t from_seq, std::size_t max) const {
  auto t = find_topic(topic);
  if (!t) return make_error_code(errc::unknown_topic);
  if (partition >= t->partitions.size()) return make_error_code(errc::unknown_partition);
  group_changes_read out;
  out.end = t->partitions[partition]->committed_group_next.load(std::memory_order_acquire);
  if (from_seq > out.end) {
    out.snapshot_needed = true;  // the asker holds changes this log does not: it diverged
    return out;
  }
  if (from_seq == out.end || max == 0) return out;
  const std::uint32_t tid = t->record.id();
  const std::string upper = group_change_key(tid, partition, out.end);
  std::uint64_t expect = from_seq;
  TXMQ_TRY(scan(cf_groups, group_change_key(tid, partition, from_seq), upper,
                [&](std::string_view k, std::string_view v) -> result<bool> {
    if (k.size() != 17) return make_error_code(errc::corruption);
    if (get_u64(k.data() + 9) != expect) return false;  // a gap: trimmed
    v1::GroupChange c;
    if (!c.ParseFromArray(v.data(), static_cast<int>(v.size()))) return make_error_code(errc::corruption);
    out.changes.push_back(std::move(c));
    ++expect;
    return out.changes.size() < max;
  }));
  if (out.changes.empty()) out.snapshot_needed = true;  // from_seq was trimmed
  return out;
}

result<v1::GroupSnapshot> rocksdb_store::group_snapshot(std::string_view topic, std::uint32_t partition) const {
  auto t = find_topic(topic);
  if (!t) return make_error_code(errc::unknown_topic);
  if (partition >= t->partitions.size()) return make_error_code(errc::unknown_partition);
  const std::uint32_t tid = t->record.id();
  // One RocksDB snapshot: commit groups are atomic writes, so it holds whole changes only, and
  // the seq stored with them.
  auto snap = take_snapshot();
  rocksdb::ReadOptions ro;
  ro.snapshot = snap.get();
  v1::GroupSnapshot out;
  std::string v;
  auto s = db_->Get(ro, handles_[cf_groups], group_seq_key(tid, partition), &v);
  if (!s.ok() && !s.IsNotFound()) return status_error(s, "reading a group change sequence");
  out.set_next_seq(s.ok() && v.size() == 8 ? get_u64(v.data()) : 0);
  std::vector<records::GroupRecord> groups;
  TXMQ_TRY(scan(cf_default, "g/", prefix_end("g/"), [&](std::string_view, std::string_view gv) -> result<bool> {
    records::GroupRecord rec;
    if (!rec.ParseFromArray(gv.data(), static_cast<int>(gv.size()))) return make_error_code(errc::corruption);
    groups.push_back(std::move(rec));
    return true;
  }, snap.get()));
  for (auto& rec : groups) {
    v1::GroupPartitionState st;
    st.set_group(rec.name());
    for (auto& x : rec.topics()) st.add_topics(x);
    st.set_created_ms(rec.created_ms());
    bool any = false;
    s = db_->Get(ro, handles_[cf_groups], cursor_key(rec.name(), tid, partition), &v);
    if (!s.ok() && !s.IsNotFound()) return status_error(s, "reading a group cursor");
    cursor_value cv;
    if (s.ok() && decode(v, cv)) {
      st.set_has_cursor(true);
      st.set_cursor_floor(cv.ack_floor);
      st.set_cursor_next(cv.next_offset);
      any = true;
    }
    const std::string dprefix = message_key('d', rec.name(), tid, partition, 0).substr(0, 1 + 1 + rec.name().size() + 8);
    TXMQ_TRY(scan(cf_groups, dprefix, prefix_end(dprefix), [&](std::string_view k, std::string_view dv) -> result<bool> {
      delivery_value d;
      if (k.size() != dprefix.size() + 8 || !decode(dv, d)) return make_error_code(errc::corruption);
      auto* x = st.add_deliveries();
      x->set_offset(get_u64(k.data() + dprefix.size()));
      x->set_attempt(d.attempt);
      x->set_visible_at_ms(d.visible_at_ms);
      x->set_status(d.status);
      if (!d.holder.empty()) x->set_holder(d.holder);
      any = true;
      return true;
    }, snap.get()));
    const std::string qprefix = message_key('q', rec.name(), tid, partition, 0).substr(0, 1 + 1 + rec.name().size() + 8);
    TXMQ_TRY(scan(cf_groups, qprefix, prefix_end(qprefix), [&](std::string_view, std::string_view qv) -> result<bool> {
      records::DeadLetterRecord r;
      if (!r.ParseFromArray(qv.data(), static_cast<int>(qv.size()))) return make_error_code(errc::corruption);
      auto* x = st.add_dead();
      x->set_offset(r.offset());
      x->set_attempts(r.attempts());
      x->set_dead_at_ms(r.dead_at_ms());
      x->set_reason(r.reason());
      any = true;
      return true;
    }, snap.get()));
    // A group without state here still travels (its record: a new leader serves it).
    (void)any;
    *out.add_groups() = std::move(st);
  }
  TXMQ_TRY(snapshot_txs(topic, partition, snap.get(), out));
  return out;
}

void rocksdb_store::apply_group_changes(std::string topic, std::uint32_t partition,
                                        std::vector<v1::GroupChange> changes, completion<std::uint64_t> done) {
  std::size_t bytes = 64;
  for (auto& c : changes) bytes += c.ByteSizeLong();
  submit<std::uint64_t>(true, bytes, std::move(done),
                        [this, topic = std::move(topic), partition, cs = std::move(changes)](group_ctx& ctx) -> result<std::uint64_t> {
    auto t = writer_topic(ctx, topic);
    if (!t) return errc::unknown_topic;
    if (partition >= t->record.partitions()) return errc::unknown_partition;
    const std::uint32_t tid = t->record.id();
    auto& ps = *t->partitions[partition];
    if (!ps.group_next) {
      auto v = wget(ctx, cf_groups, group_seq_key(tid, partition));
      ps.group_next = v && v->size() == 8 ? get_u64(v->data()) : 0;
    }
    ps.group_owner = false;
    // Every change must continue the sequence exactly; checked before anything is written.
    std::uint64_t expect = *ps.group_next;
    for (auto& c : cs) {
      if (c.seq() != expect++ || c.topic() != topic) {
        return error(errc::invalid_argument, "group change " + std::to_string(c.seq()) + " does not continue the sequence at " +
                                                 std::to_string(*ps.group_next) + ": a snapshot is needed");
      }
    }
    for (auto c : cs) {
      if (!c.tx().empty()) {  // a transaction whose home is this partition
        TXMQ_TRY(apply_tx_change(ctx, c.tx()));
        (*ps.group_next) = c.seq();
        log_group_change(ctx, tid, partition, ps, c);
        continue;
      }
      const std::string& g = c.group();
      ensure_group_record(ctx, g, topic, c.group_created_ms());
      std::map<std::pair<std::uint32_t, std::uint32_t>, cursor_value> cursors;
      // The cursor's end first, as update_group moves it first (dispatch), so acks at the
      // floor advance it over the same done records.
      cursor_for(ctx, g, tid, partition, cursors).next_offset = c.cursor_next();
      for (auto& d : c.deliveries()) {
        put_delivery(ctx, g, tid, partition, d.offset(),
                     delivery_value{d.attempt(), d.visible_at_ms(), static_cast<std::uint8_t>(d.status()), d.holder()});
      }
      for (auto o : c.acks()) apply_ack(ctx, g, tid, partition, o, std::nullopt, cursors);
      for (auto& d : c.dead()) {
        apply_ack(ctx, g, tid, partition, d.offset(),
                  dead_letter{topic, partition, d.offset(), d.attempts(), d.dead_at_ms(), d.reason()}, cursors);
      }
      for (auto o : c.redrive()) {
        const std::string qkey = message_key('q', g, tid, partition, o);
        if (!wget(ctx, cf_groups, qkey)) continue;
        ctx.del(cf_groups, qkey);
        put_delivery(ctx, g, tid, partition, o, delivery_value{0, c.time_ms(), 2, {}});
      }
      ctx.put(cf_groups, cursor_key(g, tid, partition), encode(cursor_value{c.cursor_floor(), c.cursor_next()}));
      const std::uint64_t seq = c.seq();
      (*ps.group_next) = seq;
      log_group_change(ctx, tid, partition, ps, c);
    }
    if (ctx.poisoned) return *ctx.poisoned;
    return *ps.group_next;
  });
}

void rocksdb_store::install_group_snapshot(std::string topic, std::uint32_t partition, v1::GroupSnapshot snapshot,
                                           completion<std::uint64_t> done) {
  const std::size_t bytes = 64 + snapshot.ByteSizeLong();
  submit<std::uint64_t>(true, bytes, std::move(done),
                        [this, topic = std::move(topic), partition, snap = std::move(snapshot)](group_ctx& ctx) -> result<std::uint64_t> {
    auto t = writer_topic(ctx, topic);
    if (!t) return errc::unknown_topic;
    if (partition >= t->record.partitions()) return errc::unknown_partition;
    const std::uint32_t tid = t->record.id();
    auto& ps = *t->partitions[partition];
    ps.group_owner = false;
    // Everything this node held of the partition's group state goes: a follower's state may
    // hold changes its new leader never made (DB reads: the follower sends nothing else for the
    // partition meanwhile, so the open batch holds none of its keys).
    std::vector<std::string> names;
    TXMQ_TRY(scan(cf_default, "g/", prefix_end("g/"), [&](std::string_view k, std::string_view) -> result<bool> {
      names.emplace_back(k.substr(2));
      return true;
    }));
    for (auto& g : names) {
      ctx.del(cf_groups, cursor_key(g, tid, partition));
      const std::string dprefix = message_key('d', g, tid, partition, 0).substr(0, 1 + 1 + g.size() + 8);
      std::vector<std::uint64_t> offsets;
      TXMQ_TRY(scan(cf_groups, dprefix, prefix_end(dprefix), [&](std::string_view k, std::string_view) -> result<bool> {
        if (k.size() == dprefix.size() + 8) offsets.push_back(get_u64(k.data() + dprefix.size()));
        return true;
      }));
      for (auto o : offsets) {
        erase_delivery_due(ctx, g, tid, partition, o);
        ctx.del(cf_groups, message_key('d', g, tid, partition, o));
      }
      const std::string qprefix = message_key('q', g, tid, partition, 0).substr(0, 1 + 1 + g.size() + 8);
      ctx.batch.DeleteRange(ctx.handles[cf_groups], qprefix, prefix_end(qprefix));
    }
    ctx.batch.DeleteRange(ctx.handles[cf_groups], change_prefix(tid, partition), prefix_end(change_prefix(tid, partition)));
    for (auto& st : snap.groups()) {
      std::vector<std::string> topics(st.topics().begin(), st.topics().end());
      ensure_group_record(ctx, st.group(), topic, st.created_ms(), topics);
      if (st.has_cursor()) {
        ctx.put(cf_groups, cursor_key(st.group(), tid, partition), encode(cursor_value{st.cursor_floor(), st.cursor_next()}));
      }
      for (auto& d : st.deliveries()) {
        put_delivery(ctx, st.group(), tid, partition, d.offset(),
                     delivery_value{d.attempt(), d.visible_at_ms(), static_cast<std::uint8_t>(d.status()), d.holder()});
      }
      for (auto& d : st.dead()) {
        records::DeadLetterRecord rec;
        rec.set_topic(topic);
        rec.set_partition(partition);
        rec.set_offset(d.offset());
        rec.set_attempts(d.attempts());
        rec.set_dead_at_ms(d.dead_at_ms());
        rec.set_reason(d.reason());
        ctx.put(cf_groups, message_key('q', st.group(), tid, partition, d.offset()), rec.SerializeAsString());
      }
    }
    TXMQ_TRY(install_txs(ctx, topic, partition, snap));
    ps.group_next = snap.next_seq();
    ctx.put(cf_groups, group_seq_key(tid, partition), u64_bytes(snap.next_seq()));
    if (std::find(ctx.group_touched.begin(), ctx.group_touched.end(), &ps) == ctx.group_touched.end()) {
      ctx.group_touched.push_back(&ps);
    }
    if (ctx.poisoned) return *ctx.poisoned;
    return snap.next_seq();
  });
}

}  // namespace txmq::storage::detail
