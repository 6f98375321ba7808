#include "session.h"

#include <utility>

namespace txmq::cli::detail {

std::shared_ptr<client::connection> session::connect() {
  if (!conn_) conn_ = open_connection("");
  return conn_;
}

std::shared_ptr<client::connection> session::connect_as_producer(const std::string& producer_group) {
  return open_connection(producer_group);
}

std::shared_ptr<client::connection> session::open_connection(const std::string& producer_group) {
  client::connection_options o;
  o.address = broker_;
  o.client_id = "txmq-cli";
  o.producer_group = producer_group;
  o.auth_token = token_;
  o.connect_timeout = connect_timeout_;
  o.request_timeout = timeout_;
  o.tls = tls_;
  auto c = client::connection::connect(std::move(o));
  if (!c && c.error().is(client::errc::tls_failed)) {
    fail("cannot reach the broker at " + broker_ + " over TLS", c.error());
    return nullptr;
  }
  if (!c && c.error().is(protocol::errc::not_authenticated)) {
    fail("the broker at " + broker_ + " refused the token (pass --token, --token-file or TXMQ_TOKEN)", c.error());
    return nullptr;
  }
  if (!c) {
    fail("cannot reach the broker at " + broker_ + " (check --broker or TXMQ_BROKER, and that txmq-broker runs)",
         c.error());
    return nullptr;
  }
  return std::move(c).value();
}

int session::fail(const std::string& what, const client::error& e) { return fail(what + ": " + e.to_string()); }

int session::fail(const std::string& what) {
  env_.out.flush();
  env_.err << "txmq: " << what << '\n';
  env_.err.flush();
  return exit_failure;
}

}  // namespace txmq::cli::detail
