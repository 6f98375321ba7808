#pragma once

// `txmq topic create|alter|list|describe`: topics on the broker, through client::admin. Each command
// prints its result (a table, or JSON lines with --json) and returns the exit status. Private to
// txmq_cli.

#include <cstdint>
#include <string>

#include "session.h"
#include "txmq/client/admin.h"

namespace txmq::cli::detail {

int topic_create(session& s, const client::topic_spec& spec);
int topic_alter(session& s, const v1::AlterTopicRequest& req);
int topic_list(session& s);
int topic_describe(session& s, const std::string& name);

}  // namespace txmq::cli::detail
