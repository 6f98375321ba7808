#pragma once

// The JSON of etcd 3.4's gateway, both ways: request bodies from our types, our types from its
// answers. Pure functions (no I/O), so the unit tests check them against answers captured from
// a real etcd. Gateway conventions: keys and values are base64, 64-bit numbers are JSON
// strings ("revision":"5"), and fields at their zero value are left out.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/value.hpp>

#include "txmq/cluster/errc.h"
#include "txmq/cluster/etcd_client.h"

namespace txmq::cluster::detail {

[[nodiscard]] std::string encode_range(std::string_view key, std::string_view range_end);
[[nodiscard]] std::string encode_put(std::string_view key, std::string_view value, std::int64_t lease);
[[nodiscard]] std::string encode_delete(std::string_view key, std::string_view range_end);
[[nodiscard]] std::string encode_txn(const txn_request& request);
[[nodiscard]] std::string encode_lease_grant(std::int64_t ttl_seconds);
[[nodiscard]] std::string encode_lease_id(std::int64_t id);  // keepalive and revoke
[[nodiscard]] std::string encode_watch_create(std::string_view key, std::string_view range_end,
                                              std::int64_t start_revision);

// A record under the cluster prefix that txmq cannot read (a topic, partition, principal or
// grant written by something else): bad_response saying what and why.
[[nodiscard]] inline error bad_value(std::string_view what, std::string_view why) {
  return {errc::bad_response, "etcd holds " + std::string(what) + " that txmq did not write: " + std::string(why)};
}

// Parses an answer's text into an object. Errors: bad_response.
[[nodiscard]] result<boost::json::object> parse_object(std::string_view text);
// A 64-bit field written either as a JSON string or a number; 0 when absent.
// Errors: bad_response naming the field.
[[nodiscard]] result<std::int64_t> get_int64(const boost::json::object& o, std::string_view field);

[[nodiscard]] result<range_result> decode_range(const boost::json::object& answer);
[[nodiscard]] result<std::int64_t> decode_revision(const boost::json::object& answer);  // header.revision
[[nodiscard]] result<std::int64_t> decode_deleted(const boost::json::object& answer);
[[nodiscard]] result<txn_result> decode_txn(const boost::json::object& answer);
[[nodiscard]] result<lease_grant_result> decode_lease_grant(const boost::json::object& answer);
// A keep-alive answer ({"result":{...}}): the new TTL; lease_not_found when TTL is absent or 0.
[[nodiscard]] result<std::chrono::seconds> decode_keepalive(const boost::json::object& answer);

// One message of a watch stream.
struct watch_message {
  bool created = false;
  bool canceled = false;
  std::int64_t revision = 0;          // header revision
  std::int64_t compact_revision = 0;  // set when the start revision was compacted
  std::string cancel_reason;
  std::vector<watch_event> events;
};
[[nodiscard]] result<watch_message> decode_watch_message(const boost::json::object& message);

// An error answer ({"error":..., "message":..., "code":N}, or a stream's {"error":{...}}) as
// etcd_error with etcd's text, or lease_not_found for a lease etcd does not know.
[[nodiscard]] error decode_error(unsigned http_status, std::string_view body);

}  // namespace txmq::cluster::detail
