// A transactional producer that the fault tests SIGKILL (and that kills itself at chosen
// points). Two modes:
//
//   tx_kill_child produce BROKER PG_CONNINFO GROUP TOPIC SEED
//     Money-transfer-like transactions: Prepare one message whose body is the txid, then a
//     local PostgreSQL transaction that inserts the txid into tx_business with the barrier
//     row (record_commit), committing 3 in 4, then EndTx accordingly. With probability 1/30
//     each it kills itself (a) after Prepare, before the local commit, (b) after the local
//     commit, before EndTx, (c) while EndTx is on its way. Prints "prepared TXID" after each
//     Prepare. Checks are answered by pg_transaction_checker.
//
//   tx_kill_child rpw BROKER IN_TOPIC OUT_TOPIC GROUP SEED
//     Read-process-write: fetches from IN_TOPIC in consumer group GROUP and, per delivery,
//     commits a transaction that publishes "out:" + body to OUT_TOPIC and acks the delivery.
//     Kills itself with probability 1/30 after Prepare and 1/30 during EndTx. Checks are
//     answered ROLLBACK (a transaction this process did not end was not finished: its input
//     is delivered again).

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <thread>

#include "txmq/pg/pg.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/pg_checker.h"
#include "txmq/producer/transaction.h"

namespace {

using namespace std::chrono_literals;
using namespace txmq;

// Says where it dies, so the test can tell that every kill point was hit.
[[noreturn]] void die(char point) {
  std::printf("kill %c\n", point);
  std::fflush(stdout);
  ::raise(SIGKILL);
  std::abort();
}

// Ends the transaction on another thread and dies a few hundred microseconds in, so that the
// EndTx frame may be unsent, sent, or applied without its answer.
[[noreturn]] void die_during(producer::transaction& tx, bool commit, std::mt19937_64& rng) {
  std::thread end([&] {
    if (commit) {
      (void)tx.commit();
    } else {
      (void)tx.rollback();
    }
  });
  end.detach();
  std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 1500)(rng)));  // a random kill point
  die('c');
}

int produce(const std::string& broker, const std::string& conninfo, const std::string& group, const std::string& topic,
            std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto checker = std::make_shared<producer::pg_transaction_checker>(producer::pg_checker_options{.conninfo = conninfo});
  producer::transactional_producer p({.connection = {.address = broker, .client_id = "kill-child", .producer_group = group},
                                      .checker = producer::make_pg_checker(checker)});
  auto db = pg::connect(conninfo);
  if (!db) {
    std::cerr << db.error() << "\n";
    return 1;
  }
  PGconn* c = db.value().get();
  std::uniform_int_distribution<int> roll(0, 119);
  for (;;) {
    auto tx = p.begin();
    tx.add({.topic = topic, .key = "acct-" + std::to_string(rng() % 8), .body = tx.id().to_string()});
    if (auto r = tx.prepare(); !r) {
      std::cerr << "prepare: " << r.error() << "\n";
      continue;
    }
    std::printf("prepared %s\n", tx.id().to_string().c_str());
    std::fflush(stdout);
    const int fate = roll(rng);  // 0-3: die at a; 4-7: die at b; 8-11: die during EndTx
    if (fate < 4) die('a');
    const bool want_commit = fate % 4 != 0;
    auto local = pg::in_transaction(c, [&](PGconn* conn) -> client::result<void> {
      if (auto r = pg::exec(conn, "INSERT INTO tx_business (txid) VALUES ($1)", {tx.id().to_string()}); !r) return r.error();
      if (auto r = producer::record_commit(conn, tx.id()); !r) return r.error();
      if (!want_commit) return client::error(client::errc::invalid_argument, "the business logic said no");
      return outcome::success();
    });
    const bool committed = local.has_value();
    if (fate >= 4 && fate < 8) die('b');
    if (fate >= 8 && fate < 12) die_during(tx, committed, rng);
    if (committed) {
      if (auto r = tx.commit(); !r) std::cerr << "commit: " << r.error() << "\n";
    } else {
      if (auto r = tx.rollback(); !r) std::cerr << "rollback: " << r.error() << "\n";
    }
  }
}

int read_process_write(const std::string& broker, const std::string& in, const std::string& out, const std::string& group,
                       std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  producer::transactional_producer p(
      {.connection = {.address = broker, .client_id = "rpw-child", .producer_group = group + "-producers"},
       .checker = [](const producer::tx_check&) { return producer::tx_decision::rollback; }});
  consumer::consumer_options co;
  co.connection.address = broker;
  co.connection.client_id = "rpw-child";
  co.group = group;
  co.topics = {in};
  consumer::consumer cons(co);
  std::uniform_int_distribution<int> roll(0, 59);
  for (;;) {
    auto batch = cons.fetch(16, 500ms);
    if (!batch) {
      std::cerr << "fetch: " << batch.error() << "\n";
      continue;
    }
    for (auto& d : batch.value()) {
      auto tx = p.begin();
      tx.add({.topic = out, .key = d.message.has_key() ? std::optional<std::string>(d.message.key()) : std::nullopt,
              .body = "out:" + d.message.body()});
      tx.add_ack(group, {d.message.topic(), d.message.partition(), d.message.offset()});
      if (auto r = tx.prepare(); !r) {
        std::cerr << "prepare: " << r.error() << "\n";
        continue;
      }
      const int fate = roll(rng);
      if (fate < 2) die('a');
      if (fate < 4) die_during(tx, true, rng);
      if (auto r = tx.commit(); !r) {
        std::cerr << "commit: " << r.error() << "\n";
        const consumer::delivery_ref ref = d.ref();
        (void)cons.nack(std::span(&ref, 1), 1ms);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "produce" && argc == 7) return produce(argv[2], argv[3], argv[4], argv[5], std::stoull(argv[6]));
  if (mode == "rpw" && argc == 7) return read_process_write(argv[2], argv[3], argv[4], argv[5], std::stoull(argv[6]));
  std::cerr << "usage: tx_kill_child produce BROKER PG_CONNINFO GROUP TOPIC SEED\n"
               "       tx_kill_child rpw BROKER IN_TOPIC OUT_TOPIC GROUP SEED\n";
  return 2;
}
