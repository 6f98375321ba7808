#include "txmq/consumer/pg_inbox.h"

#include <mutex>
#include <vector>

#include "txmq/pg/pg.h"

namespace txmq::consumer {

class pg_inbox::impl {
 public:
  impl(std::string conninfo, pg_inbox_options options) : pool_(std::move(conninfo)), options_(std::move(options)) {}

  client::result<pg::connection_ptr> take() { return pool_.take(); }
  void give_back(pg::connection_ptr c) { pool_.give_back(std::move(c)); }

  bool cleanup_due() {
    if (options_.cleanup_interval.count() == 0) return false;
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (now < next_cleanup_) return false;
    next_cleanup_ = now + options_.cleanup_interval;
    return true;
  }

  pg::connection_pool pool_;
  const pg_inbox_options options_;
  std::mutex mutex_;  // next_cleanup_
  std::chrono::steady_clock::time_point next_cleanup_{};
};

pg_inbox::pg_inbox(std::string conninfo, pg_inbox_options options)
    : impl_(std::make_shared<impl>(std::move(conninfo), std::move(options))) {}

pg_inbox::~pg_inbox() = default;

client::result<inbox_outcome> pg_inbox::handle(const delivery& d, const tx_handler& h) {
  if (impl_->cleanup_due()) {
    // Cleanup is housekeeping: its failure must not fail a delivery; it is tried again later.
    (void)cleanup();
  }
  auto conn = impl_->take();
  if (!conn) return conn.error();
  PGconn* c = conn.value().get();
  bool duplicate = false;
  auto done = pg::in_transaction(c, [&](PGconn* tx) -> client::result<void> {
    // A concurrent delivery of the same id waits here on the primary key until this
    // transaction ends, then sees the conflict: the handler never runs twice at once.
    auto recorded = pg::exec(tx, "INSERT INTO txmq_inbox (consumer, message_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                             {impl_->options_.consumer, d.id().to_string()});
    if (!recorded) return recorded.error();
    if (std::string_view(PQcmdTuples(recorded.value().get())) == "0") {
      duplicate = true;
      return outcome::success();
    }
    return h(tx, d);
  });
  impl_->give_back(std::move(conn).value());
  if (!done) return done.error();
  return duplicate ? inbox_outcome::duplicate : inbox_outcome::handled;
}

handler pg_inbox::wrap(tx_handler h) {
  return [this, h = std::move(h)](const delivery& d) -> handler_result {
    auto r = handle(d, h);
    if (!r) return r.error();
    return outcome::success();
  };
}

client::result<std::uint64_t> pg_inbox::cleanup() {
  auto conn = impl_->take();
  if (!conn) return conn.error();
  std::uint64_t removed = 0;
  const std::string age = std::to_string(impl_->options_.retention.count()) + " seconds";
  const std::string batch = std::to_string(impl_->options_.cleanup_batch);
  for (;;) {
    // Batches by ctid keep each statement short; received_at has an index.
    auto r = pg::exec(conn.value().get(),
                      "DELETE FROM txmq_inbox WHERE ctid IN (SELECT ctid FROM txmq_inbox WHERE consumer = $1 AND "
                      "received_at < now() - $2::interval LIMIT $3::int)",
                      {impl_->options_.consumer, age, batch});
    if (!r) {
      impl_->give_back(std::move(conn).value());
      return r.error();
    }
    const auto n = std::stoull(PQcmdTuples(r.value().get()));
    removed += n;
    if (n < impl_->options_.cleanup_batch) break;
  }
  impl_->give_back(std::move(conn).value());
  return removed;
}

}  // namespace txmq::consumer
