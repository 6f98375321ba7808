#pragma once

// Key layout of the store (all integers big-endian so byte order is numeric order).
//
// CF default:  "v"                               → format version
//              "t/" name                         → TopicRecord
//              "p/" topic_id:4 partition:4       → partition_meta (start, next, bytes)
//              "g/" group                        → GroupRecord
//              "w/" webhook_id                   → txmq.v1.Webhook
//              "u/" principal                    → PrincipalRecord
//              "a/" principal 0 permission 0 resource → AclRecord
// CF log:      topic_id:4 partition:4 base:8     → batch header + txmq.v1.MessageBatch
// CF dedupe:   message_id:16                     → dedupe_entry
// CF tx:       txid:16                           → TxRecord
// CF index:    't' time:8 txid:16                → (empty)            next check of a PREPARED tx: exactly
//                                                  one per PREPARED tx, none for any other state; a tx
//                                                  with no check scheduled (next_check_ms 0) at time
//                                                  2^64-1, never due (format 2)
//              'a' txid:16                       → (empty)            an ABANDONED tx (format 2)
//              'd' time:8 group_key tid:4 p:4 o:8 → delivery_value    due retry / deadline
// CF groups:   'c' group_key tid:4 p:4           → cursor (floor:8, next:8)
//              'd' group_key tid:4 p:4 o:8       → delivery_value
//              'q' group_key tid:4 p:4 o:8       → DeadLetterRecord
//              'r' tid:4 p:4 seq:8               → txmq.v1.GroupChange (cluster mode: a partition's
//                                                  group change sequence)
//              'S' tid:4 p:4                     → that sequence's next seq:8
//              'a' webhook_key time:8 msg:16 attempt:4 replay:1 → txmq.v1.WebhookAttempt
//              'm' webhook_key msg:16 time:8 attempt:4 replay:1 → the same attempt
// group_key = len:1 name, so one group's keys never interleave with a longer name's.

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "txmq/v1/frame.pb.h"

namespace txmq::storage::detail {

inline void put_u8(std::string& s, std::uint8_t v) { s.push_back(static_cast<char>(v)); }

inline void put_u32(std::string& s, std::uint32_t v) {
  char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
  s.append(b, 4);
}

inline void put_u64(std::string& s, std::uint64_t v) {
  put_u32(s, static_cast<std::uint32_t>(v >> 32));
  put_u32(s, static_cast<std::uint32_t>(v));
}

inline std::uint32_t get_u32(const char* p) {
  auto u = [&](int i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])); };
  return (u(0) << 24) | (u(1) << 16) | (u(2) << 8) | u(3);
}

inline std::uint64_t get_u64(const char* p) {
  return (static_cast<std::uint64_t>(get_u32(p)) << 32) | get_u32(p + 4);
}

// Times before 1970 never occur; clamp so a bad clock cannot wrap the index order.
inline std::uint64_t time_key(std::int64_t ms) { return ms < 0 ? 0 : static_cast<std::uint64_t>(ms); }

inline std::string topic_key(std::string_view name) { return "t/" + std::string(name); }
inline std::string group_record_key(std::string_view name) { return "g/" + std::string(name); }
inline std::string principal_key(std::string_view name) { return "u/" + std::string(name); }
// A principal's entries sort together (names hold no NUL: the store refuses them).
inline std::string acl_prefix(std::string_view principal) { return "a/" + std::string(principal) + '\0'; }
inline std::string acl_key(std::string_view principal, std::string_view permission, std::string_view resource) {
  return acl_prefix(principal) + std::string(permission) + '\0' + std::string(resource);
}

inline std::string partition_meta_key(std::uint32_t tid, std::uint32_t p) {
  std::string k = "p/";
  put_u32(k, tid);
  put_u32(k, p);
  return k;
}

inline std::string log_prefix(std::uint32_t tid, std::uint32_t p) {
  std::string k;
  put_u32(k, tid);
  put_u32(k, p);
  return k;
}

