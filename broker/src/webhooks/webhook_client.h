#pragma once

// The notifier's HTTP/1.1 client (Boost.Beast, C++20 coroutines on the broker's io thread):
// POSTs one request to one endpoint with a deadline covering connect, TLS handshake, write and
// read. HTTPS verifies the certificate chain (default verify paths, plus webhook_ca_file) and
// the host name, with SNI. Every address is checked by the egress guard after DNS and only the
// addresses that passed are connected to (never resolved again in between). Redirects are not
// followed (a 3xx is an answer like any other non-2xx). Each endpoint keeps a small pool of idle keep-alive connections;
// a request that fails on a reused connection before any answer is retried once on a new one
// (the server may have closed it meanwhile).
//
// Not thread-safe: one owner thread (the io thread). Name resolution runs on Asio's resolver
// thread, never blocking the io thread.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/http.hpp>

#include "webhooks/egress_guard.h"
#include "webhooks/webhook_signer.h"

namespace txmq::broker {

struct webhook_response {
  unsigned status = 0;       // 0: no answer (error says why)
  std::string retry_after;   // the Retry-After header, if any
  std::string error;         // connection, TLS or timeout error
  bool timed_out = false;
  bool blocked = false;      // the egress guard refused every address of the host
};

class webhook_endpoint {
 public:
  // `tls_context` is used for https URLs and `guard` checks every address before a connect;
  // both must outlive the endpoint.
  webhook_endpoint(boost::asio::any_io_executor ex, boost::asio::ssl::context& tls_context, const egress_guard& guard,
                   webhook_url url, std::size_t max_idle);
  ~webhook_endpoint();

  // Sends `req` (method, target and Host are set here) and reads the answer head and body.
  boost::asio::awaitable<webhook_response> post(boost::beast::http::request<boost::beast::http::string_body> req,
                                                std::chrono::milliseconds timeout);

  // Closes the idle connections (requests in progress finish on their own).
  void close_idle();
  [[nodiscard]] const webhook_url& url() const noexcept { return url_; }

 private:
  struct conn;
  boost::asio::awaitable<std::unique_ptr<conn>> open(std::chrono::steady_clock::time_point deadline,
                                                     webhook_response& out);
  boost::asio::awaitable<bool> exchange(conn& c, boost::beast::http::request<boost::beast::http::string_body>& req,
                                        std::chrono::steady_clock::time_point deadline, webhook_response& out);

  boost::asio::any_io_executor ex_;
  boost::asio::ssl::context& tls_;
  const egress_guard& guard_;
  webhook_url url_;
  std::size_t max_idle_;
  std::vector<std::unique_ptr<conn>> idle_;
};

}  // namespace txmq::broker
