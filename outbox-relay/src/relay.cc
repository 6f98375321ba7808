// txmq-relay's engine (relay.h), kept as one piece: one thread's loop over one PostgreSQL session
// (shard locks, reads, deletes, heartbeats, stale relays) and the producers it publishes
// through; every member reads or changes that session's state, so splitting it would pass the
// whole state between files. Row decoding (outbox_row.cc), the shard plan (shard_plan.cc), the
// round's statements with the order of a read's rows (round_statements.cc), taking a read's rows
// into a round (round.cc), where each read starts (round_reader.cc, open_transactions.cc) and
// the awake locks that spare writers the NOTIFY (wake.cc) live apart because they need none of it.

#include "txmq/relay/relay.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "txmq/client/bootstrap.h"
#include "txmq/pg/pg.h"
#include "txmq/common/backoff.h"
#include "txmq/producer/pg_schema.h"
#include "txmq/producer/producer.h"
#include "txmq/relay/outbox_row.h"
#include "txmq/relay/shard_plan.h"
#include "round.h"
#include "round_reader.h"
#include "round_statements.h"
#include "wake.h"

namespace txmq::relay {
namespace {

using clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::string default_relay_id() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return std::string(host) + ":" + std::to_string(getpid());
}

// Advisory locks are per database: pg_locks must be filtered to ours.
constexpr const char* k_locks_of_class =
    "FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = $1::bigint::oid "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())";

struct batch_outcome {
  std::set<int> drained;                   // shards that had fewer than `batch` rows left
  bool published = false;                  // the broker acked something
  std::optional<client::error> db_error;   // reading or deleting failed
  std::optional<client::error> broker_error;  // some rows were not acknowledged
};

}  // namespace

class relay::impl {
 public:
  explicit impl(relay_options o)
      : options_(std::move(o)),
        db_backoff_(options_.backoff_initial, options_.backoff_max),
        broker_backoff_(options_.backoff_initial, options_.backoff_max) {
    if (options_.relay_id.empty()) options_.relay_id = default_relay_id();
    if (options_.batch < 1) options_.batch = 1;
    if (pipe2(wake_, O_NONBLOCK | O_CLOEXEC) != 0) wake_[0] = wake_[1] = -1;
    if (!options_.metrics) {
      own_metrics_ = std::make_unique<common::metrics_registry>();
      options_.metrics = own_metrics_.get();
    }
    auto& m = *options_.metrics;
    published_ = &m.add_counter("txmq_relay_rows_published_total", "outbox rows the broker acknowledged and the relay deleted");
    batches_ = &m.add_counter("txmq_relay_batches_total", "batches read from the outbox and published");
    publish_failures_ = &m.add_counter("txmq_relay_publish_failures_total", "batches the broker did not fully acknowledge (retried)");
    db_errors_ = &m.add_counter("txmq_relay_database_errors_total", "failed PostgreSQL connects and statements (retried)");
    acquired_ = &m.add_counter("txmq_relay_shard_moves_total", "shards taken or given up", {{"direction", "acquired"}});
    released_ = &m.add_counter("txmq_relay_shard_moves_total", "shards taken or given up", {{"direction", "released"}});
    db_up_ = &m.add_gauge("txmq_relay_database_up", "1 while the relay has a working PostgreSQL connection");
    broker_up_ = &m.add_gauge("txmq_relay_broker_up", "0 after a publish failed, until one succeeds");
    owned_gauge_ = &m.add_gauge("txmq_relay_shards_owned", "outbox shards this relay holds");
    live_gauge_ = &m.add_gauge("txmq_relay_live_relays", "relays connected to the database, this one included");
    stopped_gauge_ = &m.add_gauge("txmq_relay_shards_stopped",
                                  "owned shards stopped at a row that cannot be sent (the log names it): fix or delete the row, "
                                  "or grant or create its topic");
    row_age_ = &m.add_histogram("txmq_relay_row_age_seconds", "from the row's created_at to the broker's acknowledgement");
    stale_dropped_ = &m.add_counter("txmq_relay_stale_rounds_dropped_total",
                                    "rounds read before a pause and not sent because the database session ended meanwhile");
    above_ceiling_ = &m.add_counter("txmq_relay_rows_above_ceiling_total", "rows read above their round's seq ceiling");
    for (auto start : detail::k_read_starts) {
      reads_[detail::read_start_name(start)] =
          &m.add_counter("txmq_relay_reads_total", detail::k_reads_help, {{"start", detail::read_start_name(start)}});
    }
    stale_ended_ = &m.add_counter("txmq_relay_stale_relays_ended_total",
                                  "sessions of relays without a heartbeat for --stale-after, ended so that their shards move");
    // Read at scrape time from the http thread: a statement PostgreSQL does not answer (a
    // frozen server) blocks the relay's thread, which then cannot set a gauge itself.
    m.add_gauge_callback("txmq_relay_pg_healthy",
                         "1 while PostgreSQL answers the relay's statements (0: unreachable, failing, or silent for 5 s)", {},
                         [this] { return pg_health().healthy ? 1.0 : 0.0; });
    broker_up_->set(1);
  }

