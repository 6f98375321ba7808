// Messages: append with dedupe, reads of the partitioned log, lookup by id.

#include "rocksdb_store.h"
#include "log_records.h"
#include "txmq/protocol/partitioner.h"
#include "txmq/protocol/wire.h"

namespace txmq::storage::detail {

encoded_message encode_message(v1::Message&& m, std::int64_t now_ms) {
  encoded_message e;
  e.id = protocol::uuid::from_bytes(m.id()).value();  // length checked by the caller
  if (m.has_key()) e.key = m.key();
  if (m.publish_time_ms() == 0) m.set_publish_time_ms(now_ms);
  e.publish_ms = m.publish_time_ms();
  e.body_bytes = m.body().size();
  m.clear_topic();
  m.clear_partition();
  m.clear_offset();
  m.clear_attempt();
  m.SerializeToString(&e.bytes);
  return e;
}

position rocksdb_store::append_one(group_ctx& ctx, topic_state& t, const encoded_message& msg,
                                   std::optional<std::uint32_t> partition) {
  if (auto it = ctx.dedupe.find(msg.id); it != ctx.dedupe.end()) {
    return {it->second.partition, it->second.offset, true};
  }
  const rocksdb::Slice id_key(msg.id.raw().data(), msg.id.raw().size());
  std::string existing;
  auto s = msg.id > max_stored_id_ ? rocksdb::Status::NotFound()
                                   : db_->Get(rocksdb::ReadOptions(), handles_[cf_dedupe], id_key, &existing);
  if (s.ok()) {
    dedupe_entry e;
    if (decode(existing, e) && e.stored_ms >= ctx.now_ms - options_.dedupe_window.count()) {
      return {e.partition, e.offset, true};
    }
  } else if (!s.IsNotFound()) {
    ctx.poisoned = error(to_error(s), "the dedupe lookup failed: " + s.ToString());
    return {};
  }
  const std::uint32_t parts = t.record.partitions();
  const std::uint32_t p = partition ? *partition
                          : msg.key ? protocol::partition_for_key(*msg.key, parts)
                                    : t.round_robin.fetch_add(1, std::memory_order_relaxed) % parts;
  auto& ps = *t.partitions[p];
  const std::uint64_t offset = ps.next++;

  auto [it, inserted] = ctx.logs.try_emplace({t.record.id(), p});
  auto& log = it->second;
  if (inserted) {
    log.topic_id = t.record.id();
    log.partition = p;
    log.state = &ps;
    log.start(offset);
    ctx.touched.push_back(&ps);
  }
  log.add(msg);
  ctx.messages += 1;
  ctx.bytes += msg.body_bytes;

  const dedupe_entry entry{t.record.id(), p, offset, ctx.now_ms};
  ctx.batch.Put(handles_[cf_dedupe], id_key, encode(entry));
  ctx.dedupe.emplace(msg.id, entry);
  max_stored_id_ = std::max(max_stored_id_, msg.id);
  return {p, offset, false};
}

void rocksdb_store::sample_log_record(std::string_view record) {
  const auto change = log_sampler_.observe(record);
  if (!change) return;
  // Applies to the table files written from now on (flushes and compactions); a failure only
  // leaves the previous setting, so it is logged by RocksDB and not an error of the group.
  // L1's target size counts stored (compressed) bytes: kept at one memtable of messages as
  // they arrive (open()'s setting), so that compressed files still move down by trivial moves
  // instead of being merged again by every L0->L1 compaction (3.4x the bytes flushed with the
  // setting of open, against 1.3x uncompressed: docs/BENCHMARKS.md, eleventh round).
  const auto base = *change ? std::max<std::uint64_t>(static_cast<std::uint64_t>(static_cast<double>(options_.write_buffer_bytes) *
                                                                                  log_sampler_.average_ratio()),
                                                      1u << 20)
                            : options_.write_buffer_bytes;
  db_->SetOptions(handles_[cf_log], {{"compression", *change ? "kLZ4Compression" : "kNoCompression"},
                                     {"max_bytes_for_level_base", std::to_string(base)}})
      .PermitUncheckedError();
}

bool valid_messages(const std::vector<v1::Message>& messages) {
  return !messages.empty() && std::all_of(messages.begin(), messages.end(), [](const v1::Message& m) {
    const auto& id = m.id();
    return id.size() == protocol::uuid::size && id.find_first_not_of('\0') != std::string::npos;
  });
}
std::size_t request_bytes(const std::vector<v1::Message>& messages) {
  std::size_t n = 64;
  for (auto& m : messages) n += m.body().size() + m.key().size() + 48;
  return n;
}

void rocksdb_store::append(append_request request, completion<append_result> done) {
  if (!valid_messages(request.messages)) return done(make_error_code(errc::invalid_argument));
  if (!request.partitions.empty() && request.partitions.size() != request.messages.size()) {
    return done(make_error_code(errc::invalid_argument));
  }
  // Serialize here, on the caller's thread: the writer thread is the one everybody waits for.
  const std::int64_t received_ms = now();
  std::vector<encoded_message> messages;
  messages.reserve(request.messages.size());
  std::size_t bytes = 64;
  for (auto& m : request.messages) {
    messages.push_back(encode_message(std::move(m), received_ms));
    bytes += messages.back().bytes.size();
  }
  submit<append_result>(request.sync, bytes, std::move(done),
                        [this, topic = std::move(request.topic), create = request.auto_create_partitions,
                         chosen = std::move(request.partitions),
                         messages = std::move(messages)](group_ctx& ctx) -> result<append_result> {
    // Decided by the writer, so a request queued before the disk filled is judged like one after.
    // A latched store answers its failure instead (the graver news, and what health() says).
    if (full_ && !failed_) return full_refusal();
    TXMQ_TRY(auto t, writer_topic_or_create(ctx, topic, create));
    append_result out;
    out.positions.reserve(messages.size());
    if (!chosen.empty()) {
      for (const auto p : chosen) {
        if (p >= t->record.partitions()) return make_error_code(errc::unknown_partition);
      }
    }
    for (std::size_t i = 0; i < messages.size(); ++i) {
      out.positions.push_back(
          append_one(ctx, *t, messages[i], chosen.empty() ? std::nullopt : std::optional<std::uint32_t>(chosen[i])));
      if (ctx.poisoned) return *ctx.poisoned;
    }
    return out;
  }, std::move(request.on_written));
}

namespace {

// One field of protobuf's wire format (protocol/wire.h): its number and wire type, and its bytes
// (wire type 2) or value (varints; the other types are skipped). False on a truncated or
// malformed one.
bool read_field(std::string_view& in, std::uint32_t& field, std::uint32_t& type, std::string_view& bytes,
                std::uint64_t& value) {
  namespace wire = protocol::wire;
  std::uint64_t number = 0;
  if (!wire::take_tag(in, number, type)) return false;
  field = static_cast<std::uint32_t>(number);
  if (type == wire::k_varint) return wire::take_varint(in, value);
  if (type == wire::k_len) return wire::take_bytes(in, bytes);
  return wire::skip_field(in, number, type);
}

// What delivery needs of an encoded txmq.v1.Message (field numbers of message.proto); `base`
// is where `m` starts in the buffer the offsets count from. A later field overrides an earlier
// one, as protobuf's parser does; a field of the wrong wire type is an unknown field to that
// parser (a client may send one: the broker stores it as it came), so it is passed over here too.
bool summarize(std::string_view m, std::size_t base, raw_message& out) {
  namespace wire = protocol::wire;
  const char* start = m.data();
  while (!m.empty()) {
    std::uint32_t field = 0;
    std::uint32_t type = 0;
    std::string_view bytes;
    std::uint64_t value = 0;
    if (!read_field(m, field, type, bytes, value)) return false;
    const bool len = type == wire::k_len;
    const bool varint = type == wire::k_varint;
    if (field == 3 && len) {  // key
      out.has_key = true;
      out.key_begin = base + static_cast<std::size_t>(bytes.data() - start);
      out.key_size = bytes.size();
    } else if (field == 5 && len) {  // body
      out.body_bytes = bytes.size();
    } else if (field == 6 && varint) {  // publish_time_ms
      out.publish_time_ms = static_cast<std::int64_t>(value);
    } else if (field == 7 && varint) {  // deliver_at_ms
      out.deliver_at_ms = static_cast<std::int64_t>(value);
    }
  }
  return true;
}

}  // namespace

result<read_result> rocksdb_store::read(const read_request& req) const {
  const auto t = find_topic(req.topic);
  const auto window = read_window(t.get(), req);
  if (!window) return window.error();
  read_result out;
  start_answer(out, window.value());
  if (window.value().empty() || req.max_messages == 0) return out;
  const std::uint64_t from = window.value().from;
  const std::uint64_t end = window.value().end;

  log_records records(*db_, handles_[cf_log], t->record.id(), req.partition, from, end);
  rocksdb::Iterator* it = &records.it();

  std::size_t bytes = 0;
  for (; req.raw && records.valid(); it->Next()) {
    // The batch's messages are copied as they are stored, each beside what delivery needs of it.
    const std::uint64_t base = get_u64(it->key().data() + 8);
    std::string_view value(it->value().data(), it->value().size());
    batch_header h;
    if (!decode(value, h)) return errc::corruption;
    std::string_view in = value.substr(batch_header_bytes);
    std::uint64_t i = 0;
    while (!in.empty()) {
      std::uint32_t field = 0;
      std::uint32_t type = 0;
      std::string_view m;
      std::uint64_t ignored = 0;
      if (!read_field(in, field, type, m, ignored)) return errc::corruption;
      if (field != 2 || type != protocol::wire::k_len) continue;  // MessageBatch.messages
      const std::uint64_t offset = base + i++;
      if (offset < from) continue;
      if (offset >= end) break;
      raw_message r;
      r.offset = offset;
      r.begin = out.raw_bytes.size();
      r.size = m.size();
      if (!summarize(m, r.begin, r)) return errc::corruption;
      const std::size_t size = r.body_bytes + r.key_size;
      if (!out.raw.empty() && (out.raw.size() >= req.max_messages || bytes + size > req.max_bytes)) return out;
      out.raw_bytes.append(m);
      bytes += size;
      out.raw.push_back(r);
      out.next_offset = offset + 1;
    }
    if (in.empty() && i != h.count) return errc::corruption;
    if (out.raw.size() >= req.max_messages) break;
  }
  for (; !req.raw && records.valid(); it->Next()) {
    const std::uint64_t base = get_u64(it->key().data() + 8);
    std::string_view value(it->value().data(), it->value().size());
    batch_header h;
    v1::MessageBatch batch;
    if (!decode(value, h) ||
        !batch.ParseFromArray(value.data() + batch_header_bytes, static_cast<int>(value.size() - batch_header_bytes)) ||
        batch.messages_size() != static_cast<int>(h.count)) {
      return errc::corruption;
    }
    for (int i = 0; i < batch.messages_size(); ++i) {
      const std::uint64_t offset = base + static_cast<std::uint64_t>(i);
      if (offset < from) continue;
      if (offset >= end) break;
      auto& m = *batch.mutable_messages(i);
      const std::size_t size = m.body().size() + m.key().size();
      if (!out.messages.empty() && (out.messages.size() >= req.max_messages || bytes + size > req.max_bytes)) {
        return out;
      }
      m.set_topic(req.topic);
      m.set_partition(req.partition);
      m.set_offset(offset);
      bytes += size;
      out.messages.push_back(std::move(m));
      out.next_offset = offset + 1;
    }
    if (out.messages.size() >= req.max_messages) break;
  }
  if (!it->status().ok()) return status_error(it->status(), "reading partition " + std::to_string(req.partition) + " of '" + req.topic + "'");
  return out;
}

result<std::optional<id_location>> rocksdb_store::find_id(const message_id& id) const {
  std::string value;
  auto s = db_->Get(rocksdb::ReadOptions(), handles_[cf_dedupe], std::string(id.raw()), &value);
  if (s.IsNotFound()) return std::optional<id_location>{};
  if (!s.ok()) return status_error(s, "looking up message id " + id.to_string());
  dedupe_entry e;
  if (!decode(value, e)) return errc::corruption;
  if (e.stored_ms < now() - options_.dedupe_window.count()) return std::optional<id_location>{};
  auto t = find_topic(e.topic_id);
  if (!t) return errc::corruption;
  return std::optional<id_location>{id_location{t->record.name(), e.partition, e.offset}};
}

}  // namespace txmq::storage::detail
