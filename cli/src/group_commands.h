#pragma once

// `txmq group create|list|describe` and `txmq dlq list|redrive`: consumer groups and their dead
// letters on the broker, through client::admin. Each command prints its result (a table, or JSON
// lines with --json) and returns the exit status. Private to txmq_cli.

#include <cstdint>
#include <string>

#include "session.h"

namespace txmq::cli::detail {

int group_create(session& s, const std::string& group, const std::string& topic, bool from_latest);
int group_list(session& s);
int group_describe(session& s, const std::string& group);
int dlq_list(session& s, const std::string& group, std::uint32_t limit);
int dlq_redrive(session& s, const std::string& group);

}  // namespace txmq::cli::detail