  ~impl() {
    if (wake_[0] >= 0) close(wake_[0]);
    if (wake_[1] >= 0) close(wake_[1]);
  }

  void stop() noexcept {
    stopping_.store(true);
    if (wake_[1] >= 0) {
      const char c = 1;
      [[maybe_unused]] auto n = write(wake_[1], &c, 1);
    }
  }

  relay_status status() const {
    std::lock_guard lock(status_mutex_);
    auto st = status_;
    const auto since = db_call_since_.load();
    if (since != 0) {
      st.pg_waiting = std::chrono::duration_cast<milliseconds>(clock::now().time_since_epoch() - clock::duration(since));
    }
    return st;
  }

  pg_health_status pg_health() const { return relay_pg_health(status()); }

  client::result<void> run() {
    producer::producer_options po;
    po.connection.address = options_.broker;
    po.connection.tls = options_.tls;
    po.connection.auth_token = options_.auth_token;
    po.connection.client_id = "txmq-relay:" + options_.relay_id;
    po.connection.connect_timeout = std::min(options_.publish_timeout, milliseconds(5000));
    po.connection.reconnect_backoff_initial = options_.backoff_initial;
    po.connection.reconnect_backoff_max = options_.backoff_max;
    po.linger = milliseconds(1);
    // A round carries up to batch rows of every owned shard, and goes out as one request per
    // topic and publisher as far as the broker's frame limit allows (the producer keeps batches
    // under it): with one batch in flight per topic, each further request of a round waited for
    // the previous one's fsync (1 MiB requests: three per round of 16 x 500 rows of 256 bytes;
    // one instead, 8-19 % more rows/s: docs/BENCHMARKS.md, "Thirteenth round").
    po.max_in_flight_messages = static_cast<std::size_t>(options_.batch) * 1024 + 4000;
    po.batch_max_messages = po.max_in_flight_messages;
    po.batch_max_bytes = std::size_t{1} << 30;
    po.max_in_flight_batches_per_topic = 1;  // a shard's rows in seq order across retries
    po.delivery_timeout = options_.publish_timeout;
    po.request_timeout = options_.publish_timeout;
    po.retry_backoff_initial = options_.backoff_initial;
    po.retry_backoff_max = options_.backoff_max;
    if (auto addr = client::parse_bootstrap_list(options_.broker); !addr) {
      return client::error(client::errc::bad_address, "--broker: " + addr.error().message);
    }
    // Shard s always goes through publisher s % n (one connection each), so each shard's rows
    // stay in one ordered stream. Several let several shards' batches be in flight at once; one
    // (the default) sends a round in seq order, ids ascending, which costs the broker less per
    // row (docs/BENCHMARKS.md, "Thirteenth round").
    for (int i = 0; i < std::max(1, options_.publishers); ++i) {
      producers_.push_back(std::make_unique<producer::producer>(po));
    }
    log(log_level::info, "relay " + options_.relay_id + " starting: broker " + options_.broker + ", batch " +
                             std::to_string(options_.batch) + ", poll every " +
                             std::to_string(options_.poll_interval.count()) + " ms");

    auto next_rebalance = clock::now();
    auto next_poll = clock::now();
    while (!stopping_.load()) {
      if (!conn_) {
        if (auto c = connect_db(); !c) {
          db_failed(c.error());
          wait_until(clock::now() + db_backoff_.next());
          continue;
        }
        db_backoff_.reset();
        next_rebalance = next_poll = clock::now();
      }
      const auto now = clock::now();
      if (now >= next_rebalance) {
        next_rebalance = now + options_.rebalance_interval;
        if (auto r = rebalance(); !r) {
          db_failed(r.error());
          continue;
        }
        db_ok();
      }
      if (now >= next_poll) {
        next_poll = now + options_.poll_interval;
        pending_.insert(owned_.begin(), owned_.end());
      }
      drain_notifications();
      if (pending_.empty() && waking_->awake()) {
        // Writers send no NOTIFY while we are awake: read again shortly, or fall asleep (and
        // read once more).
        if (const auto wait = waking_->quiet.next_wait(); !wait) {
          if (auto r = waking_->fall_asleep(waking_exec_); !r) {
            db_failed(r.error());
            continue;
          }
        } else if (wait->count() > 0) {
          wait_until(clock::now() + *wait);
          if (stopping_.load()) continue;
        }
        pending_.insert(owned_.begin(), owned_.end());
      }
      if (pending_.empty()) {
        wait_until(std::min(next_poll, next_rebalance));
        continue;
      }
      auto batch = drain(clock::now() + options_.rebalance_interval);
      if (batch.db_error) {
        db_failed(*batch.db_error);
        continue;
      }
      if (batch.broker_error) {
        broker_failed(*batch.broker_error);
        // The rows stay; the shards stay pending and are tried again after the pause.
        wait_until(clock::now() + broker_backoff_.next());
        continue;
      }
      db_ok();
      for (int shard : batch.drained) pending_.erase(shard);
      if (batch.published) broker_ok();
      if (!batch.published) {
        waking_->quiet.found_nothing();
      } else if (auto r = waking_->rows_published(waking_exec_, owned_); !r) {
        db_failed(r.error());
      }
    }
    shutdown();
    return outcome::success();
  }

