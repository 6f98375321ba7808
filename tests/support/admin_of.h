#pragma once

// An admin client of one broker, on a connection of its own: what the relay tests set topics,
// principals and grants up with before the relay starts.

#include <memory>
#include <string>

#include "broker_process.h"
#include "txmq/client/admin.h"
#include "txmq/client/connection.h"

namespace txmq::test {

inline client::admin admin_of(const std::string& address, const std::string& token = "") {
  client::connection_options o;
  o.address = address;
  o.auth_token = token;
  return client::admin(std::make_shared<client::connection>(o));
}

inline client::admin admin_of(const broker_process& b, const std::string& token = "") {
  return admin_of(b.address(), token);
}

}  // namespace txmq::test
