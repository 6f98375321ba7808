// Replication's part of the store (replica.h): leader-epoch entries, follower appends at the
// leader's offsets, truncation of a partition's log. Kept apart from the produce path so
// single-node mode runs none of it.
//
// Epoch entries: CF default, "e/" topic_id:4 partition:4 epoch:4 → start_offset:8.

#include "rocksdb_store.h"
#include "log_records.h"
#include "txmq/protocol/wire.h"

namespace txmq::storage {

epoch_end end_offset_for_epoch(const std::vector<epoch_entry>& epochs, std::uint32_t epoch, std::uint64_t log_end) {
  std::optional<std::size_t> at;
  for (std::size_t i = 0; i < epochs.size(); ++i) {
    if (epochs[i].epoch <= epoch) at = i;
  }
  if (!at) return {std::nullopt, epochs.empty() ? log_end : std::min(log_end, epochs.front().start_offset)};
  const std::uint64_t end = *at + 1 < epochs.size() ? epochs[*at + 1].start_offset : log_end;
  return {epochs[*at].epoch, std::min(end, log_end)};
}

std::uint32_t epoch_at(const std::vector<epoch_entry>& epochs, std::uint64_t offset) {
  std::uint32_t e = 0;
  for (const auto& x : epochs) {
    if (x.start_offset <= offset) e = x.epoch;
  }
  return e;
}

namespace {

using protocol::wire::skip_field;
using protocol::wire::take_bytes;
using protocol::wire::take_varint;

// The fields of a stored txmq.v1.Message the store needs (message.proto: id 1, body 5,
// publish_time_ms 6), every field's wire format checked. A field of the wrong wire type is an
// unknown field to protobuf's parser, which keeps it (a client may have sent one, and the leader
// stored it as it came): skipped here too, or the follower would refuse what its leader took.
bool scan_message(std::string_view m, raw_entry& out) {
  namespace wire = protocol::wire;
  out.id = {};
  out.publish_time_ms = 0;
  out.body_bytes = 0;
  while (!m.empty()) {
    std::uint64_t field = 0;
    std::uint32_t wt = 0;
    if (!wire::take_tag(m, field, wt)) return false;
    if ((field == 1 || field == 5) && wt == wire::k_len) {
      std::string_view b;
      if (!take_bytes(m, b)) return false;
      if (field == 1) out.id = b;
      else out.body_bytes = b.size();
    } else if (field == 6 && wt == wire::k_varint) {
      std::uint64_t v = 0;
      if (!take_varint(m, v)) return false;
      out.publish_time_ms = static_cast<std::int64_t>(v);
    } else if (!skip_field(m, field, wt)) {
      return false;
    }
  }
  return out.id.size() == protocol::uuid::size && out.id.find_first_not_of('\0') != std::string_view::npos;
}

}  // namespace

bool next_raw_entry(std::string_view& rest, raw_entry& out, bool check_message, char tag) {
  std::string_view s = rest;
  if (s.empty() || s.front() != tag) return false;
  s.remove_prefix(1);
  std::string_view m;
  if (!take_bytes(s, m)) return false;
  if (check_message && !scan_message(m, out)) return false;
  out.message = m;
  out.entry = rest.substr(0, rest.size() - s.size());
  rest = s;
  return true;
}

namespace detail {
namespace {

std::string epoch_prefix(std::uint32_t tid, std::uint32_t p) {
  std::string k = "e/";
  put_u32(k, tid);
  put_u32(k, p);
  return k;
}
std::string epoch_key(std::uint32_t tid, std::uint32_t p, std::uint32_t epoch) {
  std::string k = epoch_prefix(tid, p);
  put_u32(k, epoch);
  return k;
}
std::string u64_value(std::uint64_t v) {
  std::string s;
  put_u64(s, v);
  return s;
}

}  // namespace

result<std::vector<epoch_entry>> rocksdb_store::load_epochs(std::uint32_t tid, std::uint32_t p) const {
  std::vector<epoch_entry> out;
  const std::string prefix = epoch_prefix(tid, p);
  TXMQ_TRY(scan(cf_default, prefix, prefix_end(prefix), [&](std::string_view k, std::string_view v) -> result<bool> {
    if (k.size() != prefix.size() + 4 || v.size() != 8) return make_error_code(errc::corruption);
    out.push_back({get_u32(k.data() + prefix.size()), get_u64(v.data())});
    return true;
  }));
  return out;
}

std::vector<epoch_entry>& rocksdb_store::writer_epochs(std::uint32_t tid, std::uint32_t p) {
  auto [it, inserted] = epochs_.try_emplace({tid, p});
  if (inserted) {
    auto loaded = load_epochs(tid, p);
    if (!loaded) {
      epochs_.erase(it);
      throw std::runtime_error("reading the leader epochs failed: " + loaded.error().message);
    }
    it->second = std::move(loaded).value();
  }
  return it->second;
}

result<std::vector<epoch_entry>> rocksdb_store::leader_epochs(std::string_view topic, std::uint32_t partition) const {
  auto t = find_topic(topic);
  if (!t) return make_error_code(errc::unknown_topic);
  if (partition >= t->partitions.size()) return make_error_code(errc::unknown_partition);
  return load_epochs(t->record.id(), partition);
}

void rocksdb_store::begin_epoch(std::string topic, std::uint32_t partition, std::uint32_t epoch,
                                completion<std::uint64_t> done) {
  submit<std::uint64_t>(true, 64, std::move(done),
                        [this, topic = std::move(topic), partition, epoch](group_ctx& ctx) -> result<std::uint64_t> {
    auto t = writer_topic(ctx, topic);
    if (!t) return make_error_code(errc::unknown_topic);
    if (partition >= t->record.partitions()) return make_error_code(errc::unknown_partition);
    auto& ps = *t->partitions[partition];
    ps.group_owner = true;  // leading: this node's group changes are the partition's (group replication)
    auto& epochs = writer_epochs(t->record.id(), partition);
    if (!epochs.empty() && epochs.back().epoch >= epoch) return ps.next;
    ctx.put(cf_default, epoch_key(t->record.id(), partition, epoch), u64_value(ps.next));
    epochs.push_back({epoch, ps.next});
    return ps.next;
  });
}

namespace {
// What the writer needs of each message of a raw append (its bytes go into the log as they are).
struct raw_id {
  protocol::uuid id;
  std::size_t body_bytes = 0;
};
}  // namespace

void rocksdb_store::replica_append(replica_append_request request, completion<std::uint64_t> done) {
  if (request.raw) return replica_append_raw(std::move(request), std::move(done));
  if (!valid_messages(request.messages)) return done(make_error_code(errc::invalid_argument));
  std::vector<encoded_message> messages;
  messages.reserve(request.messages.size());
  std::size_t bytes = 64;
  const std::int64_t received_ms = now();
  for (auto& m : request.messages) {
    messages.push_back(encode_message(std::move(m), received_ms));
    bytes += messages.back().bytes.size();
  }
  submit<std::uint64_t>(request.sync, bytes, std::move(done),
                        [this, topic = std::move(request.topic), partition = request.partition,
                         base = request.base_offset, epoch = request.leader_epoch,
                         create = request.auto_create_partitions,
                         messages = std::move(messages)](group_ctx& ctx) -> result<std::uint64_t> {
    if (full_ && !failed_) return full_refusal();
    TXMQ_TRY(auto t, writer_topic_or_create(ctx, topic, create));
    if (partition >= t->record.partitions()) return make_error_code(errc::unknown_partition);
    auto& ps = *t->partitions[partition];
    const std::uint32_t tid = t->record.id();
    TXMQ_TRY(check_replica_batch(ctx, topic, partition, ps, tid, base, epoch));
    for (const auto& msg : messages) {
      const std::uint64_t offset = ps.next++;
      auto [it, inserted] = ctx.logs.try_emplace({tid, partition});
      auto& log = it->second;
      if (inserted) {
        log.topic_id = tid;
        log.partition = partition;
        log.state = &ps;
        log.start(offset);
        ctx.touched.push_back(&ps);
      }
      log.add(msg);
      ctx.messages += 1;
      ctx.bytes += msg.body_bytes;
      const dedupe_entry entry{tid, partition, offset, ctx.now_ms};
      ctx.batch.Put(handles_[cf_dedupe], rocksdb::Slice(msg.id.raw().data(), msg.id.raw().size()), encode(entry));
      ctx.dedupe.insert_or_assign(msg.id, entry);
      max_stored_id_ = std::max(max_stored_id_, msg.id);
    }
    return ps.next;
  });
}

void rocksdb_store::replica_append_raw(replica_append_request request, completion<std::uint64_t> done) {
  // Checked here, on the caller's thread (the writer thread is the one everybody waits for):
  // every entry well-formed, with an id; nothing is parsed into messages or encoded again.
  auto& raw = *request.raw;
  std::vector<raw_id> ids;
  ids.reserve(raw.count);
  std::int64_t max_publish = 0;
  std::string_view rest = raw.entries;
  raw_entry e;
  while (!rest.empty()) {
    if (!next_raw_entry(rest, e, true)) {
      return done(error(errc::invalid_argument, "a replicated batch of '" + request.topic + "'/" +
                                                    std::to_string(request.partition) + " at offset " +
                                                    std::to_string(request.base_offset) +
                                                    " holds a malformed message (entry " + std::to_string(ids.size()) + ")"));
    }
    ids.push_back({protocol::uuid::from_bytes(e.id).value(), e.body_bytes});
    max_publish = std::max(max_publish, e.publish_time_ms);
  }
  if (ids.empty() || ids.size() != raw.count || raw.base_offset != request.base_offset) {
    return done(make_error_code(errc::invalid_argument));
  }
  const std::size_t bytes = 64 + raw.entries.size();
  submit<std::uint64_t>(request.sync, bytes, std::move(done),
                        [this, topic = std::move(request.topic), partition = request.partition,
                         base = request.base_offset, epoch = request.leader_epoch,
                         create = request.auto_create_partitions, entries = std::move(raw.entries), max_publish,
                         ids = std::move(ids)](group_ctx& ctx) -> result<std::uint64_t> {
    if (full_ && !failed_) return full_refusal();
    TXMQ_TRY(auto t, writer_topic_or_create(ctx, topic, create));
    if (partition >= t->record.partitions()) return make_error_code(errc::unknown_partition);
    auto& ps = *t->partitions[partition];
    const std::uint32_t tid = t->record.id();
    TXMQ_TRY(check_replica_batch(ctx, topic, partition, ps, tid, base, epoch));
    auto [it, inserted] = ctx.logs.try_emplace({tid, partition});
    auto& log = it->second;
    if (inserted) {
      log.topic_id = tid;
      log.partition = partition;
      log.state = &ps;
      log.start(ps.next);
      ctx.touched.push_back(&ps);
    }
    log.add_raw(entries, static_cast<std::uint32_t>(ids.size()), max_publish);
    for (const auto& m : ids) {
      const std::uint64_t offset = ps.next++;
      ctx.messages += 1;
      ctx.bytes += m.body_bytes;
      const dedupe_entry entry{tid, partition, offset, ctx.now_ms};
      ctx.batch.Put(handles_[cf_dedupe], rocksdb::Slice(m.id.raw().data(), m.id.raw().size()), encode(entry));
      ctx.dedupe.insert_or_assign(m.id, entry);
      max_stored_id_ = std::max(max_stored_id_, m.id);
    }
    return ps.next;
  });
}

result<void> rocksdb_store::check_replica_batch(group_ctx& ctx, const std::string& topic, std::uint32_t partition,
                                                partition_state& ps, std::uint32_t tid, std::uint64_t base,
                                                std::uint32_t epoch) {
  if (ps.next != base) {
    return error(errc::invalid_argument, "a replicated batch at offset " + std::to_string(base) + " of '" + topic +
                                             "'/" + std::to_string(partition) + ", whose next offset is " +
                                             std::to_string(ps.next));
  }
  auto& epochs = writer_epochs(tid, partition);
  if (!epochs.empty() && epochs.back().epoch > epoch) {
    return error(errc::invalid_argument, "a replicated batch of leader epoch " + std::to_string(epoch) +
                                             ", older than this partition's epoch " +
                                             std::to_string(epochs.back().epoch));
  }
  if (epochs.empty() || epochs.back().epoch < epoch) {
    ctx.put(cf_default, epoch_key(tid, partition, epoch), u64_value(base));
    epochs.push_back({epoch, base});
  }
  return outcome::success();
}

result<raw_read> rocksdb_store::read_raw(const read_request& req) const {
  const auto t = find_topic(req.topic);
  const auto window = read_window(t.get(), req);
  if (!window) return window.error();
  raw_read out;
  start_answer(out, window.value());
  if (window.value().empty() || req.max_messages == 0) return out;
  const std::uint64_t from = window.value().from;
  const std::uint64_t end = window.value().end;

  log_records records(*db_, handles_[cf_log], t->record.id(), req.partition, from, end);
  rocksdb::Iterator* it = &records.it();

  std::size_t bytes = 0;
  std::size_t messages = 0;
  for (; records.valid(); it->Next()) {
    const std::uint64_t base = get_u64(it->key().data() + 8);
    std::string_view value(it->value().data(), it->value().size());
    batch_header h;
    if (!decode(value, h)) return errc::corruption;
    // The stored MessageBatch: base_offset (field 1) and one `messages` field per message.
    std::string_view rest = value.substr(batch_header_bytes);
    raw_messages run;
    std::uint64_t offset = base;
    std::uint32_t seen = 0;
    while (!rest.empty()) {
      if (rest.front() != 0x12) {
        std::uint64_t field = 0;
        std::uint32_t wt = 0;
        if (!protocol::wire::take_tag(rest, field, wt) || field == 2 || !skip_field(rest, field, wt)) return errc::corruption;
        continue;
      }
      raw_entry e;
      if (!next_raw_entry(rest, e, false)) return errc::corruption;
      ++seen;
      const std::uint64_t at = offset++;
      if (at < from || at >= end || messages >= req.max_messages) continue;
      if (messages > 0 && bytes + e.entry.size() > req.max_bytes) {
        messages = req.max_messages;  // full: nothing after this one
        continue;
      }
      if (run.count == 0) run.base_offset = at;
      run.entries.append(e.entry);
      ++run.count;
      ++messages;
      bytes += e.entry.size();
      out.next_offset = at + 1;
    }
    if (seen != h.count) return errc::corruption;
    if (run.count > 0) out.runs.push_back(std::move(run));
    if (messages >= req.max_messages || offset >= end) break;
  }
  if (!it->status().ok()) {
    return status_error(it->status(), "reading partition " + std::to_string(req.partition) + " of '" + req.topic + "'");
  }
  return out;
}

void rocksdb_store::truncate(std::string topic, std::uint32_t partition, std::uint64_t offset,
                             completion<std::uint64_t> done) {
  submit<std::uint64_t>(true, 64, std::move(done),
                        [this, topic = std::move(topic), partition, offset](group_ctx& ctx) -> result<std::uint64_t> {
    auto t = writer_topic(ctx, topic);
    if (!t) return make_error_code(errc::unknown_topic);
    if (partition >= t->record.partitions()) return make_error_code(errc::unknown_partition);
    return truncate_in(ctx, *t, partition, offset);
  });
}

void rocksdb_store::restart_log(std::string topic, std::uint32_t partition, std::uint64_t start,
                                std::uint32_t create_partitions, completion<std::uint64_t> done) {
  submit<std::uint64_t>(true, 64, std::move(done),
                        [this, topic = std::move(topic), partition, start,
                         create_partitions](group_ctx& ctx) -> result<std::uint64_t> {
    TXMQ_TRY(auto t, writer_topic_or_create(ctx, topic, create_partitions));
    if (partition >= t->record.partitions()) return make_error_code(errc::unknown_partition);
    TXMQ_TRY(truncate_in(ctx, *t, partition, 0));
    // Empty now (no message, no epoch entry): it starts where the leader's log starts, and the
    // leader's batches (each with its epoch) are appended from there.
    auto& ps = *t->partitions[partition];
    ps.next = start;
    ps.meta.next_offset = start;
    ps.meta.start_offset = start;
    ps.meta.bytes = 0;
    ctx.put(cf_default, partition_meta_key(t->record.id(), partition), encode(ps.meta));
    if (std::find(ctx.touched.begin(), ctx.touched.end(), &ps) == ctx.touched.end()) ctx.touched.push_back(&ps);
    return start;
  });
}

result<std::uint64_t> rocksdb_store::truncate_in(group_ctx& ctx, topic_state& ts, std::uint32_t partition,
                                                 std::uint64_t offset) {
  const std::string& topic = ts.record.name();
  auto& ps = *ts.partitions[partition];
  const std::uint32_t tid = ts.record.id();
  if (ctx.logs.contains({tid, partition})) {
    // The same commit group appended to the partition: its batch is not in the DB yet.
    return error(errc::invalid_argument, "truncating a partition appended to in the same commit group; retry");
  }
  // Epoch entries starting at or past the offset go even when the log holds nothing there.
  auto& epochs = writer_epochs(tid, partition);
  while (!epochs.empty() && epochs.back().start_offset >= offset) {
    ctx.del(cf_default, epoch_key(tid, partition, epochs.back().epoch));
    epochs.pop_back();
  }
  if (offset >= ps.next) return ps.next;
  const std::string prefix = log_prefix(tid, partition);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), handles_[cf_log]));
  it->SeekForPrev(log_key(tid, partition, offset));
  if (!it->Valid() || !it->key().starts_with(prefix)) it->Seek(prefix);
  for (; it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const std::uint64_t base = get_u64(it->key().data() + 8);
    std::string_view value(it->value().data(), it->value().size());
    batch_header h;
    v1::MessageBatch batch;
    if (!decode(value, h) ||
        !batch.ParseFromArray(value.data() + batch_header_bytes, static_cast<int>(value.size() - batch_header_bytes))) {
      return make_error_code(errc::corruption);
    }
    if (base + static_cast<std::uint64_t>(batch.messages_size()) <= offset) continue;
    const int keep = base >= offset ? 0 : static_cast<int>(offset - base);
    for (int i = keep; i < batch.messages_size(); ++i) {
      const auto& id = batch.messages(i).id();
      const std::uint64_t at = base + static_cast<std::uint64_t>(i);
      std::string existing;
      auto s = db_->Get(rocksdb::ReadOptions(), handles_[cf_dedupe], id, &existing);
      dedupe_entry e;
      // Only the entry that points here: an id stored again elsewhere keeps its entry.
      if (s.ok() && decode(existing, e) && e.topic_id == tid && e.partition == partition && e.offset == at) {
        ctx.batch.Delete(handles_[cf_dedupe], id);
      } else if (!s.ok() && !s.IsNotFound()) {
        return status_error(s, "reading a dedupe entry while truncating");
      }
      if (auto u = protocol::uuid::from_bytes(id)) ctx.dedupe.erase(u.value());
    }
    const std::string key(it->key().data(), it->key().size());
    ps.meta.bytes -= std::min<std::uint64_t>(ps.meta.bytes, value.size());
    if (keep == 0) {
      ctx.batch.Delete(handles_[cf_log], key);
      continue;
    }
    batch.mutable_messages()->DeleteSubrange(keep, batch.messages_size() - keep);
    std::int64_t max_publish = 0;
    for (const auto& m : batch.messages()) max_publish = std::max(max_publish, m.publish_time_ms());
    std::string out;
    encode(batch_header{h.version, static_cast<std::uint32_t>(keep), max_publish}, out);
    batch.AppendToString(&out);
    ps.meta.bytes += out.size();
    ctx.batch.Put(handles_[cf_log], key, out);
  }
  if (!it->status().ok()) return status_error(it->status(), "truncating '" + topic + "'");
  ps.next = offset;
  ps.meta.next_offset = offset;
  ps.meta.start_offset = std::min(ps.meta.start_offset, offset);
  ctx.put(cf_default, partition_meta_key(tid, partition), encode(ps.meta));
  ctx.touched.push_back(&ps);
  return ps.next;
}

}  // namespace detail
}  // namespace txmq::storage
