#pragma once

// A link that drops every packet (a pulled cable, a partition, a frozen peer host) gives TCP no
// reset: without this, a request waits for its timeout and the connection stays "up" for the
// kernel's ~15 minutes of retransmissions. TCP keepalive probes after `timeout` / 3 of silence
// and TCP_USER_TIMEOUT bound unacknowledged data to `timeout`, so the connection fails within
// about `timeout` and the client reconnects (docs/operations.md).

#include <sys/socket.h>

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <algorithm>
#include <chrono>

#include <boost/asio/ip/tcp.hpp>

namespace txmq::client::detail {

inline void apply_dead_link_timeout(boost::asio::ip::tcp::socket& socket, std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return;
  const int fd = socket.native_handle();
  const int on = 1;
  const int idle = std::max(1, static_cast<int>(timeout.count() / 3000));  // seconds
  const int count = 3;
  const unsigned user_timeout = static_cast<unsigned>(timeout.count());
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof idle);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
}

}  // namespace txmq::client::detail