inline std::string log_key(std::uint32_t tid, std::uint32_t p, std::uint64_t base) {
  std::string k = log_prefix(tid, p);
  put_u64(k, base);
  return k;
}

inline void put_group(std::string& k, std::string_view group) {
  put_u8(k, static_cast<std::uint8_t>(group.size()));
  k.append(group);
}

inline std::string group_prefix(char kind, std::string_view group) {
  std::string k(1, kind);
  put_group(k, group);
  return k;
}

inline std::string cursor_key(std::string_view group, std::uint32_t tid, std::uint32_t p) {
  std::string k = group_prefix('c', group);
  put_u32(k, tid);
  put_u32(k, p);
  return k;
}

inline std::string message_key(char kind, std::string_view group, std::uint32_t tid, std::uint32_t p,
                               std::uint64_t offset) {
  std::string k = group_prefix(kind, group);
  put_u32(k, tid);
  put_u32(k, p);
  put_u64(k, offset);
  return k;
}

inline std::string group_change_key(std::uint32_t tid, std::uint32_t p, std::uint64_t seq) {
  std::string k(1, 'r');
  put_u32(k, tid);
  put_u32(k, p);
  put_u64(k, seq);
  return k;
}

inline std::string group_seq_key(std::uint32_t tid, std::uint32_t p) {
  std::string k(1, 'S');
  put_u32(k, tid);
  put_u32(k, p);
  return k;
}

// The due entry of a PREPARED transaction that has no check scheduled (next_check_ms 0): after
// every time a scan for due checks can ask for, so the due index still lists every PREPARED
// transaction exactly once (counts and listings read it instead of every record).
inline constexpr std::uint64_t k_never_due = UINT64_MAX;

inline std::string tx_due_entry(std::int64_t next_check_ms, std::string_view txid_raw) {
  std::string k(1, 't');
  put_u64(k, next_check_ms == 0 ? k_never_due : time_key(next_check_ms));
  k.append(txid_raw);
  return k;
}

inline std::string tx_abandoned_key(std::string_view txid_raw) { return 'a' + std::string(txid_raw); }

inline std::string delivery_due_key(std::int64_t ms, std::string_view group, std::uint32_t tid, std::uint32_t p,
                                    std::uint64_t offset) {
  std::string k(1, 'd');
  put_u64(k, time_key(ms));
  put_group(k, group);
  put_u32(k, tid);
  put_u32(k, p);
  put_u64(k, offset);
  return k;
}

inline std::string webhook_key(std::string_view id) { return "w/" + std::string(id); }

// Keys of one logged webhook attempt (webhook_key = len:1 id, as group_key).
inline std::string webhook_attempt_key(const v1::WebhookAttempt& a) {
  std::string k = group_prefix('a', a.webhook_id());
  put_u64(k, time_key(a.time_ms()));
  k.append(a.message_id());
  put_u32(k, a.attempt());
  put_u8(k, a.replay() ? 1 : 0);
  return k;
}

inline std::string webhook_message_attempt_key(const v1::WebhookAttempt& a) {
  std::string k = group_prefix('m', a.webhook_id());
  k.append(a.message_id());
  put_u64(k, time_key(a.time_ms()));
  put_u32(k, a.attempt());
  put_u8(k, a.replay() ? 1 : 0);
  return k;
}

