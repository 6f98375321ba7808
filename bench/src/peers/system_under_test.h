#pragma once

// The seam between the workloads (workloads/broker_bench.cc) and the systems they measure: txmq
// over its wire protocol, RabbitMQ through librabbitmq, NATS JetStream through libnats, and a
// PostgreSQL table used as a queue through libpq. A workload only sends batches of bodies, waits for their
// durable acknowledgement, and receives-and-acknowledges; each driver maps that onto its
// system's own client the way a careful user of that system would.
//
// Threading: one object is used by one thread at a time. A publisher and a consumer of the same
// system may run on two threads (each owns its own connection).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "txmq/client/connection.h"

namespace txmq::bench {

struct system_options {
  // txmq | rabbitmq-quorum | rabbitmq-classic | nats | pgqueue
  std::string system = "txmq";
  // txmq, RabbitMQ, NATS: HOST:PORT; pgqueue: a libpq connection string.
  std::string address;
  // The topic, queue, stream or table. Made by open_system(), removed by its destructor where
  // the system can remove it, so that every run starts empty.
  std::string name = "bench";
  std::uint32_t partitions = 4;  // txmq only
  std::uint32_t replicas = 0;    // txmq cluster only: the topic's replicas (0: the broker default)
  client::tls_options tls;       // txmq only: --tls, --tls-ca, --tls-cert, --tls-key
  std::string auth_token;        // txmq only: a principal's token for a broker with auth
};

class publisher {
 public:
  using completion = std::function<void(bool ok)>;
  virtual ~publisher() = default;
  // Publishes `bodies` durably (persistent, acknowledged once stored as the system stores
  // things) as one request where the system has multi-message requests (txmq produce, one SQL
  // INSERT), as pipelined single publishes otherwise. `done` runs inside poll() once every
  // message of the batch is acknowledged, with ok = false when any was refused.
  virtual void send(std::vector<std::string> bodies, completion done) = 0;
  // Runs the completions that are ready, waiting up to `max_wait` for the first one.
  virtual void poll(std::chrono::nanoseconds max_wait) = 0;
  // Batches sent whose completion has not run yet.
  [[nodiscard]] virtual std::size_t outstanding() const = 0;
};

class consumer {
 public:
  using delivery = std::function<void(std::string_view body)>;
  virtual ~consumer() = default;
  // Receives what is there (waiting up to `max_wait` when nothing is), hands each body to
  // `on_message` and acknowledges it (txmq ack, AMQP basic.ack, JetStream ack, SQL DELETE).
  // Returns how many messages it handed over; throws when the system reports an error.
  virtual std::size_t poll(std::chrono::nanoseconds max_wait, const delivery& on_message) = 0;
  // Waits until the acknowledgements sent so far are answered, where the system answers them.
  virtual void drain() {}
};

class system_under_test {
 public:
  virtual ~system_under_test() = default;
  // `max_requests`: how many send() batches the workload will keep in flight at most (the
  // PostgreSQL driver opens that many connections, as one INSERT runs per connection).
  [[nodiscard]] virtual std::unique_ptr<publisher> make_publisher(std::size_t max_requests) = 0;
  // A consumer reading the name from its start (a new consumer group, queue consumer,
  // durable pull consumer or table reader).
  [[nodiscard]] virtual std::unique_ptr<consumer> make_consumer() = 0;
  // One line on what "acknowledged" means for this system, printed with the figures.
  [[nodiscard]] virtual std::string durability() const = 0;
  // txmq in a cluster: the topic's replicas and the smallest ISR over its partitions, as the
  // cluster's Metadata answered once every partition had a leader (0 when not a cluster).
  struct replication_shape {
    std::uint32_t replicas = 0;
    std::uint32_t min_isr_size = 0;
  };
  [[nodiscard]] virtual replication_shape replication() const { return {}; }
};

// Connects to the system and creates the topic, queue, stream or table. Throws
// std::runtime_error naming the system and address when it cannot.
[[nodiscard]] std::unique_ptr<system_under_test> open_system(const system_options& options);

// The systems open_system() knows, for --help and errors.
[[nodiscard]] const std::vector<std::string>& known_systems();

namespace detail {
// A send() batch of a system that confirms message by message (RabbitMQ, NATS).
struct message_batch {
  std::size_t remaining;
  bool ok;
  publisher::completion done;
  // Settles one of its messages; true when that was the last.
  bool settle(bool message_ok) {
    ok = ok && message_ok;
    return --remaining == 0;
  }
};

// Runs the completions of finished batches. Called last in poll(), once the driver's own state
// is settled, because a completion may publish again.
inline void run_completions(std::vector<std::shared_ptr<message_batch>>& finished, std::size_t& outstanding) {
  for (auto& b : finished) {
    --outstanding;
    b->done(b->ok);
  }
}

std::unique_ptr<system_under_test> open_txmq(const system_options& options);
std::unique_ptr<system_under_test> open_rabbitmq(const system_options& options, bool quorum);
std::unique_ptr<system_under_test> open_nats(const system_options& options);
std::unique_ptr<system_under_test> open_pgqueue(const system_options& options);
}  // namespace detail

}  // namespace txmq::bench
