#pragma once

// Helpers for the transaction tests: what the broker still holds open, and everything a topic
// holds, read through a fresh consumer group.

#include <chrono>
#include <string>
#include <vector>

#include "txmq/v1/frame.pb.h"

namespace txmq::test {

// Transactions of the broker at `address` in `state` (PREPARED, ABANDONED, or
// TX_STATE_UNSPECIFIED for both); up to 10,000. Throws std::runtime_error on a failed request.
std::vector<v1::TxInfo> list_txs(const std::string& address, v1::TxState state = v1::TX_STATE_UNSPECIFIED);

// Waits until the broker has no unresolved transaction (or the deadline passes); returns how
// many are left.
std::size_t wait_all_resolved(const std::string& address, std::chrono::milliseconds deadline);

// Every message of `topic` from the earliest, acked, through a new group `group`; stops when a
// fetch waiting `quiet` returns nothing.
std::vector<v1::Message> drain_topic(const std::string& address, const std::string& topic, const std::string& group,
                                     std::chrono::milliseconds quiet = std::chrono::milliseconds(500));

}  // namespace txmq::test