 private:
  void log(log_level l, const std::string& text) {
    if (options_.log) options_.log(l, text);
  }

  void set_error(const std::string& text) {
    std::lock_guard lock(status_mutex_);
    status_.last_error = text;
  }

  // Every statement of the relay's session goes through here: the time a call started is what
  // /healthz and txmq_relay_pg_healthy read to tell a silent (frozen) server from a slow one.
  struct db_call {
    impl& self;
    explicit db_call(impl& s) : self(s) { self.db_call_since_.store(clock::now().time_since_epoch().count()); }
    ~db_call() {
      const auto took = clock::now().time_since_epoch() - clock::duration(self.db_call_since_.exchange(0));
      if (took >= std::min<clock::duration>(k_pg_silent, self.options_.stale_after / 2)) self.last_slow_db_call_ = clock::now();
      if (took >= k_pg_silent) {
        self.log(log_level::warn, "PostgreSQL took " + std::to_string(std::chrono::duration_cast<milliseconds>(took).count()) +
                                      " ms to answer a statement");
      }
    }
  };

  client::result<pg::result_ptr> db_exec(std::string_view sql, std::initializer_list<pg::param> params = {}) {
    db_call call(*this);
    return pg::exec(conn_.get(), sql, params);
  }

  client::result<detail::read_result> db_read(const std::set<int>& shards, const std::map<int, std::int64_t>* in_flight,
                                              std::uint64_t in_flight_read_no) {
    db_call call(*this);
    return reader_->read(conn_.get(), shards, in_flight, in_flight_read_no);
  }

  client::result<pg::result_ptr> db_exec_prepared(const char* name, std::span<const pg::param> params, bool binary_result,
                                                   bool binary_params = false) {
    db_call call(*this);
    return pg::exec_prepared(conn_.get(), name, params, binary_result, binary_params);
  }

  // A statement worked: if statements had been failing on a live connection, say once that
  // they work again (a lost connection says so in connect_db()).
  void db_ok() {
    if (pg_ok_) return;
    pg_ok_ = true;
    db_backoff_.reset();
    db_down_logged_ = false;
    db_errors_logged_.clear();
    log(log_level::info, "PostgreSQL statements work again");
    std::lock_guard lock(status_mutex_);
    status_.pg_ok = true;
  }

