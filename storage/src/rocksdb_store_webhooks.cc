// Webhook subscriptions and their attempt log.

#include "rocksdb_store.h"

namespace txmq::storage::detail {

void rocksdb_store::put_webhook(v1::Webhook record, completion<void> done) {
  submit<void>(true, record.ByteSizeLong(), std::move(done), [rec = std::move(record)](group_ctx& ctx) -> result<void> {
    if (rec.id().empty() || rec.id().size() > k_max_group_name) return errc::invalid_argument;
    ctx.put(cf_default, webhook_key(rec.id()), rec.SerializeAsString());
    return outcome::success();
  });
}

void rocksdb_store::delete_webhook(std::string id, completion<bool> done) {
  submit<bool>(true, 64, std::move(done), [this, id = std::move(id)](group_ctx& ctx) -> result<bool> {
    const std::string key = webhook_key(id);
    const bool existed = wget(ctx, cf_default, key).has_value();
    if (ctx.poisoned) return *ctx.poisoned;
    if (existed) ctx.del(cf_default, key);
    return existed;
  });
}

result<std::vector<v1::Webhook>> rocksdb_store::webhooks() const {
  std::vector<v1::Webhook> out;
  TXMQ_TRY(scan(cf_default, "w/", prefix_end("w/"), [&](std::string_view, std::string_view v) -> result<bool> {
    v1::Webhook rec;
    if (!rec.ParseFromArray(v.data(), static_cast<int>(v.size()))) return errc::corruption;
    out.push_back(std::move(rec));
    return true;
  }));
  return out;
}

void rocksdb_store::record_webhook_attempts(std::vector<v1::WebhookAttempt> attempts, completion<void> done) {
  std::size_t bytes = 0;
  for (auto& a : attempts) bytes += a.ByteSizeLong() * 2;
  submit<void>(false, bytes, std::move(done), [attempts = std::move(attempts)](group_ctx& ctx) -> result<void> {
    for (auto& a : attempts) {
      if (a.webhook_id().empty() || a.webhook_id().size() > k_max_group_name) return errc::invalid_argument;
      const std::string value = a.SerializeAsString();
      // Two keys: by time (the log and its expiry) and by message (one message's attempts).
      ctx.batch.Put(ctx.handles[cf_groups], webhook_attempt_key(a), value);
      ctx.batch.Put(ctx.handles[cf_groups], webhook_message_attempt_key(a), value);
    }
    return outcome::success();
  });
}

result<std::vector<v1::WebhookAttempt>> rocksdb_store::webhook_attempts(const webhook_attempts_query& q) const {
  std::vector<v1::WebhookAttempt> out;
  std::string from = group_prefix(q.message ? 'm' : 'a', q.webhook_id);
  if (q.message) from.append(q.message->raw());
  const std::string upper = prefix_end(from);
  if (!q.after.empty()) {
    // time + message id + attempt + replay; by message: time + attempt + replay.
    const std::size_t cursor_size = q.message ? 8 + 4 + 1 : 8 + 16 + 4 + 1;
    if (q.after.size() != cursor_size) {
      return error(errc::invalid_argument, "not a cursor of this attempt log (use next_after of the previous page)");
    }
    // Keys under the prefix have the cursor's length: the first one after it is at least this.
    from.append(q.after);
    from.push_back('\0');
  }
  if (!q.newest_first) {
    TXMQ_TRY(scan(cf_groups, from, upper, [&](std::string_view, std::string_view v) -> result<bool> {
      v1::WebhookAttempt a;
      if (!a.ParseFromArray(v.data(), static_cast<int>(v.size()))) return errc::corruption;
      out.push_back(std::move(a));
      return out.size() < q.limit;
    }));
    return out;
  }
  // Backwards from the end of the prefix, or from just before the cursor's key (`from` is then
  // that key plus a '\0': keys under the prefix have the cursor's length, so every key below
  // `from` but the cursor's own is older).
  const std::string prefix = group_prefix(q.message ? 'm' : 'a', q.webhook_id) + (q.message ? std::string(q.message->raw()) : "");
  const std::string cursor_key = q.after.empty() ? std::string() : prefix + q.after;
  // No iterate_lower_bound: the prefix is checked on each key instead (a lower bound with
  // SeekForPrev lost keys in some runs of admin_reads_test).
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), handles_[cf_groups]));
  const std::string& start = q.after.empty() ? upper : cursor_key;
  // The first key at or after `start`, then one back: the newest key below it.
  it->Seek(start);
  if (it->Valid()) {
    it->Prev();
  } else if (it->status().ok()) {
    it->SeekToLast();
  }
  for (; it->Valid() && it->key().starts_with(prefix) && out.size() < q.limit; it->Prev()) {
    v1::WebhookAttempt a;
    if (!a.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) return errc::corruption;
    out.push_back(std::move(a));
  }
  if (!it->status().ok()) return status_error(it->status(), "reading the webhook attempt log");
  return out;
}

void rocksdb_store::expire_webhook_attempts(std::int64_t before_ms, std::size_t limit, completion<std::uint64_t> done) {
  submit<std::uint64_t>(false, 64, std::move(done), [this, before_ms, limit](group_ctx& ctx) -> result<std::uint64_t> {
    // Keys run per subscription, then by time: delete each one's prefix older than before_ms,
    // then seek to the next subscription.
    std::uint64_t removed = 0;
    const std::string upper = prefix_end("a");
    rocksdb::ReadOptions ro;
    rocksdb::Slice upper_slice(upper);
    ro.iterate_upper_bound = &upper_slice;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, handles_[cf_groups]));
    it->Seek("a");
    while (it->Valid() && removed < limit) {
      v1::WebhookAttempt a;
      if (!a.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) return errc::corruption;
      if (a.time_ms() >= before_ms) {
        it->Seek(prefix_end(group_prefix('a', a.webhook_id())));
        continue;
      }
      ctx.batch.Delete(handles_[cf_groups], it->key());
      ctx.batch.Delete(handles_[cf_groups], webhook_message_attempt_key(a));
      ++removed;
      it->Next();
    }
    if (!it->status().ok()) return status_error(it->status(), "expiring webhook attempts");
    return removed;
  });
}

}  // namespace txmq::storage::detail

namespace txmq::storage {

std::string webhook_attempt_cursor(const v1::WebhookAttempt& a, bool by_message) {
  if (by_message) {
    return detail::webhook_message_attempt_key(a).substr(detail::group_prefix('m', a.webhook_id()).size() +
                                                         a.message_id().size());
  }
  return detail::webhook_attempt_key(a).substr(detail::group_prefix('a', a.webhook_id()).size());
}

}  // namespace txmq::storage
