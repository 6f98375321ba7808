#include "txmq/producer/pg_checker.h"

#include "txmq/pg/pg.h"

namespace txmq::producer {

client::result<void> record_commit(PGconn* conn, const protocol::txid& txid) {
  auto r = pg::exec(conn, "INSERT INTO txmq_tx_barrier (txid, outcome) VALUES ($1, 'commit')", {txid.to_string()});
  if (!r) {
    if (pg::sqlstate(r.error()) == pg::unique_violation) {
      return client::error(r.error().code, r.error().message + " (transaction " + txid.to_string() +
                                               " was already decided ROLLBACK by a check-back: roll the local transaction back)");
    }
    return r.error();
  }
  return outcome::success();
}

struct pg_transaction_checker::impl {
  explicit impl(pg_checker_options o)
      : options(std::move(o)), pool(options.conninfo, [timeout = options.lock_timeout](PGconn* c) -> client::result<void> {
          if (auto r = pg::exec(c, "SET lock_timeout = " + std::to_string(timeout.count())); !r) return r.error();
          if (auto r = pg::exec(c, "SET application_name = 'txmq-tx-checker'"); !r) return r.error();
          return outcome::success();
        }) {}

  void log(const std::string& text) const {
    if (options.log) options.log(text);
  }

  pg_checker_options options;
  pg::connection_pool pool;
};

pg_transaction_checker::pg_transaction_checker(pg_checker_options options)
    : impl_(std::make_unique<impl>(std::move(options))) {}

pg_transaction_checker::~pg_transaction_checker() = default;

tx_decision pg_transaction_checker::check(const protocol::txid& txid) {
  auto conn = impl_->pool.take();
  if (!conn) {
    impl_->log("transaction checker: " + conn.error().to_string());
    return tx_decision::unknown;
  }
  PGconn* c = conn.value().get();
  const std::string id = txid.to_string();
  // Autocommit: the insert is durable before we answer ROLLBACK, so the business transaction
  // can never commit after that answer.
  auto inserted = pg::exec(c, "INSERT INTO txmq_tx_barrier (txid, outcome) VALUES ($1, 'rollback') ON CONFLICT (txid) DO NOTHING",
                           {id});
  if (!inserted) {
    // lock_timeout (55P03): the business transaction is still open.
    impl_->log("transaction checker for " + id + ": " + inserted.error().to_string());
    impl_->pool.give_back(std::move(conn).value());
    return tx_decision::unknown;
  }
  auto row = pg::exec(c, "SELECT outcome FROM txmq_tx_barrier WHERE txid = $1", {id});
  if (!row || PQntuples(row.value().get()) != 1) {
    if (!row) impl_->log("transaction checker for " + id + ": " + row.error().to_string());
    impl_->pool.give_back(std::move(conn).value());
    return tx_decision::unknown;
  }
  const std::string outcome = PQgetvalue(row.value().get(), 0, 0);
  impl_->pool.give_back(std::move(conn).value());
  return outcome == "commit" ? tx_decision::commit : tx_decision::rollback;
}

client::result<std::uint64_t> pg_transaction_checker::cleanup(std::chrono::seconds age) {
  auto conn = impl_->pool.take();
  if (!conn) return conn.error();
  auto r = pg::exec(conn.value().get(), "DELETE FROM txmq_tx_barrier WHERE created_at < now() - make_interval(secs => $1)",
                    {std::to_string(age.count())});
  if (!r) return r.error();
  const std::uint64_t n = std::stoull(PQcmdTuples(r.value().get()));
  impl_->pool.give_back(std::move(conn).value());
  return n;
}

transaction_checker make_pg_checker(std::shared_ptr<pg_transaction_checker> checker) {
  return [checker = std::move(checker)](const tx_check& c) { return checker->check(c.txid); };
}

}  // namespace txmq::producer
