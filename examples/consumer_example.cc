// Consumes the "orders" topic as group "billing" until Ctrl-C, with 4 handler threads.
//
//   consumer_example [HOST:PORT]        (default 127.0.0.1:7878, or $TXMQ_BROKER)

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <stop_token>

#include "txmq/consumer/consumer.h"

namespace {
std::stop_source g_stop;
extern "C" void on_signal(int) { g_stop.request_stop(); }
}  // namespace

int main(int argc, char** argv) {
  txmq::consumer::consumer_options options;
  if (argc > 1) {
    options.connection.address = argv[1];
  } else if (const char* env = std::getenv("TXMQ_BROKER")) {
    options.connection.address = env;
  }
  options.connection.client_id = "consumer-example";
  options.group = "billing";
  options.topics = {"orders"};
  options.concurrency = 4;  // up to 4 handlers at once; one key never runs twice at once
  options.log = [](std::string_view line) { std::cerr << "consumer: " << line << "\n"; };
  txmq::consumer::consumer consumer(options);

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  std::mutex out;
  // Returning success acks the message; an error (or an exception) nacks it, and the broker
  // redelivers it on the group's retry schedule, with attempt + 1. Delivery is at-least-once,
  // so the handler should be idempotent (use the message id to recognise a redelivery).
  auto handler = [&](const txmq::consumer::delivery& d) -> txmq::consumer::handler_result {
    if (d.message.body().empty()) {
      return txmq::client::error(txmq::client::errc::invalid_argument, "empty order event");
    }
    std::lock_guard lock(out);
    std::cout << d.id().to_string() << " " << d.message.topic() << "/" << d.message.partition() << "@"
              << d.message.offset() << " attempt " << d.attempt() << ": " << d.message.body() << "\n";
    return txmq::outcome::success();
  };

  // Survives broker restarts; returns on Ctrl-C or on an error retrying cannot fix.
  auto result = consumer.run(handler, g_stop.get_token());
  if (!result) {
    std::cerr << "consumer stopped: " << result.error() << "\n";
    return 1;
  }
  return 0;
}
