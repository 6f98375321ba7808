#pragma once

// The txmq broker as a library: txmq-broker's main() parses the configuration and calls start();
// tests start brokers in-process the same way.
//
// Threading: the network, the request handlers and the consumer groups run on one io thread
// owned by the broker; the store runs its own writer and syncer threads. start(), stop(),
// wait() and the accessors are thread-safe.

#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>

#include "txmq/broker/config.h"
#include "txmq/protocol/result.h"

namespace txmq::broker {

class broker {
 public:
  // Opens the store at config.data_dir (refusing damaged data), loads the consumer groups and
  // binds the wire and admin HTTP listeners. The error's text says what failed, on what, and
  // what to do (port in use, store corrupt, ...).
  [[nodiscard]] static result<std::unique_ptr<broker>> start(const broker_config& config);

  ~broker();
  broker(const broker&) = delete;
  broker& operator=(const broker&) = delete;

  // Where the listeners are bound (the chosen port when the configuration asked for port 0).
  [[nodiscard]] boost::asio::ip::tcp::endpoint endpoint() const;
  [[nodiscard]] boost::asio::ip::tcp::endpoint http_endpoint() const;

  // Loads tls_cert_file/tls_key_file/tls_client_ca_file again (SIGHUP): new connections on both
  // ports use them, open ones keep theirs. On error the previous certificate stays, the error
  // is logged and returned. Without TLS it does nothing.
  result<void> reload_tls();

  // Shuts down in two steps: stop accepting and answer parked long polls, then close the
  // connections, finish the store's queued writes and close it. Idempotent.
  void stop();
  // Blocks until stop() has finished.
  void wait();

  struct impl;

 private:
  explicit broker(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace txmq::broker
