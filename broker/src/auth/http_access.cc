#include "auth/http_access.h"

#include <boost/beast/http/field.hpp>
#include <boost/json.hpp>

namespace txmq::broker::auth {

namespace {

common::http_response json_error(unsigned status, std::string_view code, std::string text) {
  boost::json::object o{{"error", code}, {"message", std::move(text)}};
  return common::http_response{status, "application/json", boost::json::serialize(o) + "\n", {}};
}

}  // namespace

common::http_access_hook make_http_access_hook(access_control& access) {
  common::http_access_hook hook;
  hook.authenticate = [&access](const common::http_request& req) -> std::variant<std::string, common::http_response> {
    auto it = req.headers.find(boost::beast::http::field::authorization);
    std::string_view value = it == req.headers.end() ? std::string_view() : std::string_view(it->value());
    std::string_view token;
    if (value.starts_with("Bearer ")) token = value.substr(7);
    std::optional<std::string> cert;
    if (req.cert_principal) cert = std::string(*req.cert_principal);
    if (auto principal = access.authenticate(token, cert)) return std::move(*principal);
    auto refused = json_error(401, "NOT_AUTHENTICATED",
                              token.empty() ? "send a principal's token as Authorization: Bearer TOKEN"
                                            : "the bearer token names no principal (wrong, or its principal was deleted)");
    refused.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"txmq\"");
    return refused;
  };
  hook.authorize = [&access](const std::string& principal,
                             const std::vector<common::http_access>& needs) -> std::optional<common::http_response> {
    std::vector<need> wanted;
    for (auto& n : needs) {
      auto p = parse_permission(n.permission);
      // A route declaring a permission the broker does not know is a bug: refuse, say which.
      if (!p) return json_error(500, "INTERNAL", "route needs unknown permission '" + n.permission + "'");
      wanted.push_back({*p, n.resource});
    }
    if (auto why = access.deny(principal, wanted)) return json_error(403, "NOT_AUTHORIZED", std::move(*why));
    return std::nullopt;
  };
  return hook;
}

}  // namespace txmq::broker::auth
