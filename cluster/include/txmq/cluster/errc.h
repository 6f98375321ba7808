#pragma once

// Errors of the cluster control plane (txmq::cluster): talking to etcd and acting on what it
// holds. Category "txmq.cluster"; each code says whether a retry can help.

#include <system_error>

#include "txmq/protocol/result.h"

namespace txmq::cluster {

enum class errc : int {
  etcd_unavailable = 1,  // no etcd endpoint answered in time (retriable: etcd may come back)
  etcd_error = 2,        // etcd answered with an error (its text is kept; e.g. a bad request)
  bad_response = 3,      // etcd's answer was not the JSON we expect (a gateway of another version?)
  lease_not_found = 4,   // the lease expired or was revoked: the session it carried is over
  compare_failed = 5,    // a transaction's compare did not hold: someone changed the key first
  not_controller = 6,    // this node no longer holds the controller key (a stale controller)
  invalid_argument = 7,  // a call with an argument refused before anything is sent
  not_found = 8,         // the key the call changes is not in etcd (a topic never created)
};

[[nodiscard]] const std::error_category& cluster_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), cluster_category()}; }

}  // namespace txmq::cluster

template <>
struct std::is_error_code_enum<txmq::cluster::errc> : std::true_type {};