  client::result<void> connect_db() {
    db_call call(*this);
    auto c = pg::connect(options_.conninfo);
    if (!c) return c.error();
    PGconn* pc = c.value().get();
    // application_name lets an operator (and the tests) find the relay's session in
    // pg_stat_activity. synchronous_commit off: a delete lost in a database crash only means the
    // rows are published again, which the broker's dedupe absorbs; the relay never waits for a
    // WAL flush.
    if (auto r = pg::exec(pc, "SELECT set_config('application_name', $1, false)", {"txmq-relay:" + options_.relay_id}); !r) {
      return r.error();
    }
    if (auto r = pg::exec(pc, "SET synchronous_commit = off; LISTEN txmq_outbox; " + detail::round_statements_setup_sql()); !r) {
      return r.error();
    }
    if (auto r = pg::exec(pc, "SELECT pg_advisory_lock_shared($1::int, 0)", {std::to_string(member_lock_class)}); !r) {
      return r.error();
    }
    auto schema = producer::read_schema(pc);
    if (!schema) return schema.error();
    shards_ = options_.shards > 0 ? options_.shards : schema.value().shards;
    if (shards_ != schema.value().shards) {
      // Rows are routed by the trigger's count; a different count leaves shards unread or empty.
      log(log_level::warn, "--shards " + std::to_string(shards_) + " differs from the " +
                               std::to_string(schema.value().shards) +
                               " shards the outbox trigger routes to (txmq_schema.shards); rows may go unpublished");
    }
    // The order rule needs schema version 3 (round_reader.h); older ones are read from each
    // shard's start every time: correct, slower in a backlog.
    reader_.emplace(options_.batch, schema.value().version >= 3);
    if (!reader_->order_rule()) log(log_level::warn, detail::old_schema_warning(schema.value().version));
    waking_.emplace(schema.value().version >= 4, *options_.metrics);  // older: NOTIFY on every commit
    conn_ = std::move(c).value();
    owned_.clear();
    pending_.clear();
    db_up_->set(1);
    pg_ok_ = true;
    {
      std::lock_guard lock(status_mutex_);
      status_.database_up = true;
      status_.pg_ok = true;
    }
    log(log_level::info, "connected to PostgreSQL (" + std::to_string(shards_) + " shards)" +
                             (db_down_logged_ ? ", after it was unavailable" : ""));
    db_down_logged_ = false;
    db_errors_logged_.clear();
    return outcome::success();
  }

  // A statement failed. A dead connection takes the shard locks with it: forget them, and
  // reconnect after a pause. Any other failure keeps the connection and is retried.
  void db_failed(const client::error& e) {
    db_errors_->inc();
    const bool lost = !conn_ || PQstatus(conn_.get()) != CONNECTION_OK;
    if (db_errors_logged_.size() < k_max_db_errors_logged && db_errors_logged_.insert(e.message).second) {
      log(log_level::error, std::string(lost ? "PostgreSQL unavailable" : "PostgreSQL statement failed") + ": " + e.message +
                                (owned_.empty() ? "" : " (" + std::to_string(owned_.size()) + " shards given up)") +
                                "; retrying with back-off");
    }
    db_down_logged_ = true;
    set_error(e.message);
    pg_ok_ = false;
    {
      std::lock_guard lock(status_mutex_);
      status_.pg_ok = false;
    }
    if (lost) {
      conn_.reset();
      owned_.clear();
      pending_.clear();
      reader_.reset();
      waking_.reset();  // the session's locks went with it
      db_up_->set(0);
      owned_gauge_->set(0);
      std::lock_guard lock(status_mutex_);
      status_.database_up = false;
      status_.shards_owned = 0;
    } else {
      wait_until(clock::now() + db_backoff_.next());
    }
  }

  void broker_failed(const client::error& e) {
    publish_failures_->inc();
    broker_up_->set(0);
    if (!broker_down_logged_ || e.message != last_broker_error_) {
      log(log_level::error, "publishing to the broker " + options_.broker + " failed: " + e.to_string() +
                                "; the rows stay in the outbox and are published again after a back-off");
      broker_down_logged_ = true;
      last_broker_error_ = e.message;
    }
    set_error(e.to_string());
    std::lock_guard lock(status_mutex_);
    status_.broker_up = false;
  }

  void broker_ok() {
    broker_backoff_.reset();
    if (!broker_down_logged_) return;
    broker_down_logged_ = false;
    broker_up_->set(1);
    log(log_level::info, "publishing to the broker works again");
    std::lock_guard lock(status_mutex_);
    status_.broker_up = true;
  }

  client::result<std::set<int>> locked_shards() {
    auto r = db_exec(std::string("SELECT objid::int ") + k_locks_of_class, {std::to_string(shard_lock_class)});
    if (!r) return r.error();
    std::set<int> held;
    for (int i = 0; i < PQntuples(r.value().get()); ++i) held.insert(std::stoi(PQgetvalue(r.value().get(), i, 0)));
    return held;
  }

