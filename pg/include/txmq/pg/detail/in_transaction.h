#pragma once

// Implementation of txmq::pg::in_transaction (included by txmq/pg/pg.h).

namespace txmq::pg {

template <class Fn>
result<void> in_transaction(PGconn* conn, Fn&& fn) {
  if (auto begun = exec(conn, "BEGIN"); !begun) return begun.error();
  result<void> body = outcome::success();
  try {
    body = fn(conn);
  } catch (...) {
    (void)exec(conn, "ROLLBACK");
    throw;
  }
  if (!body) {
    (void)exec(conn, "ROLLBACK");
    return body;
  }
  auto committed = exec(conn, "COMMIT");
  if (!committed) return committed.error();
  // COMMIT of a transaction that already failed answers OK with the tag "ROLLBACK".
  if (std::string_view(PQcmdStatus(committed.value().get())) != "COMMIT") {
    return error(errc::database, "the transaction was rolled back by PostgreSQL at COMMIT");
  }
  return outcome::success();
}

}  // namespace txmq::pg
