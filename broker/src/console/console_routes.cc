#include "console/console_routes.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <unordered_map>

#include "console/console_files.h"

namespace txmq::broker::console {

namespace http = boost::beast::http;

namespace {

// No 'unsafe-inline' anywhere: the console's markup holds no script or style attribute, and
// API data is only ever set as text, so an injected string cannot run.
constexpr std::string_view k_csp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// FNV-1a: a change of any byte changes the tag; collisions only cost a stale cache, and the
// tag also names the broker's version, so an upgrade always refetches.
std::string etag_of(std::string_view bytes) {
  std::uint64_t h = 14695981039346656037ull;
  for (const unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, "\"%016llx\"", static_cast<unsigned long long>(h));
  return buf;
}

struct served_file {
  const embedded_file* file;
  std::string etag;
};

common::http_response answer(const served_file& f, const common::http_request& req) {
  common::http_response r;
  r.content_type = std::string(f.file->content_type);
  r.headers = {{"Cache-Control", "no-cache"},
               {"ETag", f.etag},
               {"Content-Security-Policy", std::string(k_csp)},
               {"X-Content-Type-Options", "nosniff"},
               {"X-Frame-Options", "DENY"},
               {"Referrer-Policy", "no-referrer"}};
  const auto inm = req.headers.find(http::field::if_none_match);
  if (inm != req.headers.end() && inm->value() == f.etag) {
    r.status = 304;
    return r;
  }
  r.body = std::string(f.file->bytes);
  return r;
}

}  // namespace

std::string_view content_security_policy() { return k_csp; }

void register_routes(common::admin_http_server& server) {
  // Built once and shared by the handlers (read-only afterwards).
  auto by_path = std::make_shared<std::unordered_map<std::string, served_file>>();
  for (const auto& f : files()) {
    by_path->emplace(std::string(f.path), served_file{&f, etag_of(f.bytes)});
  }
  // "/" is a prefix of every path: it answers index.html for "/" itself and 404 for any other
  // path no longer route claims (the console routes by the URL's #fragment, never by path).
  // Open to all with auth on: a browser cannot send a bearer token for the page itself, and
  // the files hold no data; the console then asks for the token the API needs.
  server.add_route(http::verb::get, "/", [by_path](const common::http_request& req) {
    const std::string path = req.path == "/" ? std::string("/index.html") : std::string(req.path);
    const auto it = by_path->find(path);
    if (it == by_path->end()) {
      return common::http_response{404, "text/plain; charset=utf-8", "not found: " + std::string(req.path) + "\n", {}};
    }
    return answer(it->second, req);
  }, common::route_access::open_to_all());
}

}  // namespace txmq::broker::console
