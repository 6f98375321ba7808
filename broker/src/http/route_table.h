#pragma once

// Private to broker/src/http: the route table with its handlers (http_routes.cc) and what the
// handlers share with the gateway (http_api.cc).

#include <map>
#include <string>
#include <vector>

#include <boost/asio/awaitable.hpp>
#include <boost/json/value.hpp>

#include "http/http_api.h"

namespace txmq::broker::http_api {

struct route_context {
  gateway& gw;
  const common::http_request& req;
  std::map<std::string, std::string, std::less<>> params;  // path parameters, decoded
  std::map<std::string, std::string, std::less<>> query;   // query parameters, decoded
};

using route_handler = boost::asio::awaitable<common::http_response> (*)(route_context&);

struct route {
  route_info info;
  route_handler handler;
};

[[nodiscard]] const std::vector<route>& route_table();

// Matches `path` (its segments decoded) against `pattern`; fills `params` on success.
[[nodiscard]] bool match_pattern(std::string_view pattern, const std::vector<std::string>& segments,
                                 std::map<std::string, std::string, std::less<>>& params);

[[nodiscard]] common::http_response json_answer(unsigned status, const boost::json::value& v);
[[nodiscard]] common::http_response error_answer(v1::ErrorCode code, std::string message);
[[nodiscard]] common::http_response error_answer(const v1::Error& e);

}  // namespace txmq::broker::http_api
