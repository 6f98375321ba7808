// The group committer: the writer thread applying queued requests to one WriteBatch, the syncer
// making written groups durable with one fsync, and the writer's reads through the batch.

#include "rocksdb_store.h"

namespace txmq::storage::detail {

void rocksdb_store::writer_loop() {
  std::vector<pending_op> ops;
  for (;;) {
    {
      std::unique_lock lk(queue_mu_);
      // Woken at least every disk_check_interval: the free space is measured, and a store
      // latched by a full disk resumes, also while no request comes. And when the oldest young
      // Prepare's due entry is to be written, which then needs no request either (not while
      // the store is latched: nothing is written then, and the wait would not be a wait).
      auto wait = std::chrono::duration_cast<std::chrono::steady_clock::duration>(options_.disk_check_interval);
      const auto young_due = failed_ ? std::nullopt : young_due_in();
      if (young_due && *young_due < wait) wait = *young_due + std::chrono::milliseconds(1);
      queue_cv_.wait_for(lk, wait, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty() && stopping_) break;  // stopping and drained
      std::size_t bytes = 0;
      while (!queue_.empty() && (ops.empty() || bytes + queue_.front()->bytes <= options_.max_group_bytes)) {
        bytes += queue_.front()->bytes;
        ops.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    check_disk();
    if (ops.empty()) {
      const auto young_due = young_due_in();
      if (!young_due || young_due->count() > 0 || failed_) continue;
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
  if (options_.observe_queue) {
    const auto taken = std::chrono::steady_clock::now();
    for (auto& op : ops) options_.observe_queue(taken - op->submitted);
  }
  written_group g;
  g.finishers.reserve(ops.size());
  g.operations = ops.size();
  for (auto& op : ops) {
    ctx.sync = ctx.sync || op->sync;
    op->apply(ctx);
    g.finishers.push_back(std::move(op));
  }
  g.sync = ctx.sync;
  if (failed_) {
    g.failure = refusal();
  } else if (ctx.poisoned) {
    // Offsets may have been handed out in memory for writes that will never happen: the store
    // takes no more writes, and a reopen rebuilds from what is durable.
    g.failure = latch_failure(*ctx.poisoned);
  } else {
    index_young(ctx);
    g.young_done = std::move(ctx.young_done);
    g.young_due_min = ctx.young_due_min;
    finalize(ctx);
    if (ctx.batch.Count() > 0) {
      if (ctx.wrote_tx) {
        begin_tx_write();
        g.tx_pending = true;
      }
      // Not synced here: the syncer makes this and every group written meanwhile durable with
      // one fsync before anyone hears of them.
      auto s = db_->Write(rocksdb::WriteOptions(), &ctx.batch);
      if (!s.ok()) {
        g.failure = latch_failure(error(to_error(s), "writing a commit group to RocksDB failed: " + s.ToString()),
                                  s.IsNoSpace());
      } else if (ctx.wrote_tx) {
        // Before the next group is written: this snapshot holds this group and those before,
        // the readers' view once this group is durable if a later one with transaction
        // records is not yet.
        g.tx_snapshot = take_snapshot();
      }
      g.wrote = true;
      bytes_since_disk_check_ += ctx.batch.GetDataSize();
      if (s.ok()) {
        // Readable before the fsync by a replication leader (read_request::unsynced), which
        // sends it to its followers so that their fsyncs overlap its own; it still
        // acknowledges only what it and its in-sync followers fsynced.
        for (auto* p : ctx.touched) p->written_next.store(p->meta.next_offset, std::memory_order_release);
        for (auto& op : g.finishers) {
          if (op->on_written) op->on_written();
        }
      }
    }
    for (auto* p : ctx.touched) g.publish.emplace_back(p, p->meta);
    for (auto* p : ctx.group_touched) g.group_publish.emplace_back(p, p->group_next.value_or(0));
    g.new_topics = std::move(ctx.new_topics);
    g.messages = ctx.messages;
    g.bytes = ctx.bytes;
  }
  {
    std::lock_guard lk(sync_mu_);
    // Under load, hand the group to the syncer and go on applying the next one (the fsync
    // overlaps). When nothing else is waiting and the syncer is idle, a hand-off would only add
    // a thread wake-up to this request's latency: sync here instead.
    // With a least interval between fsyncs, every group to sync goes through the syncer, which
    // keeps it.
    const bool paced = g.sync && options_.min_fsync_interval.count() > 0;
    bool inline_sync = !paced && sync_queue_.empty() && !syncer_busy_;
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
      // Paced only when set, and only for a queue holding a group that needs an fsync.
      const auto needs_fsync = [](const written_group& g) { return g.sync; };
      if (options_.min_fsync_interval.count() > 0 &&
          std::any_of(sync_queue_.begin(), sync_queue_.end(), needs_fsync)) {
        // Too soon after the last fsync: wait out the interval (busy, so nothing else takes the
        // sync stage), then take every group written meanwhile into this one.
        syncer_busy_ = true;
        sync_cv_.wait_until(lk, last_fsync_start_ + options_.min_fsync_interval, [&] { return sync_stopping_; });
        last_fsync_start_ = std::chrono::steady_clock::now();
      }
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
    const auto sync_start = std::chrono::steady_clock::now();
    auto s = options_.in_memory ? rocksdb::Status::OK() : db_->SyncWAL();
    if (options_.observe_fsync) options_.observe_fsync(std::chrono::steady_clock::now() - sync_start);
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
  if (options_.observe_commit) {
    const auto durable = std::chrono::steady_clock::now();
    for (auto& g : groups) {
      for (auto& f : g.finishers) options_.observe_commit(durable - f->submitted);
    }
  }
  const auto complete = [&] {
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
        if (g.tx_pending) end_tx_write(g, true);
        if (!g.young_done.empty()) {
          std::lock_guard lk(young_mu_);
          for (auto& id : g.young_done) young_ids_.erase(id);
        }
        // After end_tx_write: a due_checks that takes the floor reads a view holding the entries.
        lower_young_due_floor(g.young_due_min);
        for (auto& [p, meta] : g.publish) {
          p->start_offset.store(meta.start_offset, std::memory_order_release);
          p->bytes.store(meta.bytes, std::memory_order_release);
          p->committed_next.store(meta.next_offset, std::memory_order_release);
        }
        for (auto& [p, seq] : g.group_publish) p->committed_group_next.store(seq, std::memory_order_release);
        std::lock_guard lk(stats_mu_);
        stats_.commit_groups += g.wrote ? 1 : 0;
        stats_.operations += g.operations;
        stats_.messages_appended += g.messages;
        stats_.bytes_appended += g.bytes;
        stats_.largest_group = std::max<std::uint64_t>(stats_.largest_group, g.operations);
      }
      if (err && g.tx_pending) end_tx_write(g, false);
      for (auto& f : g.finishers) f->finish(err ? &*err : nullptr);
    }
  };
  if (options_.around_completions) {
    options_.around_completions(complete);
  } else {
    complete();
  }
}

namespace {
constexpr std::string_view k_resumes = "it takes writes again by itself once the disk has free space";
constexpr std::string_view k_restart = "restart after fixing the cause";
}  // namespace

error rocksdb_store::latch_failure(error first, bool no_space) {
  bool resumes = false;
  {
    std::lock_guard lk(failure_mu_);
    // The writer and the syncer can both fail; the first failure is the cause, later ones its echo.
    if (failure_.empty()) {
      failure_ = first.message.empty() ? first.code.message() : first.message;
      failure_no_space_ = no_space;
    } else if (!no_space) {
      // An echo that is not a full disk (the syncer's fsync failing while the writer found the
      // disk full) may have lost data: never resume blindly over it.
      failure_no_space_ = false;
    }
    resumes = failure_no_space_;
  }
  failed_ = true;
  first.message += "; the store takes no more writes: ";
  first.message += resumes ? k_resumes : k_restart;
  return first;
}

error rocksdb_store::refusal() const {
  std::lock_guard lk(failure_mu_);
  return error(errc::store_failed, "the store stopped taking writes after: " + failure_ + "; " +
                                       std::string(failure_no_space_ ? k_resumes : k_restart));
}

error rocksdb_store::full_refusal() const {
  return error(errc::store_full, "the disk of " + options_.dir.string() + " has " +
                                     std::to_string(free_bytes_.load()) + " bytes free, below the minimum of " +
                                     std::to_string(options_.min_free_bytes) +
                                     ": new messages are refused until space is freed (consume and ack, let "
                                     "retention run, or grow the disk); acks and commits still run");
}

store_health rocksdb_store::health() const {
  if (failed_) {
    store_health h{store_health::state::failed, refusal().message, false};
    std::lock_guard lk(failure_mu_);
    h.resumes = failure_no_space_;
    if (!last_resume_error_.empty()) h.reason += " (the last attempt to resume: " + last_resume_error_ + ")";
    return h;
  }
  if (full_) {
    auto e = full_refusal();
    return {store_health::state::full, std::move(e.message), false};
  }
  return {};
}

void rocksdb_store::check_disk() {
  const auto now = std::chrono::steady_clock::now();
  // Also after an eighth of the minimum was written since the last look, so a fast producer
  // cannot write through the margin between two timed checks.
  const std::uint64_t byte_budget = std::max<std::uint64_t>(options_.min_free_bytes / 8, 1u << 20);
  if (now < next_disk_check_ && (options_.min_free_bytes == 0 || bytes_since_disk_check_ < byte_budget)) return;
  next_disk_check_ = now + options_.disk_check_interval;
  bytes_since_disk_check_ = 0;
  std::optional<std::uint64_t> free;
  if (options_.free_bytes) {
    free = options_.free_bytes();
  } else if (!options_.in_memory) {
    std::error_code ec;
    auto space = fs::space(path_, ec);
    if (!ec) free = space.available;
  }
  if (free) {
    free_bytes_ = *free;
    full_ = options_.min_free_bytes > 0 && *free < options_.min_free_bytes;
  }
  if (failed_) resume_if_space(free);
}

// Resuming is allowed only when every failure since the latch was RocksDB's NoSpace on a write.
// Such a write never reached the memtable; RocksDB stops its own writes with a background error
// it can recover from, and DB::Resume() flushes every memtable and starts a new WAL, so a
// half-written WAL record is left behind in a log that recovery no longer reads. Any other
// failure (an I/O error, a failed fsync of the WAL) may mean acknowledged-looking data is not
// on disk as RocksDB believes (Linux may drop the dirty pages of a failed fsync), so those keep
// the latch until an operator restarts the broker: the restart rebuilds from what is durable.
// No SstFileManager: its own recovery thread would call Resume() behind the writer's back,
// while the writer must repair its in-memory state in the same step; the free space is
// measured here instead (statvfs of the data directory, once per disk_check_interval).
void rocksdb_store::resume_if_space(std::optional<std::uint64_t> free) {
  {
    std::lock_guard lk(failure_mu_);
    if (!failure_no_space_) return;
  }
  // Room again: at least the minimum when there is one, any room at all otherwise. Unknown
  // free space: try, RocksDB's flush inside Resume() tells.
  if (free && (*free == 0 || *free < options_.min_free_bytes)) return;
  // The sync stage must be idle (no group between write and completion); the writer is this
  // thread, so none arrives meanwhile. Busy: the next check tries again.
  {
    std::lock_guard lk(sync_mu_);
    if (!sync_queue_.empty() || syncer_busy_) return;
    syncer_busy_ = true;
  }
  auto s = db_->Resume();
  result<void> reloaded = outcome::success();
  if (s.ok()) reloaded = reload_partition_state();
  {
    std::lock_guard lk(failure_mu_);
    if (!s.ok()) {
      last_resume_error_ = "RocksDB could not resume: " + s.ToString();
    } else if (!reloaded) {
      last_resume_error_ = reloaded.error().message;
      failure_no_space_ = false;  // the state in memory cannot be trusted: restart
    } else {
      failure_.clear();
      failure_no_space_ = false;
      last_resume_error_.clear();
      unsynced_ = true;  // the next synced request fsyncs whatever the flush left in the new WAL
      failed_ = false;
    }
  }
  std::lock_guard lk(sync_mu_);
  syncer_busy_ = false;
}

result<void> rocksdb_store::reload_partition_state() {
  // A failed group handed out offsets and may have created topics in memory only; groups
  // written before it but refused at the fsync stage are in the database (and flushed by
  // Resume()) although nobody was told: a producer retrying them gets the original positions
  // from the dedupe index.
  // So may its Prepares be cached without having been written.
  prepared_.clear();
  prepared_bytes_ = 0;
  // And its young Prepares noted without having been written, or indexed in a group that was
  // not: the stored bounds cover every one whose record is in the database.
  TXMQ_TRY(index_young_after_open());
  std::vector<std::string> gone;
  for (auto& [name, t] : writer_topics_) {
    std::string v;
    auto s = db_->Get(rocksdb::ReadOptions(), handles_[cf_default], topic_key(name), &v);
    if (s.IsNotFound()) {
      gone.push_back(name);
      continue;
    }
    if (!s.ok()) return status_error(s, "reading topic '" + name + "' after resuming");
    for (std::uint32_t p = 0; p < t->partitions.size(); ++p) {
      auto& ps = *t->partitions[p];
      std::string mv;
      partition_meta meta;
      s = db_->Get(rocksdb::ReadOptions(), handles_[cf_default], partition_meta_key(t->record.id(), p), &mv);
      if (!s.ok() || !decode(mv, meta)) {
        return error(s.ok() ? make_error_code(errc::corruption) : to_error(s),
                     "reading the state of topic '" + name + "' partition " + std::to_string(p) +
                         " after resuming: " + s.ToString());
      }
      ps.meta = meta;
      ps.next = meta.next_offset;
      ps.group_next.reset();  // re-read from the database on next use
      ps.start_offset.store(meta.start_offset, std::memory_order_release);
      ps.bytes.store(meta.bytes, std::memory_order_release);
      ps.committed_next.store(meta.next_offset, std::memory_order_release);
      ps.written_next.store(meta.next_offset, std::memory_order_release);
    }
    std::unique_lock lk(topics_mu_);
    topics_by_id_[t->record.id()] = t;
    topics_[name] = t;
  }
  for (auto& name : gone) writer_topics_.erase(name);
  return outcome::success();
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

std::shared_ptr<const rocksdb::Snapshot> rocksdb_store::take_snapshot() const {
  auto* db = db_.get();
  return std::shared_ptr<const rocksdb::Snapshot>(db->GetSnapshot(),
                                                  [db](const rocksdb::Snapshot* s) { db->ReleaseSnapshot(s); });
}

void rocksdb_store::begin_tx_write() {
  std::lock_guard lk(tx_snapshot_mu_);
  if (tx_groups_unsynced_++ == 0) {
    // Every transaction record written so far is durable (or the store is latched and this
    // write will not be acknowledged): readers may be reading the latest state, which is about
    // to hold records not yet durable. From now on they read this state, and a read that began
    // without a snapshot and overlaps the write is done again (read_durable_txs).
    tx_snapshot_ = take_snapshot();
    tx_epoch_.fetch_add(1);
  }
}

void rocksdb_store::end_tx_write(written_group& g, bool durable) {
  // Both released after the lock is let go (a release takes RocksDB's mutex): this group's own
  // snapshot when it is not used, and the view it replaces.
  std::shared_ptr<const rocksdb::Snapshot> mine = std::move(g.tx_snapshot);
  std::shared_ptr<const rocksdb::Snapshot> replaced;
  g.tx_pending = false;
  std::lock_guard lk(tx_snapshot_mu_);
  --tx_groups_unsynced_;
  // A group that failed leaves the view as it was: its records may be in the memtable without
  // being durable, and a failure latches the store (no later write is acknowledged).
  if (!durable || failed_) return;
  if (tx_groups_unsynced_ == 0) {
    // Nothing with transaction records waits for an fsync: no snapshot is needed, and holding
    // one would keep deleted entries on disk and, released later, start RocksDB's rewrite of
    // every bottommost file below it.
    replaced = std::move(tx_snapshot_);
    tx_snapshot_.reset();
  } else if (mine) {
    replaced = std::exchange(tx_snapshot_, std::move(mine));
  }
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
  for (auto cf : {cf_tx, cf_index_}) {
    auto& keys = ctx.deferred[cf];
    // std::string's order is bytewise (unsigned), RocksDB's default comparator's.
    std::sort(keys.begin(), keys.end(), [](auto* a, auto* b) { return a->first < b->first; });
    if (cf == cf_tx && !keys.empty() && keys.back()->first > max_tx_key_) max_tx_key_ = keys.back()->first;
    for (auto* e : keys) {
      if (e->second) {
        ctx.batch.Put(handles_[cf], e->first, *e->second);
      } else {
        ctx.batch.Delete(handles_[cf], e->first);
      }
    }
  }
  for (auto& [k, log] : ctx.logs) {
    log.finish();
    if (log_lz4_) sample_log_record(log.value);
    ctx.batch.Put(handles_[cf_log], log_key(log.topic_id, log.partition, log.base), log.value);
    log.state->meta.bytes += log.value.size();
    log.state->meta.next_offset = log.state->next;
  }
  for (auto& [k, log] : ctx.logs) {
    ctx.put(cf_default, partition_meta_key(log.topic_id, log.partition), encode(log.state->meta));
  }
}

}  // namespace txmq::storage::detail