  // Ends the sessions of relays whose heartbeat is older than stale_after while their session
  // still holds the membership lock: a frozen (SIGSTOPped) or hung relay keeps its TCP session
  // and so its shard locks, and nobody would publish its shards. Once its session ends, its
  // locks go with it and the shards move; when it thaws, every statement of its session fails,
  // it reconnects, and it sends nothing it had read before (check_fresh()).
  client::result<void> end_stale_relays() {
    if (options_.stale_after.count() <= 0) return outcome::success();
    // PostgreSQL itself was slow or frozen lately: every relay's heartbeat is late for the same
    // reason, and whoever answered first would end the others' sessions. Judge no one then.
    if (last_slow_db_call_ && clock::now() - *last_slow_db_call_ < options_.stale_after) return outcome::success();
    auto r = db_exec(
        "SELECT t.relay_id, pg_terminate_backend(t.backend_pid), floor(extract(epoch FROM now() - t.heartbeat_at))::bigint "
        "FROM txmq_relay t WHERE t.relay_id <> $1 AND t.heartbeat_at < now() - $2::interval AND t.backend_pid IN "
        "(SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2 AND classid = $3::bigint::oid "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) "
        // Only a judge that beat recently itself: after PostgreSQL was frozen every heartbeat is
        // old, and the relays must not end each other's sessions.
        "AND EXISTS (SELECT 1 FROM txmq_relay me WHERE me.relay_id = $1 AND me.heartbeat_at >= now() - $2::interval / 2)",
        {options_.relay_id, std::to_string(options_.stale_after.count()) + " milliseconds",
         std::to_string(member_lock_class)});
    if (!r) {
      if (pg::sqlstate(r.error()) == "42P01") return outcome::success();  // schema version 1: no txmq_relay
      return r.error();
    }
    for (int i = 0; i < PQntuples(r.value().get()); ++i) {
      stale_ended_->inc();
      log(log_level::warn, std::string("relay ") + PQgetvalue(r.value().get(), i, 0) + " sent no heartbeat for " +
                               PQgetvalue(r.value().get(), i, 2) + " s (frozen or hung?): its PostgreSQL session was ended " +
                               "so that its shards move");
    }
    return outcome::success();
  }

  client::result<void> rebalance() {
    if (auto r = end_stale_relays(); !r) return r.error();
    auto live_r = db_exec(std::string("SELECT count(DISTINCT pid) ") + k_locks_of_class,
                           {std::to_string(member_lock_class)});
    if (!live_r) return live_r.error();
    const int live = std::max(1, std::stoi(PQgetvalue(live_r.value().get(), 0, 0)));
    auto held = locked_shards();
    if (!held) return held.error();
    const auto moves = plan_moves(owned_, held.value(), shards_, fair_share(shards_, live), options_.relay_id);
    const auto lock_class = std::to_string(shard_lock_class);
    for (int s : moves.release) {
      // Between batches (run() is single-threaded), so nothing of the shard is in flight.
      if (auto r = db_exec("SELECT pg_advisory_unlock($1::int, $2::int)", {lock_class, std::to_string(s)}); !r) {
        return r.error();
      }
      if (auto r = waking_ ? waking_->give_up(waking_exec_, {s}) : outcome::success(); !r) return r.error();
      owned_.erase(s);
      pending_.erase(s);
      reader_->read_from_start(s);
      released_->inc();
    }
    const int share = fair_share(shards_, live);
    for (int s : moves.acquire) {
      if (static_cast<int>(owned_.size()) >= share) break;
      auto r = db_exec("SELECT pg_try_advisory_lock($1::int, $2::int)", {lock_class, std::to_string(s)});
      if (!r) return r.error();
      if (std::string_view(PQgetvalue(r.value().get(), 0, 0)) == "t") {
        owned_.insert(s);
        pending_.insert(s);  // a new owner starts with whatever the shard holds
        reader_->read_from_start(s);
        acquired_->inc();
      }
    }
    if (owned_ != owned_before_) {
      std::string list;
      for (int s : owned_) list += (list.empty() ? "" : ",") + std::to_string(s);
      log(log_level::info, "holding " + std::to_string(owned_.size()) + " of " + std::to_string(shards_) + " shards [" + list +
                               "], " + std::to_string(live) + " relays live");
      owned_before_ = owned_;
    }
    owned_gauge_->set(static_cast<double>(owned_.size()));
    live_gauge_->set(live);
    std::erase_if(stopped_, [&](const auto& e) { return !owned_.contains(e.first); });  // another relay's now
    stopped_gauge_->set(static_cast<double>(stopped_.size()));
    {
      std::lock_guard lock(status_mutex_);
      status_.shards_owned = static_cast<int>(owned_.size());
      status_.live_relays = live;
    }
    return heartbeat();
  }

  client::result<void> heartbeat() {
    const auto shards = pg::int_array_literal(owned_);
    const auto st = status();
    auto r = db_exec(
                      "INSERT INTO txmq_relay (relay_id, backend_pid, process, shards, broker_state, last_error, "
                      "rows_published, heartbeat_at) VALUES ($1, pg_backend_pid(), $2, $3::int[], $4, $5, $6, now()) "
                      "ON CONFLICT (relay_id) DO UPDATE SET backend_pid = EXCLUDED.backend_pid, process = EXCLUDED.process, "
                      "shards = EXCLUDED.shards, broker_state = EXCLUDED.broker_state, last_error = EXCLUDED.last_error, "
                      "rows_published = EXCLUDED.rows_published, heartbeat_at = now()",
                      {options_.relay_id, default_relay_id(), shards, st.broker_up ? "up" : "unavailable", st.last_error,
                       std::to_string(published_->value())});
    if (!r) {
      // Before `txmq outbox init` of version 2 there is no txmq_relay: publishing still works.
      if (pg::sqlstate(r.error()) == "42P01") return outcome::success();
      return r.error();
    }
    return outcome::success();
  }

  void drain_notifications() {
    if (!conn_) return;
    PQconsumeInput(conn_.get());
    while (PGnotify* n = PQnotifies(conn_.get())) {
      const int shard = std::atoi(n->extra);
      if (owned_.contains(shard)) pending_.insert(shard);
      PQfreemem(n);
    }
  }

  using round = detail::round;
  using round_acks = detail::round_acks;

  // Reads a round of `shards`: past the last seqs of the round in flight (`in_flight`, null when
  // none) or the shards' resume points, as round_reader allows. Errors: the database's.
  client::result<round> read_round(const std::set<int>& shards, const round* in_flight) {
    round out;
    for (int s : shards) out.rows[s] = 0;
    auto rows = db_read(shards, in_flight ? &in_flight->last_seq : nullptr, in_flight ? in_flight->read_no : 0);
    if (!rows) return rows.error();
    reads_.at(detail::read_start_name(rows.value().start))->inc();
    out.read_no = rows.value().read_no;
    out.deferred = rows.value().start == detail::read_start::deferred;
    if (out.deferred) return out;
    above_ceiling_->inc(rows.value().above_ceiling);  // read again next round
    // Before its first handshake a producer does not know the broker's max_message_bytes, and
    // check() lets a too-large row through (refused with its whole batch, one failed round):
    // a just-started relay gives its connections up to a second, once per read, while none knows.
    const auto until = clock::now() + std::min(options_.publish_timeout, milliseconds(1000));
    for (auto& p : producers_) {
      const auto left = std::chrono::duration_cast<milliseconds>(until - clock::now());
      if (!p->conn()->server() && left.count() > 0) (void)p->conn()->wait_connected(left);
    }
    detail::take_rows(rows.value(), out, [this](int shard, const producer::outgoing_message& m) {
      return producers_[static_cast<std::size_t>(shard) % producers_.size()]->check(m);
    });
    return out;
  }

  // A round read a while ago (the relay was paused, or waited long for the broker's acks) is
  // sent only if the session that read it, and so its shard locks, is still there: another
  // relay may have taken the shards and published the rows meanwhile.
  client::result<void> check_fresh(const round& r) {
    if (clock::now() - r.read_at < options_.rebalance_interval) return outcome::success();
    auto alive = db_exec("SELECT 1");
    if (alive) return outcome::success();
    stale_dropped_->inc();
    log(log_level::warn, "a round of " + std::to_string(r.messages.size()) + " rows read " +
                             std::to_string(std::chrono::duration_cast<milliseconds>(clock::now() - r.read_at).count()) +
                             " ms ago is not sent: the PostgreSQL session ended meanwhile (its shards may have moved)");
    return alive.error();
  }

  void send_round(round& r) {
    r.acks = std::make_shared<round_acks>();
    r.acks->results.resize(r.messages.size());
    r.sent = r.messages.size();
    std::vector<bool> used(producers_.size(), false);
    // A plain pointer, not a shared_ptr copy, in each callback: the capture then fits the
    // std::function's own storage (no allocation per row). The round outlives its callbacks:
    // every sent round is settled (settle_round waits for all of them) before it is dropped.
    round_acks* acks = r.acks.get();
    for (std::size_t i = 0; i < r.messages.size(); ++i) {
      const std::size_t pi = static_cast<std::size_t>(r.shards[i]) % producers_.size();
      used[pi] = true;
      producers_[pi]->async_send(std::move(r.messages[i]), [acks, i](client::result<producer::send_result> a) {
        acks->results[i] = std::move(a);
        if (acks->done.fetch_add(1) + 1 == acks->results.size()) {
          std::lock_guard lock(acks->mutex);
          acks->all_done.notify_one();
        }
      });
    }
    // The whole round is queued: send it now rather than after the producer's linger (a round
    // of a few rows at a low rate waited 1 ms for nothing).
    for (std::size_t pi = 0; pi < used.size(); ++pi) {
      if (used[pi]) producers_[pi]->send_now();
    }
    r.messages.clear();
  }

  detail::settled settle_round(round& r) { return detail::settle(r, *row_age_); }

  // Only what the broker acked (fsynced) is deleted; the rest is read again next time.
  client::result<void> delete_acked(const std::string& acked) {
    if (acked.empty()) return outcome::success();
    const pg::param params[] = {pg::uuid_array_binary(acked)};
    auto del = db_exec_prepared(detail::k_delete_statement, params, false, true);
    if (!del) return del.error();
    published_->inc(std::stoull(PQcmdTuples(del.value().get())));
    return outcome::success();
  }

  // Publishes the pending shards until they are drained (a round returns fewer than `batch`
  // rows of each), stop() is asked, or `until` passes (so that rebalancing and NOTIFYs get
  // their turn). Pipelined: the next round is read while this one is being acked, and sent
  // only after this one was fully acked (a failed round must not be overtaken by its
  // successor), and this one is deleted while the next is being acked. Nothing is in flight
  // when it returns, so shards may then be released.
  batch_outcome drain(clock::time_point until) {
    batch_outcome out;
    // Each shard starts where round_reader says (README "Where a read starts", "The order rule").
    auto first = read_round(pending_, nullptr);
    if (!first) {
      out.db_error = first.error();
      return out;
    }
    round cur = std::move(first).value();
    if (auto fresh = check_fresh(cur); !fresh) {
      out.db_error = fresh.error();
      return out;
    }
    send_round(cur);
    for (;;) {
      std::set<int> more;  // a shard stopped at a row waits for the next poll, as a drained one
      for (int shard : cur.unfinished) if (!cur.stopped.contains(shard)) more.insert(shard);
      std::optional<round> next;
      bool read_after_delete = false;
      if (!more.empty() && !stopping_.load() && clock::now() < until) {
        auto r = read_round(more, &cur);
        if (!r) {
          (void)settle_round(cur);
          out.db_error = r.error();
          return out;
        }
        // Deferred: a transaction completed with rows that may lie below this round's end; they
        // are read (in seq order, before anything later of their keys) once it is deleted.
        read_after_delete = r.value().deferred;
        if (!read_after_delete) next = std::move(r).value();
      }
      auto [acked, failed] = settle_round(cur);
      if (cur.sent > 0) batches_->inc();
      // A topic the broker refuses stops only the shards whose next row targets it (round.h).
      const auto failures = failed ? detail::sort_failures(cur) : detail::round_failures{};
      note_stops(cur);
      if (failed) {
        // `next` was never sent; its rows are read again, in order: after the back-off if the
        // broker failed, at once if it only refused topics (their shards wait for the next poll).
        if (auto d = delete_acked(acked); !d) out.db_error = d.error();
        out.broker_error = failures.broker_error;
        out.published = out.published || !acked.empty();
        out.drained.insert(failures.refused.begin(), failures.refused.end());
        return out;
      }
      if (next) {
        if (auto fresh = check_fresh(*next); !fresh) {
          (void)delete_acked(acked);
          out.db_error = fresh.error();
          return out;
        }
        send_round(*next);
      }
      if (auto d = delete_acked(acked); !d) {
        if (next) (void)settle_round(*next);
        out.db_error = d.error();
        return out;
      }
      out.published = out.published || !acked.empty();
      for (const auto& [shard, n] : cur.rows) {
        if (!more.contains(shard)) {
          out.drained.insert(shard);
          reader_->read_from_start(shard);  // dead rows of a drained backlog ahead: < 1 ms (BENCHMARKS round 16)
        } else if (auto it = cur.last_seq.find(shard); it != cur.last_seq.end()) {
          reader_->resume_after(shard, it->second, cur.read_no);  // every row of the round was acked and deleted
        }
      }
      if (read_after_delete) {
        auto r = read_round(more, nullptr);
        if (!r) {
          out.db_error = r.error();
          return out;
        }
        next = std::move(r).value();
        send_round(*next);
      }
      if (!next) return out;
      cur = std::move(*next);
    }
  }

  // Shards stopped at a row that cannot be sent (round::stopped): logged once per row and reason,
  // counted in txmq_relay_shards_stopped; a shard read again without a stop goes on.
  void note_stops(const round& r) {
    for (const auto& [shard, n] : r.rows) {
      const auto stop = r.stopped.find(shard);
      const auto known = stopped_.find(shard);
      if (stop == r.stopped.end()) {
        if (known == stopped_.end()) continue;
        log(log_level::info, "shard " + std::to_string(shard) + " goes on: the row it stopped at was sent, fixed or deleted");
        stopped_.erase(known);
      } else if (known == stopped_.end() || known->second != stop->second.message) {
        log(log_level::error, "shard " + std::to_string(shard) + " stops: " + stop->second.to_string() +
                                  "; the shard's later rows wait until the row is fixed or deleted (or the broker takes its topic)");
        set_error(stop->second.to_string());
        stopped_[shard] = stop->second.message;
      }
    }
    stopped_gauge_->set(static_cast<double>(stopped_.size()));
  }

  // Sleeps until `deadline`, a NOTIFY (the database socket is readable) or stop().
  void wait_until(clock::time_point deadline) {
    while (!stopping_.load()) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - clock::now());
      if (left.count() <= 0) return;
      pollfd fds[2] = {{wake_[0], POLLIN, 0}, {conn_ ? PQsocket(conn_.get()) : -1, POLLIN, 0}};
      const int n = poll(fds, 2, static_cast<int>(std::min<std::int64_t>(left.count(), 1000)));
      if (n > 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
        drain_notifications();
        if (conn_ && PQstatus(conn_.get()) != CONNECTION_OK) return;
        if (!pending_.empty()) return;
      }
      if (n > 0 && (fds[0].revents & POLLIN)) return;
    }
  }

  void shutdown() {
    log(log_level::info, "stopping: releasing " + std::to_string(owned_.size()) + " shards");
    if (conn_) {
      (void)db_exec("SELECT pg_advisory_unlock_all()");
      (void)db_exec("DELETE FROM txmq_relay WHERE relay_id = $1", {options_.relay_id});
      conn_.reset();
    }
    owned_.clear();
    for (auto& p : producers_) p->close();
    std::string reads;  // how reads started over the relay's life (txmq_relay_reads_total)
    for (const auto& [start, n] : reads_) reads += (reads.empty() ? "" : ", ") + start + " " + std::to_string(n->value());
    log(log_level::info, "stopped; reads by start: " + reads + "; rows above a ceiling " + std::to_string(above_ceiling_->value()));
  }

  relay_options options_;
  std::unique_ptr<common::metrics_registry> own_metrics_;
  std::atomic<bool> stopping_{false};
  int wake_[2] = {-1, -1};

  pg::connection_ptr conn_;
  std::vector<std::unique_ptr<producer::producer>> producers_;
  int shards_ = 0;
  std::set<int> owned_;
  std::set<int> pending_;
  // Where each owned shard's next read starts (its resume point, past what this session read and
  // deleted, as the order rule allows): reading past it spares PostgreSQL a walk from the shard's
  // start over the index entries and dead heap tuples of every row deleted since (about 3.5 µs
  // each, the first time they are walked). Made per session (connect_db), for its schema version.
  std::optional<detail::round_reader> reader_;
  std::optional<detail::wake_state> waking_;  // per session (connect_db), for its schema version
  const detail::db_exec waking_exec_ = [this](std::string_view sql, std::span<const pg::param> params) {
    db_call call(*this);
    return pg::exec(conn_.get(), sql, params);
  };
  std::set<int> owned_before_;
  common::backoff db_backoff_;
  common::backoff broker_backoff_;
  bool db_down_logged_ = false;
  bool pg_ok_ = true;  // the last statement worked (false from a failure to the next success)
  // steady_clock ticks when the statement in progress started; 0 when none is.
  std::atomic<clock::rep> db_call_since_{0};
  // When a statement last took long (PostgreSQL slow or frozen): no stale-relay judging for a while.
  std::optional<clock::time_point> last_slow_db_call_;
  bool broker_down_logged_ = false;
  static constexpr std::size_t k_max_db_errors_logged = 8;  // against error texts that keep changing
  std::set<std::string> db_errors_logged_;  // each text once per outage: a stopping server gives a few in turn
  std::string last_broker_error_;
  std::map<int, std::string> stopped_;  // shard -> why it stopped (note_stops)

  mutable std::mutex status_mutex_;
  relay_status status_;

  common::counter* published_;
  common::counter* batches_;
  common::counter* publish_failures_;
  common::counter* db_errors_;
  common::counter* acquired_;
  common::counter* released_;
  common::gauge* db_up_;
  common::gauge* broker_up_;
  common::gauge* owned_gauge_;
  common::gauge* live_gauge_;
  common::gauge* stopped_gauge_;
  common::histogram* row_age_;
  common::counter* stale_dropped_;
  common::counter* above_ceiling_;
  common::counter* stale_ended_;
  std::map<std::string, common::counter*> reads_;
};

relay::relay(relay_options options) : impl_(std::make_unique<impl>(std::move(options))) {}
relay::~relay() = default;
client::result<void> relay::run() { return impl_->run(); }
void relay::stop() noexcept { impl_->stop(); }
relay_status relay::status() const { return impl_->status(); }

}  // namespace txmq::relay
