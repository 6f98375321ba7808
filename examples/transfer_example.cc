// Moves money between two accounts in PostgreSQL and publishes the transfer with it, as a
// transactional message: consumers see the transfer event if and only if the money moved.
//
//   transfer_example PG_CONNINFO [HOST:PORT] [FROM TO AMOUNT]
//
// The database needs the txmq schema (`txmq outbox init --pg CONN`); the example creates its
// accounts table. The producer group "transfers" answers the broker's check-backs from the
// barrier table, so a crash anywhere between Prepare and EndTx still ends right.

#include <cstdlib>
#include <iostream>
#include <string>

#include "txmq/pg/pg.h"
#include "txmq/producer/pg_checker.h"
#include "txmq/producer/transaction.h"

namespace pg = txmq::pg;
namespace producer = txmq::producer;
using txmq::client::result;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: transfer_example PG_CONNINFO [HOST:PORT] [FROM TO AMOUNT]\n";
    return 2;
  }
  const std::string conninfo = argv[1];
  std::string broker = argc > 2 ? argv[2] : (std::getenv("TXMQ_BROKER") ? std::getenv("TXMQ_BROKER") : "127.0.0.1:7878");
  const std::string from = argc > 5 ? argv[3] : "alice";
  const std::string to = argc > 5 ? argv[4] : "bob";
  const std::string amount = argc > 5 ? argv[5] : "10";

  auto db = pg::connect(conninfo);
  if (!db) {
    std::cerr << db.error() << "\n";
    return 1;
  }
  PGconn* conn = db.value().get();
  if (auto r = pg::exec(conn,
                        "CREATE TABLE IF NOT EXISTS accounts (name text PRIMARY KEY, balance numeric NOT NULL CHECK (balance >= 0));"
                        "INSERT INTO accounts VALUES ('alice', 100), ('bob', 100) ON CONFLICT DO NOTHING");
      !r) {
    std::cerr << r.error() << "\n";
    return 1;
  }

  // Check-backs are answered from txmq_tx_barrier in the same database, on their own connections.
  auto checker = std::make_shared<producer::pg_transaction_checker>(producer::pg_checker_options{.conninfo = conninfo});
  producer::transactional_producer tx_producer(
      {.connection = {.address = broker, .client_id = "transfer-example", .producer_group = "transfers"},
       .checker = producer::make_pg_checker(checker)});

  producer::outgoing_message event{.topic = "transfers",
                                   .key = from,  // a sender's transfers are consumed in order
                                   .headers = {{"type", "transfer.done"}},
                                   .body = R"({"from":")" + from + R"(","to":")" + to + R"(","amount":)" + amount + "}"};

  auto sent = tx_producer.send_in_transaction({event}, [&](const producer::transaction& tx) {
    // The local transaction: both balances and the barrier row commit together, or nothing does.
    auto local = pg::in_transaction(conn, [&](PGconn* c) -> result<void> {
      auto debit = pg::exec(c, "UPDATE accounts SET balance = balance - $2::numeric WHERE name = $1", {from, amount});
      if (!debit) return debit.error();  // e.g. the CHECK: not enough money
      if (std::string(PQcmdTuples(debit.value().get())) != "1") {
        return txmq::client::error(txmq::client::errc::invalid_argument, "no account '" + from + "'");
      }
      auto credit = pg::exec(c, "UPDATE accounts SET balance = balance + $2::numeric WHERE name = $1", {to, amount});
      if (!credit) return credit.error();
      if (std::string(PQcmdTuples(credit.value().get())) != "1") {
        return txmq::client::error(txmq::client::errc::invalid_argument, "no account '" + to + "'");
      }
      return producer::record_commit(c, tx.id());
    });
    if (local) return producer::tx_decision::commit;
    // A failed COMMIT on a broken connection may still have committed: let the check decide.
    if (PQstatus(conn) != CONNECTION_OK) return producer::tx_decision::unknown;
    std::cerr << "transfer refused: " << local.error() << "\n";
    return producer::tx_decision::rollback;
  });
  if (!sent) {
    std::cerr << "transfer: " << sent.error() << "\n";
    return 1;
  }
  std::cout << "tx " << sent.value().txid.to_string() << ": " << producer::to_string(sent.value().decision) << "\n";
  return sent.value().decision == producer::tx_decision::commit ? 0 : 1;
}
