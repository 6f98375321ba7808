// One group's delivery state and decisions (group_tracker.h), and the encoding of a raw Fetch
// answer from the stored bytes it hands out (encode_fetch_response). It is one piece: the fetch, the
// settles and the expiry all walk the same per-partition maps, and the raw encoding is the other
// half of the fetch's raw mode (each delivered's buffer, begin and size are only meaningful to it).

#include "groups/group_tracker.h"

#include <algorithm>
#include <limits>

#include "txmq/protocol/wire.h"

namespace txmq::broker {

using protocol::errc;

group_tracker::group_tracker(std::string name, delivery_settings settings, const storage::store& store,
                             const visible_end_fn* visible)
    : name_(std::move(name)), settings_(std::move(settings)), store_(store), visible_(visible) {
  if (settings_.retry_schedule.empty()) settings_.retry_schedule.push_back(std::chrono::seconds(10));
}

bool group_tracker::subscribes(const std::string& topic) const {
  return std::find(topics_.begin(), topics_.end(), topic) != topics_.end();
}

std::size_t group_tracker::partition_index(const std::string& topic, std::uint32_t p) {
  auto [it, inserted] = index_.try_emplace({topic, p}, partitions_.size());
  if (inserted) {
    partition part;
    part.topic = topic;
    part.id = p;
    partitions_.push_back(std::move(part));
  }
  return it->second;
}

std::optional<std::size_t> group_tracker::find_partition(const std::string& topic, std::uint32_t p) const {
  auto it = index_.find({topic, p});
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

std::uint64_t group_tracker::deliverable_end(const partition& part, std::uint64_t log_end) const {
  return bounded() ? std::min(log_end, (*visible_)(part.topic, part.id, log_end)) : log_end;
}

std::uint64_t group_tracker::deliverable_end(const partition& part) const {
  auto info = store_.topic(part.topic);
  if (!info || part.id >= info->partitions.size()) return 0;
  return deliverable_end(part, info->partitions[part.id].next_offset);
}

std::chrono::milliseconds group_tracker::retry_delay(std::uint32_t attempt) const {
  const auto& s = settings_.retry_schedule;
  const std::size_t i = attempt == 0 ? 0 : std::min<std::size_t>(attempt - 1, s.size() - 1);
  return s[i];
}

bool group_tracker::eligible(const partition& part, std::uint64_t offset, const entry& e) const {
  if (!e.key) return true;
  auto it = part.keys.find(*e.key);
  return it != part.keys.end() && !it->second.empty() && it->second.front() == offset;
}

void group_tracker::enqueue_key(partition& part, std::uint64_t offset, const entry& e) {
  if (!e.key) return;
  auto& q = part.keys[*e.key];
  q.insert(std::upper_bound(q.begin(), q.end(), offset), offset);
}

void group_tracker::set_timeline(std::size_t pidx, std::uint64_t offset, entry& e, std::optional<std::int64_t> when) {
  if (e.timeline_pos) {
    timeline_.erase(*e.timeline_pos);
    e.timeline_pos.reset();
  }
  if (when) e.timeline_pos = timeline_.emplace(*when, std::make_pair(pidx, offset));
}

void group_tracker::make_ready(std::size_t pidx, std::uint64_t offset, entry& e) {
  set_timeline(pidx, offset, e, std::nullopt);
  e.st = state::ready;
  auto& part = partitions_[pidx];
  if (eligible(part, offset, e)) part.deliverable.insert(offset);
}

storage::delivery_record group_tracker::record_of(const partition& part, std::uint64_t offset, const entry& e) const {
  storage::delivery_record r;
  r.topic = part.topic;
  r.partition = part.id;
  r.offset = offset;
  r.attempt = e.attempt;
  r.visible_at_ms = e.when_ms;
  r.status = e.st == state::in_flight ? storage::delivery_status::in_flight : storage::delivery_status::waiting;
  if (e.st == state::in_flight && !holds_.empty()) {
    // The holder travels with the record (replicated): a new leader refuses what this one does.
    if (auto pidx = find_partition(part.topic, part.id)) {
      if (const auto* h = holder(*pidx, offset)) r.holder = *h;
    }
  }
  return r;
}

result<std::optional<v1::Message>> group_tracker::read_one(const partition& part, std::uint64_t offset) const {
  storage::read_request rr;
  rr.topic = part.topic;
  rr.partition = part.id;
  rr.from_offset = offset;
  rr.max_messages = 1;
  TXMQ_TRY(auto r, store_.read(rr));
  if (r.messages.empty() || r.messages.front().offset() != offset) return std::optional<v1::Message>{};
  return std::optional<v1::Message>{std::move(r.messages.front())};
}

result<void> group_tracker::load(const storage::group_state& state, std::int64_t now_ms) {
  for (auto& t : state.info.topics) {
    if (!subscribes(t)) topics_.push_back(t);
  }
  std::map<std::pair<std::string, std::uint32_t>, std::vector<const storage::delivery_record*>> records;
  for (auto& d : state.deliveries) records[{d.topic, d.partition}].push_back(&d);

  for (auto& c : state.cursors) {
    if (find_partition(c.topic, c.partition)) continue;  // known: in-memory state is newer
    const std::size_t pidx = partition_index(c.topic, c.partition);
    auto& part = partitions_[pidx];
    part.floor = c.ack_floor;
    part.next = c.next_offset;
    std::map<std::uint64_t, const storage::delivery_record*> recs;
    for (auto* r : records[{c.topic, c.partition}]) recs[r->offset] = r;

    // Every message between floor and cursor not done, and every redriven one below the floor,
    // is pending again; read them to learn their keys.
    std::set<std::uint64_t> offsets;
    for (std::uint64_t o = part.floor; o < part.next; ++o) offsets.insert(o);
    for (auto& [o, r] : recs) offsets.insert(o);
    std::map<std::uint64_t, v1::Message> messages;
    for (auto& [o, r] : recs) {
      if (o >= part.floor) continue;
      TXMQ_TRY(auto m, read_one(part, o));
      if (m) messages.emplace(o, std::move(*m));
    }
    for (std::uint64_t from = part.floor; from < part.next;) {
      storage::read_request rr;
      rr.topic = c.topic;
      rr.partition = c.partition;
      rr.from_offset = from;
      rr.max_messages = std::min<std::uint64_t>(part.next - from, 1000);
      TXMQ_TRY(auto r, store_.read(rr));
      if (r.messages.empty()) break;
      for (auto& m : r.messages) {
        if (m.offset() < part.next) messages.emplace(m.offset(), std::move(m));
      }
      from = r.next_offset;
    }
    for (std::uint64_t o : offsets) {
      auto rec = recs.find(o);
      if (rec != recs.end() && (rec->second->status == storage::delivery_status::acked ||
                                rec->second->status == storage::delivery_status::dead)) {
        continue;
      }
      auto msg = messages.find(o);
      if (msg == messages.end()) continue;  // removed by retention: nothing left to deliver
      entry e;
      if (msg->second.has_key()) e.key = msg->second.key();
      if (rec != recs.end()) {
        e.attempt = rec->second->attempt;
        e.when_ms = rec->second->visible_at_ms;
        e.st = rec->second->status == storage::delivery_status::in_flight ? state::in_flight : state::waiting;
        if (e.st == state::in_flight && !rec->second->holder.empty()) holds_[{pidx, o}] = rec->second->holder;
      } else {
        // Held behind its key or delivered once without a record: either way it goes out
        // again, flagged as a possible redelivery.
        e.st = state::ready;
        e.attempt = o >= part.floor ? 1 : 0;
      }
      auto& stored = part.pending.emplace(o, std::move(e)).first->second;
      enqueue_key(part, o, stored);
    }
    for (auto& [o, e] : part.pending) {
      if (e.st == state::ready) {
        if (eligible(part, o, e)) part.deliverable.insert(o);
      } else {
        if (e.st == state::in_flight) ++in_flight_count_;
        set_timeline(pidx, o, e, e.when_ms);
      }
    }
    auto first = part.pending.lower_bound(part.floor);
    part.floor = first == part.pending.end() ? part.next : first->first;
  }
  (void)now_ms;
  return outcome::success();
}

void group_tracker::deliver(std::size_t pidx, std::uint64_t offset, entry& e, v1::Message msg, std::uint64_t member,
                            std::chrono::milliseconds ack_deadline, std::int64_t now_ms, fetch_result& out) {
  auto& d = deliver_entry(pidx, offset, e, member, ack_deadline, now_ms, out);
  msg.set_topic(*d.topic);
  msg.set_partition(d.partition);
  msg.set_offset(offset);
  msg.set_attempt(d.attempt);
  d.message = std::move(msg);
}

delivered& group_tracker::deliver_entry(std::size_t pidx, std::uint64_t offset, entry& e, std::uint64_t member,
                                        std::chrono::milliseconds ack_deadline, std::int64_t now_ms,
                                        fetch_result& out) {
  auto& part = partitions_[pidx];
  part.deliverable.erase(offset);
  e.st = state::in_flight;
  e.attempt += 1;
  e.member = member;
  e.when_ms = now_ms + ack_deadline.count();
  set_timeline(pidx, offset, e, e.when_ms);
  ++in_flight_count_;
  // A first delivery needs no record: the dispatch cursor already says the message went out,
  // and after a restart a message between floor and cursor without a record is taken as
  // delivered once (its next delivery says attempt 2). That keeps a consumed message at one
  // store write (its ack) instead of three.
  if (e.attempt > 1) out.update.deliveries.push_back(record_of(part, offset, e));
  auto& d = out.messages.emplace_back();
  d.deadline_ms = e.when_ms;
  d.topic = &part.topic;
  d.partition = part.id;
  d.offset = offset;
  d.attempt = e.attempt;
  return d;
}

namespace {

std::size_t encoded_delivery_bytes(std::size_t message_bytes, const std::string& topic) {
  // Delivery{message, deadline_ms} inside FetchResponse.deliveries: two tags and two length
  // varints, the deadline; the fields deliver() sets (topic, partition, offset, attempt) may be
  // missing from the stored message, so they are added as if absent.
  constexpr std::size_t k_delivery_fields = 2 * (1 + 5) + (1 + 10) + (1 + 5) + (1 + 10) + (1 + 5);
  return message_bytes + 1 + 5 + topic.size() + k_delivery_fields;
}

}  // namespace

std::size_t encoded_delivery_bytes(const v1::Message& m, const std::string& topic) {
  return encoded_delivery_bytes(m.ByteSizeLong(), topic);
}

result<group_tracker::fetch_result> group_tracker::fetch(std::uint64_t member, const std::vector<std::string>& topics,
                                                         std::size_t max, std::size_t max_bytes,
                                                         std::chrono::milliseconds ack_deadline, std::int64_t now_ms,
                                                         bool raw) {
  fetch_result out;
  // Grown otherwise by moving every delivery (a Message inside) at each doubling: 10.6 % of a
  // consume profile (issue #15, docs/BENCHMARKS.md "Eighth round").
  out.messages.reserve(std::min<std::size_t>(max, 1024));
  std::size_t bytes = 0;
  auto fits_bytes = [&](std::size_t size) {
    if (!out.messages.empty() && bytes + size > max_bytes) return false;
    bytes += size;
    return true;
  };
  auto fits = [&](const v1::Message& m, const std::string& topic) {
    return fits_bytes(encoded_delivery_bytes(m, topic));
  };
  // A raw fetch's retries are read parsed (one message each) and encoded into this buffer.
  std::optional<std::size_t> retry_buffer;
  bool full = false;
  out.update = expire(now_ms);
  out.update.group = name_;
  if (ack_deadline.count() <= 0) ack_deadline = settings_.ack_deadline;
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < partitions_.size(); ++i) {
    const std::size_t pidx = (rotate_ + i) % partitions_.size();
    if (std::find(topics.begin(), topics.end(), partitions_[pidx].topic) != topics.end()) order.push_back(pidx);
  }
  rotate_ = partitions_.empty() ? 0 : (rotate_ + 1) % partitions_.size();

  // Retries and messages held back by their key first: they are older. With a visible_end hook
  // (cluster mode) not on a partition this node no longer leads, nor above the high watermark.
  for (std::size_t pidx : order) {
    auto& part = partitions_[pidx];
    if (part.deliverable.empty()) continue;
    const std::uint64_t limit = bounded() ? deliverable_end(part) : std::numeric_limits<std::uint64_t>::max();
    while (out.messages.size() < max && !part.deliverable.empty() && *part.deliverable.begin() < limit) {
      const std::uint64_t offset = *part.deliverable.begin();
      auto& e = part.pending.at(offset);
      TXMQ_TRY(auto msg, read_one(part, offset));
      if (!msg) {
        // Retention removed it before it could be delivered again.
        out.update.acks.push_back({part.topic, part.id, offset});
        finish(pidx, offset);
        continue;
      }
      if (!fits(*msg, part.topic)) {
        full = true;
        break;
      }
      if (!raw) {
        deliver(pidx, offset, e, std::move(*msg), member, ack_deadline, now_ms, out);
        continue;
      }
      if (!retry_buffer) {
        retry_buffer = out.buffers.size();
        out.buffers.emplace_back();
      }
      auto& buf = out.buffers[*retry_buffer];
      auto& d = deliver_entry(pidx, offset, e, member, ack_deadline, now_ms, out);
      d.buffer = *retry_buffer;
      d.begin = buf.size();
      // The read set these; the answer appends them (encode_fetch_response): not twice.
      msg->clear_topic();
      msg->clear_partition();
      msg->clear_offset();
      msg->clear_attempt();
      msg->AppendToString(&buf);
      d.size = buf.size() - d.begin;
      d.publish_time_ms = msg->publish_time_ms();
      d.deliver_at_ms = msg->deliver_at_ms();
      d.body_bytes = msg->body().size();
    }
  }

  // Then new messages from the cursors, partition by partition.
  for (std::size_t pidx : order) {
    if (out.messages.size() >= max || full) break;
    auto& part = partitions_[pidx];
    auto info = store_.topic(part.topic);
    if (!info || part.id >= info->partitions.size()) continue;
    const auto& pinfo = info->partitions[part.id];
    if (part.next < pinfo.start_offset) {
      // Retention removed messages the group never took: skip them.
      part.next = pinfo.start_offset;
      if (part.pending.empty()) part.floor = part.next;
    }
    const std::uint64_t start_next = part.next;
    const std::uint64_t end = deliverable_end(part, pinfo.next_offset);
    while (out.messages.size() < max && !full && part.next < end &&
           part.pending.size() < settings_.max_unacked_per_partition) {
      storage::read_request rr;
      rr.topic = part.topic;
      rr.partition = part.id;
      rr.from_offset = part.next;
      rr.max_messages = std::min<std::size_t>(
          {std::max<std::size_t>(max - out.messages.size(), 16), settings_.max_unacked_per_partition - part.pending.size(), 1000,
           static_cast<std::size_t>(end - part.next)});
      rr.raw = raw;
      TXMQ_TRY(auto r, store_.read(rr));
      const std::size_t count = raw ? r.raw.size() : r.messages.size();
      if (count == 0) break;
      const std::size_t buffer = out.buffers.size();
      if (raw) out.buffers.push_back(std::move(r.raw_bytes));
      for (std::size_t i = 0; i < count; ++i) {
        auto* m = raw ? nullptr : &r.messages[i];
        const auto* rm = raw ? &r.raw[i] : nullptr;
        const std::uint64_t offset = raw ? rm->offset : m->offset();
        if (offset >= end) break;
        entry e;
        if (raw) {
          if (rm->has_key) e.key = out.buffers[buffer].substr(rm->key_begin, rm->key_size);
        } else if (m->has_key()) {
          e.key = m->key();
        }
        const std::int64_t deliver_at = raw ? rm->deliver_at_ms : m->deliver_at_ms();
        auto& stored = part.pending.emplace(offset, std::move(e)).first->second;
        // The cursor passes a message only once it is pending: if building its entry throws
        // (the io thread then serves on), the next fetch meets it again instead of skipping it.
        part.next = offset + 1;
        enqueue_key(part, offset, stored);
        if (deliver_at > now_ms) {
          stored.st = state::waiting;
          stored.when_ms = deliver_at;
          set_timeline(pidx, offset, stored, stored.when_ms);
          out.update.deliveries.push_back(record_of(part, offset, stored));
        } else if (out.messages.size() < max && !full && eligible(part, offset, stored) &&
                   (raw ? fits_bytes(encoded_delivery_bytes(rm->size, part.topic)) : fits(*m, part.topic))) {
          if (!raw) {
            deliver(pidx, offset, stored, std::move(*m), member, ack_deadline, now_ms, out);
          } else {
            auto& d = deliver_entry(pidx, offset, stored, member, ack_deadline, now_ms, out);
            d.buffer = buffer;
            d.begin = rm->begin;
            d.size = rm->size;
            d.publish_time_ms = rm->publish_time_ms;
            d.deliver_at_ms = rm->deliver_at_ms;
            d.body_bytes = rm->body_bytes;
          }
        } else {
          // Held behind its key, or no room in this answer: the next fetch takes it.
          if (out.messages.size() < max && eligible(part, offset, stored)) full = true;
          stored.st = state::ready;
          if (eligible(part, offset, stored)) part.deliverable.insert(offset);
        }
        if (part.pending.size() >= settings_.max_unacked_per_partition) break;
      }
    }
    if (part.next != start_next) out.update.dispatched.push_back({part.topic, part.id, 0, part.next});
  }
  return out;
}

void group_tracker::finish(std::size_t pidx, std::uint64_t offset) {
  if (!holds_.empty()) holds_.erase({pidx, offset});
  auto& part = partitions_[pidx];
  auto it = part.pending.find(offset);
  if (it == part.pending.end()) return;
  auto& e = it->second;
  set_timeline(pidx, offset, e, std::nullopt);
  if (e.st == state::in_flight) --in_flight_count_;
  part.deliverable.erase(offset);
  if (e.key) {
    auto k = part.keys.find(*e.key);
    if (k != part.keys.end()) {
      auto& q = k->second;
      const bool was_front = !q.empty() && q.front() == offset;
      q.erase(std::remove(q.begin(), q.end(), offset), q.end());
      if (q.empty()) {
        part.keys.erase(k);
      } else if (was_front) {
        auto next = part.pending.find(q.front());
        if (next != part.pending.end() && next->second.st == state::ready) part.deliverable.insert(q.front());
      }
    }
  }
  part.pending.erase(it);
  auto first = part.pending.lower_bound(part.floor);
  part.floor = first == part.pending.end() ? part.next : first->first;
}

void group_tracker::fail_delivery(std::size_t pidx, std::uint64_t offset, std::chrono::milliseconds delay,
                                  std::int64_t now_ms, const char* why, storage::group_update& update) {
  if (!holds_.empty()) holds_.erase({pidx, offset});
  auto& part = partitions_[pidx];
  auto& e = part.pending.at(offset);
  if (e.attempt >= settings_.max_attempts) {
    storage::dead_letter d;
    d.topic = part.topic;
    d.partition = part.id;
    d.offset = offset;
    d.attempts = e.attempt;
    d.dead_at_ms = now_ms;
    d.reason = std::string(why) + " after " + std::to_string(e.attempt) + " attempts (max_attempts " +
               std::to_string(settings_.max_attempts) + ")";
    update.dead.push_back(std::move(d));
    finish(pidx, offset);
    return;
  }
  if (e.st == state::in_flight) --in_flight_count_;
  e.st = state::waiting;
  e.when_ms = now_ms + delay.count();
  set_timeline(pidx, offset, e, e.when_ms);
  update.deliveries.push_back(record_of(part, offset, e));
}

group_tracker::entry* group_tracker::in_flight_entry(const delivery_ref& r, std::int64_t now_ms, std::size_t& pidx) {
  auto p = find_partition(r.topic, r.partition);
  if (!p) return nullptr;
  auto& part = partitions_[*p];
  auto it = part.pending.find(r.offset);
  if (it == part.pending.end() || it->second.st != state::in_flight || it->second.when_ms < now_ms) return nullptr;
  if (r.attempt != 0 && r.attempt != it->second.attempt) return nullptr;
  pidx = *p;
  return &it->second;
}

const std::string* group_tracker::holder(std::size_t pidx, std::uint64_t offset) const {
  if (holds_.empty()) return nullptr;
  auto it = holds_.find({pidx, offset});
  return it == holds_.end() ? nullptr : &it->second;
}

template <class Fn>
group_tracker::refs_result group_tracker::settle(const std::vector<delivery_ref>& refs, std::int64_t now_ms,
                                                 std::string_view tx, bool extend, Fn&& fn) {
  refs_result out;
  out.update.group = name_;
  for (auto& r : refs) {
    std::size_t pidx = 0;
    auto* e = in_flight_entry(r, now_ms, pidx);
    const std::string* held = e ? holder(pidx, r.offset) : nullptr;
    // A held delivery is the holding transaction's to settle; the consumer may only extend it.
    if (!e || (held && *held != tx && !(extend && tx.empty()))) {
      out.results.push_back(errc::unknown_delivery);
      continue;
    }
    fn(pidx, r, *e, out.update);
    out.results.push_back(errc{});
  }
  return out;
}

group_tracker::refs_result group_tracker::ack(const std::vector<delivery_ref>& refs, std::int64_t now_ms,
                                              std::string_view tx) {
  return settle(refs, now_ms, tx, false, [&](std::size_t pidx, const delivery_ref& r, entry&, storage::group_update& update) {
    finish(pidx, r.offset);
    update.acks.push_back({r.topic, r.partition, r.offset});
  });
}

group_tracker::refs_result group_tracker::nack(const std::vector<delivery_ref>& refs, std::chrono::milliseconds delay,
                                               std::int64_t now_ms, std::string_view tx) {
  return settle(refs, now_ms, tx, false, [&](std::size_t pidx, const delivery_ref& r, entry& e, storage::group_update& update) {
    const auto d = delay.count() > 0 ? delay : retry_delay(e.attempt);
    fail_delivery(pidx, r.offset, d, now_ms, "nacked", update);
  });
}

group_tracker::refs_result group_tracker::extend(const std::vector<delivery_ref>& refs, std::chrono::milliseconds by,
                                                 std::int64_t now_ms, std::string_view tx) {
  return settle(refs, now_ms, tx, true, [&](std::size_t pidx, const delivery_ref& r, entry& e, storage::group_update& update) {
    const std::int64_t until = now_ms + by.count();
    if (!tx.empty()) {
      holds_[{pidx, r.offset}] = std::string(tx);
      e.when_ms = until;
    } else {
      // A consumer's extend never shortens a transaction's hold.
      e.when_ms = holder(pidx, r.offset) ? std::max(e.when_ms, until) : until;
    }
    set_timeline(pidx, r.offset, e, e.when_ms);
    update.deliveries.push_back(record_of(partitions_[pidx], r.offset, e));
  });
}

storage::group_update group_tracker::expire(std::int64_t now_ms) {
  storage::group_update update;
  update.group = name_;
  while (!timeline_.empty() && timeline_.begin()->first <= now_ms) {
    const auto [pidx, offset] = timeline_.begin()->second;
    auto& e = partitions_[pidx].pending.at(offset);
    if (e.st == state::in_flight) {
      fail_delivery(pidx, offset, retry_delay(e.attempt), now_ms, "ack deadline passed", update);
    } else {
      make_ready(pidx, offset, e);
    }
  }
  return update;
}

void group_tracker::redriven(const std::vector<storage::message_ref>& refs, std::int64_t now_ms) {
  for (auto& r : refs) {
    const std::size_t pidx = partition_index(r.topic, r.partition);
    auto& part = partitions_[pidx];
    if (part.pending.count(r.offset)) continue;
    auto msg = read_one(part, r.offset);
    if (!msg || !msg.value()) continue;
    entry e;
    if (msg.value()->has_key()) e.key = msg.value()->key();
    e.when_ms = now_ms;
    auto& stored = part.pending.emplace(r.offset, std::move(e)).first->second;
    enqueue_key(part, r.offset, stored);
    make_ready(pidx, r.offset, stored);
  }
}

void group_tracker::drop_partition(const std::string& topic, std::uint32_t p) {
  auto it = index_.find({topic, p});
  if (it == index_.end()) return;
  auto& part = partitions_[it->second];
  for (auto& [o, e] : part.pending) {
    if (e.timeline_pos) timeline_.erase(*e.timeline_pos);
    if (e.st == state::in_flight) --in_flight_count_;
  }
  // The slot stays (indices are held by the timeline) but names no topic: nothing matches it.
  part = partition{};
  std::erase_if(holds_, [&](const auto& h) { return h.first.first == it->second; });
  index_.erase(it);
}

result<void> group_tracker::reload_partition(const storage::group_state& state, const std::string& topic,
                                             std::uint32_t p, std::int64_t now_ms) {
  drop_partition(topic, p);
  storage::group_state one;
  one.info = state.info;
  for (auto& c : state.cursors) {
    if (c.topic == topic && c.partition == p) one.cursors.push_back(c);
  }
  for (auto& d : state.deliveries) {
    if (d.topic == topic && d.partition == p) one.deliveries.push_back(d);
  }
  return load(one, now_ms);
}

bool group_tracker::outstanding(const std::string& topic, std::uint32_t partition, std::uint64_t offset) const {
  auto p = find_partition(topic, partition);
  if (!p) return false;
  auto& part = partitions_[*p];
  auto it = part.pending.find(offset);
  return it != part.pending.end() && it->second.attempt > 0;
}

void group_tracker::acked_elsewhere(const std::vector<storage::message_ref>& refs) {
  for (auto& r : refs) {
    if (auto p = find_partition(r.topic, r.partition)) finish(*p, r.offset);
  }
}

bool group_tracker::has_deliverable(std::int64_t now_ms) const {
  if (!timeline_.empty() && timeline_.begin()->first <= now_ms) return true;
  for (auto& part : partitions_) {
    if (!bounded()) {
      if (!part.deliverable.empty()) return true;
      if (part.pending.size() >= settings_.max_unacked_per_partition) continue;
      auto info = store_.topic(part.topic);
      if (info && part.id < info->partitions.size() && part.next < info->partitions[part.id].next_offset) return true;
      continue;
    }
    const std::uint64_t end = deliverable_end(part);
    if (!part.deliverable.empty() && *part.deliverable.begin() < end) return true;
    if (part.pending.size() < settings_.max_unacked_per_partition && part.next < end) return true;
  }
  return false;
}

std::optional<std::int64_t> group_tracker::next_event_ms() const {
  if (timeline_.empty()) return std::nullopt;
  return timeline_.begin()->first;
}

namespace {

// Protobuf's encoding, as far as a FetchResponse built from stored messages needs it.
using protocol::wire::put_varint;
using protocol::wire::varint_size;
// Field numbers of frame.proto and message.proto; tag = field << 3 | wire type.
constexpr char k_frame_correlation_id = 1 << 3 | 0;
constexpr char k_frame_fetch_response = 13 << 3 | 2;
constexpr char k_fetch_response_deliveries = 1 << 3 | 2;
constexpr char k_delivery_message = 1 << 3 | 2;
constexpr char k_delivery_deadline_ms = 2 << 3 | 0;
constexpr char k_message_topic = 2 << 3 | 2;
constexpr char k_message_partition = 9 << 3 | 0;
constexpr char k_message_offset = 10 << 3 | 0;
constexpr char k_message_attempt = 11 << 3 | 0;

}  // namespace

void encode_fetch_response(std::uint64_t corr, const group_tracker::fetch_result& r, std::string& out) {
  out.clear();
  auto suffix_bytes = [](const delivered& d) {
    return 1 + varint_size(d.topic->size()) + d.topic->size() + 1 + varint_size(d.partition) + 1 +
           varint_size(d.offset) + 1 + varint_size(d.attempt);
  };
  auto message_bytes = [&](const delivered& d) { return d.size + suffix_bytes(d); };
  auto delivery_bytes = [&](const delivered& d) {
    const std::size_t m = message_bytes(d);
    return 1 + varint_size(m) + m + 1 + varint_size(static_cast<std::uint64_t>(d.deadline_ms));
  };
  std::size_t response = 0;
  for (auto& d : r.messages) {
    const std::size_t n = delivery_bytes(d);
    response += 1 + varint_size(n) + n;
  }
  out.reserve(1 + 10 + 1 + varint_size(response) + response);
  if (corr) {
    out.push_back(k_frame_correlation_id);
    put_varint(out, corr);
  }
  out.push_back(k_frame_fetch_response);
  put_varint(out, response);
  for (auto& d : r.messages) {
    out.push_back(k_fetch_response_deliveries);
    put_varint(out, delivery_bytes(d));
    out.push_back(k_delivery_message);
    put_varint(out, message_bytes(d));
    out.append(r.buffers[d.buffer], d.begin, d.size);
    out.push_back(k_message_topic);
    put_varint(out, d.topic->size());
    out.append(*d.topic);
    out.push_back(k_message_partition);
    put_varint(out, d.partition);
    out.push_back(k_message_offset);
    put_varint(out, d.offset);
    out.push_back(k_message_attempt);
    put_varint(out, d.attempt);
    out.push_back(k_delivery_deadline_ms);
    put_varint(out, static_cast<std::uint64_t>(d.deadline_ms));
  }
}


topic_end_offsets read_end_offsets(const storage::store& store, const visible_end_fn* visible) {
  const bool bounded = visible != nullptr && *visible;
  topic_end_offsets out;
  for (auto& t : store.topics()) {
    auto& ends = out[t.config.name];
    ends.reserve(t.partitions.size());
    for (std::uint32_t p = 0; p < t.partitions.size(); ++p) {
      const std::uint64_t log_end = t.partitions[p].next_offset;
      ends.push_back(bounded ? std::min(log_end, (*visible)(t.config.name, p, log_end)) : log_end);
    }
  }
  return out;
}

std::uint64_t group_tracker::lag(const topic_end_offsets& ends) const {
  std::uint64_t lag = 0;
  for (auto& part : partitions_) {
    auto it = ends.find(part.topic);
    if (it == ends.end() || part.id >= it->second.size()) continue;
    const std::uint64_t end = it->second[part.id];
    lag += end - std::min(part.floor, end);
  }
  return lag;
}

std::vector<partition_summary> group_tracker::summary() const {
  std::vector<partition_summary> out;
  for (auto& part : partitions_) {
    if (part.topic.empty()) continue;  // dropped (drop_partition)
    partition_summary s;
    s.topic = part.topic;
    s.partition = part.id;
    s.acked = part.floor;
    s.dispatched = part.next;
    if (bounded()) s.end_offset = deliverable_end(part);
    for (auto& [o, e] : part.pending) {
      if (e.st == state::in_flight) ++s.in_flight;
      if (e.st == state::waiting) ++s.waiting;
    }
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](auto& a, auto& b) { return std::tie(a.topic, a.partition) < std::tie(b.topic, b.partition); });
  return out;
}

}  // namespace txmq::broker
