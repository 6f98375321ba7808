// The group committer: the writer thread applying queued requests to one WriteBatch, the syncer
// making written groups durable with one fsync, and the writer's reads through the batch.

#include "rocksdb_store.h"

namespace txmq::storage::detail {

void rocksdb_store::writer_loop() {
  std::vector<pending_op> ops;
  for (;;) {
    {
      std::unique_lock lk(queue_mu_);
      queue_cv_.wait(lk, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) break;  // stopping and drained
      std::size_t bytes = 0;
      while (!queue_.empty() && (ops.empty() || bytes + queue_.front().bytes <= options_.max_group_bytes)) {
        bytes += queue_.front().bytes;
        ops.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    run_group(ops);
    ops.clear();
  }
  std::lock_guard lk(sync_mu_);
  sync_stopping_ = true;
  sync_cv_.notify_one();
}

void rocksdb_store::run_group(std::vector<pending_op>& ops) {
  group_ctx ctx(handles_);
  ctx.now_ms = now();
  written_group g;
  g.finishers.reserve(ops.size());
  g.operations = ops.size();
  for (auto& op : ops) {
    ctx.sync = ctx.sync || op.sync;
    g.finishers.push_back(op.apply(ctx));
  }
  g.sync = ctx.sync;
  if (failed_) {
    g.failure = refusal();
  } else if (ctx.poisoned) {
    // Offsets may have been handed out in memory for writes that will never happen: the store
    // takes no more writes, and a reopen rebuilds from what is durable.
    g.failure = latch_failure(*ctx.poisoned);
  } else {
    finalize(ctx);
    if (ctx.batch.Count() > 0) {
      // Not synced here: the syncer makes this and every group written meanwhile durable with
      // one fsync before anyone hears of them.
      auto s = db_->Write(rocksdb::WriteOptions(), &ctx.batch);
      if (!s.ok()) {
        g.failure = latch_failure(error(to_error(s), "writing a commit group to RocksDB failed: " + s.ToString()));
      }
      g.wrote = true;
    }
    for (auto* p : ctx.touched) g.publish.emplace_back(p, p->meta);
    g.new_topics = std::move(ctx.new_topics);
    g.messages = ctx.messages;
    g.bytes = ctx.bytes;
  }
  {
    std::lock_guard lk(sync_mu_);
    // Under load, hand the group to the syncer and go on applying the next one (the fsync
    // overlaps). When nothing else is waiting and the syncer is idle, a hand-off would only add
    // a thread wake-up to this request's latency: sync here instead.
    bool inline_sync = sync_queue_.empty() && !syncer_busy_;
    if (inline_sync) {
      std::lock_guard lq(queue_mu_);
      inline_sync = queue_.empty();
    }
    if (!inline_sync) {
      sync_queue_.push_back(std::move(g));
      sync_cv_.notify_one();
      return;
    }
    syncer_busy_ = true;  // the sync stage is this thread's until it is done
  }
  std::deque<written_group> one;
  one.push_back(std::move(g));
  make_durable(one);
  std::lock_guard lk(sync_mu_);
  syncer_busy_ = false;
}

void rocksdb_store::syncer_loop() {
  std::deque<written_group> groups;
  for (;;) {
    {
      std::unique_lock lk(sync_mu_);
      syncer_busy_ = false;
      sync_cv_.wait(lk, [&] { return !sync_queue_.empty() || sync_stopping_; });
      if (sync_queue_.empty()) return;
      groups.swap(sync_queue_);
      syncer_busy_ = true;
    }
    make_durable(groups);
    groups.clear();
  }
}

void rocksdb_store::make_durable(std::deque<written_group>& groups) {
  bool need_sync = false;
  for (auto& g : groups) {
    unsynced_ = unsynced_ || g.wrote;
    need_sync = need_sync || g.sync;
  }
  std::optional<error> sync_error;
  // A synced answer may rest on an earlier async write (a duplicate of it, say): sync then too.
  if (need_sync && unsynced_ && !failed_) {
    // The in-memory file system has nothing to make durable (and its WAL cannot SyncWAL).
    auto s = options_.in_memory ? rocksdb::Status::OK() : db_->SyncWAL();
    if (s.ok()) {
      unsynced_ = false;
      std::lock_guard lk(stats_mu_);
      stats_.fsyncs += 1;
    } else {
      sync_error = latch_failure(error(to_error(s), "fsync of the write-ahead log failed: " + s.ToString()));
    }
  } else if (need_sync && failed_) {
    sync_error = refusal();
  }
  for (auto& g : groups) {
    const std::optional<error> err = g.failure ? g.failure : g.sync ? sync_error : std::nullopt;
    if (!err) {
      // Publish: new topics, then high watermarks, so a reader that sees a new offset finds it.
      if (!g.new_topics.empty()) {
        std::unique_lock lk(topics_mu_);
        for (auto& t : g.new_topics) {
          topics_by_id_[t->record.id()] = t;
          topics_[t->record.name()] = t;
        }
      }
      for (auto& [p, meta] : g.publish) {
        p->start_offset.store(meta.start_offset, std::memory_order_release);
        p->bytes.store(meta.bytes, std::memory_order_release);
        p->committed_next.store(meta.next_offset, std::memory_order_release);
      }
      std::lock_guard lk(stats_mu_);
      stats_.commit_groups += g.wrote ? 1 : 0;
      stats_.operations += g.operations;
      stats_.messages_appended += g.messages;
      stats_.bytes_appended += g.bytes;
      stats_.largest_group = std::max<std::uint64_t>(stats_.largest_group, g.operations);
    }
    for (auto& f : g.finishers) f(err ? &*err : nullptr);
  }
}

error rocksdb_store::latch_failure(error first) {
  {
    std::lock_guard lk(failure_mu_);
    // The writer and the syncer can both fail; the first failure is the cause, later ones its echo.
    if (failure_.empty()) failure_ = first.message.empty() ? first.code.message() : first.message;
  }
  failed_ = true;
  first.message += "; the store takes no more writes: restart after fixing the cause";
  return first;
}

error rocksdb_store::refusal() const {
  std::lock_guard lk(failure_mu_);
  return error(errc::store_failed,
               "the store stopped taking writes after: " + failure_ + "; restart after fixing the cause");
}

void rocksdb_store::close() {
  {
    std::lock_guard lk(queue_mu_);
    stopping_ = true;
    queue_cv_.notify_all();
  }
  if (writer_.joinable()) writer_.join();
  if (syncer_.joinable()) syncer_.join();
}

std::optional<std::string> rocksdb_store::wget(group_ctx& ctx, cf_index cf, const std::string& key) {
  if (auto it = ctx.overlay[cf].find(key); it != ctx.overlay[cf].end()) return it->second;
  std::string value;
  auto s = db_->Get(rocksdb::ReadOptions(), handles_[cf], key, &value);
  if (s.IsNotFound()) return std::nullopt;
  if (!s.ok()) {
    ctx.poisoned = error(to_error(s), "a read inside the commit group failed: " + s.ToString());
    return std::nullopt;
  }
  return value;
}

void rocksdb_store::finalize(group_ctx& ctx) {
  for (auto& [k, log] : ctx.logs) {
    log.finish();
    ctx.batch.Put(handles_[cf_log], log_key(log.topic_id, log.partition, log.base), log.value);
    log.state->meta.bytes += log.value.size();
    log.state->meta.next_offset = log.state->next;
  }
  for (auto& [k, log] : ctx.logs) {
    ctx.put(cf_default, partition_meta_key(log.topic_id, log.partition), encode(log.state->meta));
  }
}

}  // namespace txmq::storage::detail