// The smallest key greater than every key starting with prefix (for iterate_upper_bound).
inline std::string prefix_end(std::string prefix) {
  while (!prefix.empty()) {
    auto& c = prefix.back();
    if (static_cast<unsigned char>(c) != 0xff) {
      c = static_cast<char>(static_cast<unsigned char>(c) + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return prefix;  // empty: no upper bound
}

// Fixed-size values.
struct partition_meta {
  std::uint64_t start_offset = 0;
  std::uint64_t next_offset = 0;
  std::uint64_t bytes = 0;
};

inline std::string encode(const partition_meta& m) {
  std::string s;
  put_u64(s, m.start_offset);
  put_u64(s, m.next_offset);
  put_u64(s, m.bytes);
  return s;
}

inline bool decode(std::string_view v, partition_meta& m) {
  if (v.size() != 24) return false;
  m.start_offset = get_u64(v.data());
  m.next_offset = get_u64(v.data() + 8);
  m.bytes = get_u64(v.data() + 16);
  return true;
}

struct dedupe_entry {
  std::uint32_t topic_id = 0;
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
  std::int64_t stored_ms = 0;
};

inline std::string encode(const dedupe_entry& e) {
  std::string s;
  put_u32(s, e.topic_id);
  put_u32(s, e.partition);
  put_u64(s, e.offset);
  put_u64(s, static_cast<std::uint64_t>(e.stored_ms));
  return s;
}

inline bool decode(std::string_view v, dedupe_entry& e) {
  if (v.size() != 24) return false;
  e.topic_id = get_u32(v.data());
  e.partition = get_u32(v.data() + 4);
  e.offset = get_u64(v.data() + 8);
  e.stored_ms = static_cast<std::int64_t>(get_u64(v.data() + 16));
  return true;
}

struct cursor_value {
  std::uint64_t ack_floor = 0;
  std::uint64_t next_offset = 0;
};

inline std::string encode(const cursor_value& c) {
  std::string s;
  put_u64(s, c.ack_floor);
  put_u64(s, c.next_offset);
  return s;
}

inline bool decode(std::string_view v, cursor_value& c) {
  if (v.size() != 16) return false;
  c.ack_floor = get_u64(v.data());
  c.next_offset = get_u64(v.data() + 8);
  return true;
}

// attempt:4 visible_at_ms:8 status:1 [holder:16]. The holder (the txid of the transaction
// holding an in-flight delivery, cluster read-process-write) is a later addition: records
// without it are 13 bytes, as every record written before it, and read as holding none.
struct delivery_value {
  std::uint32_t attempt = 0;
  std::int64_t visible_at_ms = 0;
  std::uint8_t status = 0;
  std::string holder;
};
inline constexpr std::size_t k_txid_bytes = 16;

inline std::string encode(const delivery_value& d) {
  std::string s;
  put_u32(s, d.attempt);
  put_u64(s, static_cast<std::uint64_t>(d.visible_at_ms));
  put_u8(s, d.status);
  if (d.holder.size() == k_txid_bytes) s += d.holder;
  return s;
}

inline bool decode(std::string_view v, delivery_value& d) {
  if (v.size() != 13 && v.size() != 13 + k_txid_bytes) return false;
  d.attempt = get_u32(v.data());
  d.visible_at_ms = static_cast<std::int64_t>(get_u64(v.data() + 4));
  d.status = static_cast<std::uint8_t>(v[12]);
  d.holder.assign(v.size() > 13 ? v.substr(13) : std::string_view{});
  return d.status >= 1 && d.status <= 4;
}

// A log value: a 13-byte header, so retention can judge a batch without parsing it, then the
// serialized txmq.v1.MessageBatch.
struct batch_header {
  std::uint8_t version = 1;
  std::uint32_t count = 0;
  std::int64_t max_publish_ms = 0;
};
inline constexpr std::size_t batch_header_bytes = 13;

inline void encode(const batch_header& h, std::string& out) {
  put_u8(out, h.version);
  put_u32(out, h.count);
  put_u64(out, static_cast<std::uint64_t>(h.max_publish_ms));
}

inline bool decode(std::string_view v, batch_header& h) {
  if (v.size() < batch_header_bytes || v[0] != 1) return false;
  h.version = 1;
  h.count = get_u32(v.data() + 1);
  h.max_publish_ms = static_cast<std::int64_t>(get_u64(v.data() + 5));
  return h.count > 0;
}

}  // namespace txmq::storage::detail
