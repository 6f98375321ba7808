#pragma once

// The clients of the network fault tests (link_cut_test, proxy_fault_test): a producer stream
// (~500 messages a second to topic NAME), a consumer (group NAME) and a transactional producer
// (producer group NAME-tx, topic NAME-tx: each transaction's one message body is its txid; the
// local transaction commits 3 in 4) whose checker answers from those local decisions. All of
// them reconnect by themselves (dead_link_timeout 3 s, request_timeout 3 s).
//
// finish() stops the streams, waits for every acknowledged message to be consumed and every
// transaction to be resolved (by its EndTx or the check-back), reads the tx topic back and
// compares: nothing acknowledged lost, nothing invented, no transaction decided against its
// local outcome, none published twice.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stop_token>
#include <string>
#include <thread>

#include "txmq/consumer/consumer.h"
#include "txmq/producer/producer.h"
#include <gtest/gtest.h>

#include "txmq/producer/transaction.h"

namespace txmq::test {

struct workload_result {
  std::size_t acknowledged = 0, consumed = 0, lost = 0, invented = 0;
  std::size_t deliveries = 0, send_failures = 0;
  bool all_consumed = false;  // every acknowledged message consumed before the deadline
  std::size_t tx_total = 0, tx_committed_locally = 0, tx_published = 0;
  std::size_t tx_missing = 0;  // committed locally, never published
  std::size_t tx_against = 0;  // published although rolled back locally (or never begun)
  std::size_t tx_doubled = 0, tx_request_errors = 0, unresolved = 0;
  int client_connects = 0, client_losses = 0;

  // " deliveries=... tx_total=... client_losses=..." for print_fault_counts.
  [[nodiscard]] std::string extra() const;
};

// The verdict every network fault test asks of finish(): all consumed, nothing lost or
// invented, every transaction settled as its local transaction decided, none twice. `clients`
// is the clients' log tail, shown when something was not consumed.
inline void expect_nothing_lost_nor_decided_wrongly(const workload_result& r, const std::string& clients = {}) {
  EXPECT_TRUE(r.all_consumed) << "the clients said:\n" << clients;
  EXPECT_EQ(r.lost, 0u);
  EXPECT_EQ(r.invented, 0u);
  EXPECT_EQ(r.unresolved, 0u);
  EXPECT_EQ(r.tx_missing, 0u) << "committed locally, never published";
  EXPECT_EQ(r.tx_against, 0u) << "published although rolled back locally (or never begun)";
  EXPECT_EQ(r.tx_doubled, 0u);
  EXPECT_GT(r.tx_committed_locally, 10u);
}

class client_workload {
 public:
  // Starts the three clients against `address`, naming topics and groups after `name`.
  client_workload(const std::string& address, const std::string& name);
  ~client_workload();
  client_workload(const client_workload&) = delete;
  client_workload& operator=(const client_workload&) = delete;

  [[nodiscard]] std::size_t acknowledged() const;
  [[nodiscard]] std::size_t consumed() const;
  [[nodiscard]] int connects() const { return connects_.load(); }
  // The clients' last log lines (connects, losses, timeouts), for a failing test's message.
  [[nodiscard]] std::string log_tail() const;

  // Stops the streams and checks as described above; `verify_address` is where the broker is
  // read back (directly, not through a fault). Waits at most about 4 × `deadline`.
  workload_result finish(const std::string& verify_address, std::chrono::seconds deadline);

 private:
  void stop_threads();

  std::string name_;
  mutable std::mutex mu_;
  std::set<std::string> sent_, acked_, consumed_;
  std::size_t send_failures_ = 0, deliveries_ = 0, tx_errors_ = 0;
  std::map<std::string, producer::tx_decision> local_;
  std::deque<std::string> log_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();  // txid -> the local transaction's outcome
  std::chrono::steady_clock::time_point last_run_error_{};  // the consumer thread only
  std::atomic<int> connects_{0}, losses_{0};
  std::stop_source stop_, stop_consumer_;
  std::unique_ptr<consumer::consumer> consumer_;
  std::unique_ptr<producer::producer> producer_;
  std::unique_ptr<producer::transactional_producer> txp_;
  std::thread consumer_thread_, producer_thread_, tx_thread_;
  std::atomic<int> next_{0};
};

}  // namespace txmq::test
