// Consumer groups: cursors, deliveries and their due-time index, acks, dead letters.

#include "rocksdb_store.h"

namespace txmq::storage::detail {

cursor_value& rocksdb_store::cursor_for(group_ctx& ctx, std::string_view group, std::uint32_t tid, std::uint32_t p,
                                        std::map<std::pair<std::uint32_t, std::uint32_t>, cursor_value>& cursors) {
  auto [it, inserted] = cursors.try_emplace({tid, p});
  if (inserted) {
    if (auto v = wget(ctx, cf_groups, cursor_key(group, tid, p))) decode(*v, it->second);
  }
  return it->second;
}

void rocksdb_store::erase_delivery_due(group_ctx& ctx, std::string_view group, std::uint32_t tid, std::uint32_t p,
                                       std::uint64_t offset) {
  if (auto old = wget(ctx, cf_groups, message_key('d', group, tid, p, offset))) {
    delivery_value ov;
    if (decode(*old, ov) && (ov.status == 1 || ov.status == 2)) {
      ctx.del(cf_index_, delivery_due_key(ov.visible_at_ms, group, tid, p, offset));
    }
  }
}

void rocksdb_store::put_delivery(group_ctx& ctx, std::string_view group, std::uint32_t tid, std::uint32_t p,
                                 std::uint64_t offset, const delivery_value& v) {
  erase_delivery_due(ctx, group, tid, p, offset);
  const std::string value = encode(v);
  ctx.put(cf_groups, message_key('d', group, tid, p, offset), value);
  if (v.status == 1 || v.status == 2) {
    ctx.put(cf_index_, delivery_due_key(v.visible_at_ms, group, tid, p, offset), value);
  }
}

void rocksdb_store::apply_ack(group_ctx& ctx, std::string_view group, std::uint32_t tid, std::uint32_t p,
                              std::uint64_t offset, std::optional<dead_letter> dead,
                              std::map<std::pair<std::uint32_t, std::uint32_t>, cursor_value>& cursors) {
  auto& c = cursor_for(ctx, group, tid, p, cursors);
  const std::string dkey = message_key('d', group, tid, p, offset);
  // Written since it was found absent: the overlay has it, and wget reads the overlay first.
  const bool known_absent = dkey == ctx.absent_delivery && !ctx.overlay[cf_groups].contains(dkey);
  auto existing = known_absent ? std::nullopt : wget(ctx, cf_groups, dkey);
  if (!existing && offset < c.ack_floor && !dead) return;  // already done
  if (dead) {
    records::DeadLetterRecord rec;
    rec.set_topic(dead->topic);
    rec.set_partition(p);
    rec.set_offset(offset);
    rec.set_attempts(dead->attempts);
    rec.set_dead_at_ms(dead->dead_at_ms ? dead->dead_at_ms : ctx.now_ms);
    rec.set_reason(dead->reason);
    ctx.put(cf_groups, message_key('q', group, tid, p, offset), rec.SerializeAsString());
  }
  if (c.next_offset <= offset) c.next_offset = offset + 1;
  if (offset != c.ack_floor) {
    if (offset < c.ack_floor) {
      // A redriven message below the floor: done means gone.
      erase_delivery_due(ctx, group, tid, p, offset);
      ctx.del(cf_groups, dkey);
      return;
    }
    // Above the floor: remember it is done until the floor gets here.
    delivery_value v;
    if (existing) decode(*existing, v);
    v.status = dead ? 4 : 3;
    v.holder.clear();  // done: held by nobody
    put_delivery(ctx, group, tid, p, offset, v);
    return;
  }
  // At the floor (the common case of in-order acks): no record to write, only the floor moves,
  // over this message and every done one after it.
  if (existing) {
    erase_delivery_due(ctx, group, tid, p, offset);
    ctx.del(cf_groups, dkey);
  }
  ++c.ack_floor;
  while (c.ack_floor < c.next_offset) {
    const std::string k = message_key('d', group, tid, p, c.ack_floor);
    auto rec = wget(ctx, cf_groups, k);
    if (!rec && !ctx.poisoned) ctx.absent_delivery = k;
    delivery_value dv;
    if (!rec || !decode(*rec, dv) || (dv.status != 3 && dv.status != 4)) break;
    ctx.del(cf_groups, k);
    ++c.ack_floor;
  }
}

void rocksdb_store::ensure_group(group_info info, group_start start, completion<group_state> done) {
  auto inner = [this, done = std::move(done), name = info.name](result<group_state> r) {
    // The state is read back after the write so it is exactly what is stored.
    if (!r) return done(r.error());
    done(load_group(name));
  };
  submit<group_state>(true, 256, std::move(inner), [this, info = std::move(info), start](group_ctx& ctx) -> result<group_state> {
    if (!valid_name(info.name, k_max_group_name)) return errc::invalid_argument;
    std::vector<std::shared_ptr<topic_state>> topics;
    for (auto& name : info.topics) {
      auto t = writer_topic(ctx, name);
      if (!t) return errc::unknown_topic;
      topics.push_back(std::move(t));
    }
    records::GroupRecord rec;
    const std::string gkey = group_record_key(info.name);
    if (auto existing = wget(ctx, cf_default, gkey)) {
      if (!rec.ParseFromString(*existing)) return errc::corruption;
    } else {
      rec.set_name(info.name);
      rec.set_created_ms(ctx.now_ms);
    }
    if (ctx.poisoned) return *ctx.poisoned;
    bool changed = !rec.created_ms() || rec.topics_size() == 0;
    for (auto& t : topics) {
      const bool known = std::find(rec.topics().begin(), rec.topics().end(), t->record.name()) != rec.topics().end();
      // Cluster mode: a known topic may lack the cursor of a partition this node did not own
      // when the group learned the topic (it followed it, and its leader had no state of the
      // group yet): that partition's cursor starts now.
      if (known && !options_.log_group_changes) continue;
      if (!known) {
        rec.add_topics(t->record.name());
        changed = true;
      }
      for (std::uint32_t p = 0; p < t->record.partitions(); ++p) {
        auto& ps = *t->partitions[p];
        const std::uint64_t at = start == group_start::latest ? ps.next : ps.meta.start_offset;
        if (!group_owned(*t, p)) continue;  // a followed partition: the leader's state comes by replication
        if (known && wget(ctx, cf_groups, cursor_key(info.name, t->record.id(), p))) continue;
        ctx.put(cf_groups, cursor_key(info.name, t->record.id(), p), encode(cursor_value{at, at}));
        if (options_.log_group_changes) {
          v1::GroupChange change;
          change.set_group(info.name);
          change.set_topic(t->record.name());
          change.set_cursor_floor(at);
          change.set_cursor_next(at);
          change.set_group_created_ms(rec.created_ms());
          change.set_time_ms(ctx.now_ms);
          log_group_change(ctx, t->record.id(), p, ps, change);
        }
      }
    }
    if (changed || !wget(ctx, cf_default, gkey)) ctx.put(cf_default, gkey, rec.SerializeAsString());
    return group_state{};
  });
}

void rocksdb_store::update_group(group_update update, completion<group_update_result> done) {
  const std::size_t bytes = 64 + 48 * (update.deliveries.size() + update.acks.size() + update.dead.size() +
                                       update.redrive.size() + update.dispatched.size());
  // Cluster mode: a group change is acknowledged only once fsynced (here and on the ISR).
  const bool sync = update.sync || options_.log_group_changes;
  submit<group_update_result>(sync, bytes, std::move(done), [this, u = std::move(update)](group_ctx& ctx) -> result<group_update_result> {
    if (!valid_name(u.group, k_max_group_name)) return errc::invalid_argument;
    auto group_rec = wget(ctx, cf_default, group_record_key(u.group));
    if (!group_rec) return ctx.poisoned ? *ctx.poisoned : make_error_code(errc::unknown_group);
    // Resolve every topic first so a bad request writes nothing.
    std::unordered_map<std::string, std::shared_ptr<topic_state>> topics;
    auto need = [&](const std::string& name, std::uint32_t p) -> bool {
      auto it = topics.find(name);
      if (it == topics.end()) {
        auto t = writer_topic(ctx, name);
        if (!t) return false;
        it = topics.emplace(name, std::move(t)).first;
      }
      return p < it->second->record.partitions();
    };
    for (auto& c : u.dispatched) if (!need(c.topic, c.partition)) return errc::unknown_partition;
    for (auto& d : u.deliveries) if (!need(d.topic, d.partition)) return errc::unknown_partition;
    for (auto& a : u.acks) if (!need(a.topic, a.partition)) return errc::unknown_partition;
    for (auto& d : u.dead) if (!need(d.topic, d.partition)) return errc::unknown_partition;
    for (auto& r : u.redrive) if (!need(r.topic, r.partition)) return errc::unknown_partition;
    for (auto& d : u.deliveries) {
      if (d.status == delivery_status::acked || d.status == delivery_status::dead) return errc::invalid_argument;
    }
    auto tid = [&](const std::string& name) { return topics[name]->record.id(); };

    std::map<std::pair<std::uint32_t, std::uint32_t>, cursor_value> cursors;
    auto owned = [&](const std::string& topic, std::uint32_t p) { return group_owned(*topics[topic], p); };
    for (auto& c : u.dispatched) {
      if (!owned(c.topic, c.partition)) continue;
      auto& cv = cursor_for(ctx, u.group, tid(c.topic), c.partition, cursors);
      cv.next_offset = std::max(cv.next_offset, c.next_offset);
    }
    for (auto& d : u.deliveries) {
      if (!owned(d.topic, d.partition)) continue;
      delivery_value v{d.attempt, d.visible_at_ms, static_cast<std::uint8_t>(d.status), d.holder};
      put_delivery(ctx, u.group, tid(d.topic), d.partition, d.offset, v);
    }
    for (auto& a : u.acks) {
      if (owned(a.topic, a.partition)) apply_ack(ctx, u.group, tid(a.topic), a.partition, a.offset, std::nullopt, cursors);
    }
    for (auto& d : u.dead) {
      if (owned(d.topic, d.partition)) apply_ack(ctx, u.group, tid(d.topic), d.partition, d.offset, d, cursors);
    }
    for (auto& r : u.redrive) {
      if (!owned(r.topic, r.partition)) continue;
      const std::uint32_t id = tid(r.topic);
      const std::string qkey = message_key('q', u.group, id, r.partition, r.offset);
      if (!wget(ctx, cf_groups, qkey)) continue;
      ctx.del(cf_groups, qkey);
      put_delivery(ctx, u.group, id, r.partition, r.offset, delivery_value{0, ctx.now_ms, 2, {}});
    }
    if (ctx.poisoned) return *ctx.poisoned;
    group_update_result out;
    if (options_.log_group_changes) log_update(ctx, u, *group_rec, topics, cursors, out);
    std::unordered_map<std::uint32_t, std::string> names;
    for (auto& [name, t] : topics) names[t->record.id()] = name;
    for (auto& [tp, c] : cursors) {
      ctx.put(cf_groups, cursor_key(u.group, tp.first, tp.second), encode(c));
      out.cursors.push_back({names[tp.first], tp.second, c.ack_floor, c.next_offset});
    }
    return out;
  });
}

// The group's own record (name, topics, creation), the part of its state both loads start from.
result<group_state> rocksdb_store::load_group_record(std::string_view name) const {
  std::string value;
  auto s = db_->Get(rocksdb::ReadOptions(), handles_[cf_default], group_record_key(name), &value);
  if (s.IsNotFound()) return errc::unknown_group;
  if (!s.ok()) return status_error(s, "loading consumer group '" + std::string(name) + "'");
  records::GroupRecord rec;
  if (!rec.ParseFromString(value)) return errc::corruption;
  group_state out;
  out.info.name = rec.name();
  out.info.topics.assign(rec.topics().begin(), rec.topics().end());
  out.info.created_ms = rec.created_ms();
  return out;
}

result<group_state> rocksdb_store::load_group(std::string_view name) const {
  TXMQ_TRY(auto out, load_group_record(name));

  auto topic_name = [&](std::uint32_t id) -> std::string {
    auto t = find_topic(id);
    return t ? t->record.name() : std::string();
  };
  const std::string cprefix = group_prefix('c', name);
  TXMQ_TRY(scan(cf_groups, cprefix, prefix_end(cprefix), [&](std::string_view k, std::string_view v) -> result<bool> {
    cursor_value c;
    if (k.size() != cprefix.size() + 8 || !decode(v, c)) return errc::corruption;
    out.cursors.push_back({topic_name(get_u32(k.data() + cprefix.size())), get_u32(k.data() + cprefix.size() + 4),
                           c.ack_floor, c.next_offset});
    return true;
  }));
  const std::string dprefix = group_prefix('d', name);
  TXMQ_TRY(scan(cf_groups, dprefix, prefix_end(dprefix), [&](std::string_view k, std::string_view v) -> result<bool> {
    delivery_value d;
    if (k.size() != dprefix.size() + 16 || !decode(v, d)) return errc::corruption;
    const char* p = k.data() + dprefix.size();
    out.deliveries.push_back({topic_name(get_u32(p)), get_u32(p + 4), get_u64(p + 8), d.attempt, d.visible_at_ms,
                              static_cast<delivery_status>(d.status), std::move(d.holder)});
    return true;
  }));
  const std::string qprefix = group_prefix('q', name);
  TXMQ_TRY(scan(cf_groups, qprefix, prefix_end(qprefix), [&](std::string_view, std::string_view) -> result<bool> {
    ++out.dead_letters;
    return true;
  }));
  return out;
}

result<group_state> rocksdb_store::load_group_partition(std::string_view name, std::string_view topic,
                                                       std::uint32_t partition) const {
  TXMQ_TRY(auto out, load_group_record(name));
  std::string value;
  auto t = find_topic(topic);
  if (!t) return out;  // no local copy: no state of it here
  const std::uint32_t tid = t->record.id();
  auto s = db_->Get(rocksdb::ReadOptions(), handles_[cf_groups], cursor_key(name, tid, partition), &value);
  if (!s.ok() && !s.IsNotFound()) return status_error(s, "loading consumer group '" + std::string(name) + "'");
  if (s.ok()) {
    cursor_value c;
    if (!decode(value, c)) return errc::corruption;
    out.cursors.push_back({std::string(topic), partition, c.ack_floor, c.next_offset});
  }
  std::string dprefix = group_prefix('d', name);
  put_u32(dprefix, tid);
  put_u32(dprefix, partition);
  TXMQ_TRY(scan(cf_groups, dprefix, prefix_end(dprefix), [&](std::string_view k, std::string_view v) -> result<bool> {
    delivery_value d;
    if (k.size() != dprefix.size() + 8 || !decode(v, d)) return errc::corruption;
    out.deliveries.push_back({std::string(topic), partition, get_u64(k.data() + dprefix.size()), d.attempt,
                              d.visible_at_ms, static_cast<delivery_status>(d.status), std::move(d.holder)});
    return true;
  }));
  return out;
}

std::vector<group_info> rocksdb_store::groups() const {
  std::vector<group_info> out;
  auto r = scan(cf_default, "g/", prefix_end("g/"), [&](std::string_view, std::string_view v) -> result<bool> {
    records::GroupRecord rec;
    if (!rec.ParseFromArray(v.data(), static_cast<int>(v.size()))) return errc::corruption;
    out.push_back({rec.name(), {rec.topics().begin(), rec.topics().end()}, rec.created_ms()});
    return true;
  });
  (void)r;  // an unreadable record was already refused at open; a listing shows what it can
  return out;
}

result<std::vector<dead_letter>> rocksdb_store::dead_letters(std::string_view group, std::size_t limit,
                                                            const std::optional<message_ref>& after) const {
  std::vector<dead_letter> out;
  if (limit == 0) return out;
  const std::string qprefix = group_prefix('q', group);
  std::string from = qprefix;
  if (after) {
    // Keys hold the topic's id: the page goes on right after the key of `after`.
    auto t = find_topic(after->topic);
    if (!t) return error(errc::invalid_argument, "no topic '" + after->topic + "' to continue a dead-letter listing after");
    from = message_key('q', group, t->record.id(), after->partition, after->offset);
    from.push_back('\0');
  }
  TXMQ_TRY(scan(cf_groups, from, prefix_end(qprefix), [&](std::string_view, std::string_view v) -> result<bool> {
    records::DeadLetterRecord rec;
    if (!rec.ParseFromArray(v.data(), static_cast<int>(v.size()))) return errc::corruption;
    out.push_back({rec.topic(), rec.partition(), rec.offset(), rec.attempts(), rec.dead_at_ms(), rec.reason()});
    return out.size() < limit;
  }));
  return out;
}

result<std::vector<due_delivery>> rocksdb_store::due_deliveries(std::int64_t until_ms, std::size_t limit) const {
  std::vector<due_delivery> out;
  std::string upper(1, 'd');
  put_u64(upper, time_key(until_ms) + 1);
  TXMQ_TRY(scan(cf_index_, "d", upper, [&](std::string_view k, std::string_view v) -> result<bool> {
    delivery_value d;
    if (k.size() < 1 + 8 + 1 || !decode(v, d)) return errc::corruption;
    const std::size_t glen = static_cast<unsigned char>(k[9]);
    if (k.size() != 10 + glen + 16) return errc::corruption;
    const char* p = k.data() + 10 + glen;
    auto t = find_topic(get_u32(p));
    due_delivery dd;
    dd.group = std::string(k.substr(10, glen));
    dd.delivery = {t ? t->record.name() : std::string(), get_u32(p + 4), get_u64(p + 8), d.attempt, d.visible_at_ms,
                   static_cast<delivery_status>(d.status), std::move(d.holder)};
    out.push_back(std::move(dd));
    return out.size() < limit;
  }));
  return out;
}

}  // namespace txmq::storage::detail
