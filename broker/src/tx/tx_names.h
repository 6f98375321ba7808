#pragma once

// How a transaction's state and resolver are named: on the wire, in error texts and logs, and
// in metric labels. Private to tx/.

#include <optional>

#include "txmq/storage/store.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::broker::detail {

inline v1::TxState wire_state(storage::tx_state s) {
  switch (s) {
    case storage::tx_state::prepared: return v1::PREPARED;
    case storage::tx_state::committed: return v1::COMMITTED;
    case storage::tx_state::rolled_back: return v1::ROLLED_BACK;
    case storage::tx_state::abandoned: return v1::ABANDONED;
  }
  return v1::TX_STATE_UNSPECIFIED;
}

inline v1::TxResolver wire_resolver(std::optional<storage::resolver> r) {
  if (!r) return v1::TX_RESOLVER_UNSPECIFIED;
  switch (*r) {
    case storage::resolver::producer: return v1::RESOLVED_BY_PRODUCER;
    case storage::resolver::check: return v1::RESOLVED_BY_CHECK;
    case storage::resolver::operator_: return v1::RESOLVED_BY_OPERATOR;
  }
  return v1::TX_RESOLVER_UNSPECIFIED;
}

inline const char* state_text(storage::tx_state s) {
  switch (s) {
    case storage::tx_state::prepared: return "prepared";
    case storage::tx_state::committed: return "committed";
    case storage::tx_state::rolled_back: return "rolled back";
    case storage::tx_state::abandoned: return "abandoned";
  }
  return "?";
}

inline const char* resolver_label(storage::resolver r) {
  switch (r) {
    case storage::resolver::producer: return "producer";
    case storage::resolver::check: return "check";
    case storage::resolver::operator_: return "operator";
  }
  return "?";
}

inline const char* resolver_text(storage::resolver r) {
  switch (r) {
    case storage::resolver::producer: return "by its producer (EndTx)";
    case storage::resolver::check: return "by a check-back answer";
    case storage::resolver::operator_: return "by an operator";
  }
  return "";
}

}  // namespace txmq::broker::detail
