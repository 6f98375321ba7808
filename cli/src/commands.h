#pragma once

// The commands of the CLI, each given its parsed arguments. Private to txmq_cli.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "txmq/cli/app.h"
#include "txmq/client/connection.h"
#include "txmq/client/error.h"
#include "txmq/protocol/message_id.h"

namespace txmq::cli::detail {

// What every command shares: where the output goes, the broker, the connection (made on first
// use).
class session {
 public:
  session(environment& env, bool json, std::string broker, std::chrono::milliseconds connect_timeout,
          std::chrono::milliseconds timeout)
      : env_(env), json_(json), broker_(std::move(broker)), connect_timeout_(connect_timeout), timeout_(timeout) {}

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
  environment& env_;
  bool json_;
  std::string broker_;
  std::chrono::milliseconds connect_timeout_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<client::connection> conn_;
};

struct produce_args {
  std::string topic;
  std::optional<std::string> key;
  std::map<std::string, std::string> headers;
  std::optional<protocol::message_id> id;
  std::optional<std::string> body;  // absent: one message per input line
};

struct consume_args {
  std::string topic;
  std::string group;
  std::uint64_t max = 0;  // 0: no limit
  std::chrono::milliseconds wait{1000};
  bool no_ack = false;
};

int topic_create(session& s, const std::string& name, std::uint32_t partitions);
int topic_list(session& s);
int topic_describe(session& s, const std::string& name);
int produce(session& s, const produce_args& a);
int consume(session& s, const consume_args& a);
int group_create(session& s, const std::string& group, const std::string& topic, bool from_latest);
int group_list(session& s);
int group_describe(session& s, const std::string& group);
int dlq_list(session& s, const std::string& group, std::uint32_t limit);
int dlq_redrive(session& s, const std::string& group);

struct tx_list_args {
  std::string state = "unresolved";  // prepared | abandoned | all | unresolved (the default)
  std::string topic;
};

struct tx_prepare_args {
  std::string topic;
  std::string body;
  std::string group;
  std::optional<std::string> key;
};

int tx_list(session& s, const tx_list_args& a);
int tx_show(session& s, const protocol::txid& txid);
int tx_resolve(session& s, const protocol::txid& txid, bool commit);
int tx_prepare(session& s, const tx_prepare_args& a);
// answer: "commit", "rollback" or "unknown".
// Answers the group's check-backs until SIGINT/SIGTERM: from the barrier table in pg_conninfo
// when it is not empty, else with the fixed answer.
int tx_checker(session& s, const std::string& group, const std::string& answer, const std::string& pg_conninfo);

}  // namespace txmq::cli::detail
