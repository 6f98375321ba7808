// Publishes a few order events to a txmq broker and prints where each was stored.
//
//   producer_example [HOST:PORT]        (default 127.0.0.1:7878, or $TXMQ_BROKER)

#include <cstdlib>
#include <future>
#include <iostream>
#include <vector>

#include "txmq/producer/producer.h"

int main(int argc, char** argv) {
  txmq::producer::producer_options options;
  if (argc > 1) {
    options.connection.address = argv[1];
  } else if (const char* env = std::getenv("TXMQ_BROKER")) {
    options.connection.address = env;
  }
  options.connection.client_id = "producer-example";
  // Messages sent within 5 ms of each other share one ProduceRequest (and one fsync).
  options.linger = std::chrono::milliseconds(5);
  txmq::producer::producer producer(options);

  // One blocking send: returns once the broker has stored the message durably.
  txmq::producer::outgoing_message first;
  first.topic = "orders";
  first.key = "customer-42";  // same key -> same partition -> consumed in order
  first.headers = {{"type", "order.created"}};
  first.body = R"({"order":1001,"total":"19.90"})";
  auto stored = producer.send(first);
  if (!stored) {
    // The broker's own words, e.g. "UNKNOWN_TOPIC: no topic 'orders' ...".
    std::cerr << "send failed: " << stored.error() << "\n";
    return 1;
  }
  std::cout << stored.value().id.to_string() << " partition " << stored.value().partition << " offset "
            << stored.value().offset << "\n";

  // Many asynchronous sends: batched per topic; send blocks only when 10,000 are in flight.
  std::vector<std::future<txmq::client::result<txmq::producer::send_result>>> pending;
  for (int i = 0; i < 100; ++i) {
    txmq::producer::outgoing_message m;
    m.topic = "orders";
    m.key = "customer-" + std::to_string(i % 10);
    m.body = R"({"order":)" + std::to_string(2000 + i) + "}";
    pending.push_back(producer.async_send(std::move(m)));
  }
  int failed = 0;
  for (auto& f : pending) {
    auto r = f.get();  // retried with the same id on connection loss, up to the delivery timeout
    if (!r) {
      std::cerr << "send failed: " << r.error() << "\n";
      ++failed;
    }
  }
  std::cout << pending.size() - failed << " of " << pending.size() << " messages stored\n";
  producer.close();  // waits for anything still lingering
  return failed == 0 ? 0 : 1;
}
