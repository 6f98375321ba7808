#pragma once

// `txmq produce` and `txmq consume`: messages into and out of a topic, through producer-lib and
// consumer-lib. Each command prints what it did (a table, or JSON lines with --json) and returns
// the exit status. Private to txmq_cli.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "session.h"
#include "txmq/protocol/message_id.h"

namespace txmq::cli::detail {

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

int produce(session& s, const produce_args& a);
int consume(session& s, const consume_args& a);

}  // namespace txmq::cli::detail
