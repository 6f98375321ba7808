#pragma once

// The session every command of the CLI is given. Private to txmq_cli.

#include <chrono>
#include <memory>
#include <string>

#include "txmq/cli/app.h"
#include "txmq/client/connection.h"
#include "txmq/client/error.h"

namespace txmq::cli::detail {

// What every command shares: where the output goes, the broker, the connection (made on first
// use).
class session {
 public:
  // `token`: the principal's token (--token, --token-file, TXMQ_TOKEN), empty for none. It goes
  // into the Hello only; never printed.
  session(environment& env, bool json, std::string broker, std::chrono::milliseconds connect_timeout,
          std::chrono::milliseconds timeout, std::string token = {}, client::tls_options tls = {})
      : env_(env),
        json_(json),
        broker_(std::move(broker)),
        connect_timeout_(connect_timeout),
        timeout_(timeout),
        token_(std::move(token)),
        tls_(std::move(tls)) {}

  [[nodiscard]] environment& env() noexcept { return env_; }
  [[nodiscard]] bool json() const noexcept { return json_; }
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return timeout_; }

  // The connection, after a handshake; nullptr after reporting why there is none.
  [[nodiscard]] std::shared_ptr<client::connection> connect();
  // A connection of its own whose Hello declares producer_group (tx checker).
  [[nodiscard]] std::shared_ptr<client::connection> connect_as_producer(const std::string& producer_group);

  // Writes "txmq: <what>: <error>" to err and returns exit_failure.
  int fail(const std::string& what, const client::error& e);
  int fail(const std::string& what);

 private:
  // A handshaken connection whose Hello declares producer_group (empty: none), or nullptr
  // after reporting why there is none.
  std::shared_ptr<client::connection> open_connection(const std::string& producer_group);

  environment& env_;
  bool json_;
  std::string broker_;
  std::chrono::milliseconds connect_timeout_;
  std::chrono::milliseconds timeout_;
  std::string token_;
  client::tls_options tls_;
  std::shared_ptr<client::connection> conn_;
};

}  // namespace txmq::cli::detail
