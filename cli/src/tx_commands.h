#pragma once

// `txmq tx list|show|commit|rollback|prepare|checker`: transactions on the broker, inspected and
// resolved by an operator, plus the two test aids (an open transaction, a check-back answerer).
// Each command prints its result (a table, or JSON lines with --json) and returns the exit
// status. Private to txmq_cli.

#include <optional>
#include <string>

#include "session.h"
#include "txmq/protocol/message_id.h"

namespace txmq::cli::detail {

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
