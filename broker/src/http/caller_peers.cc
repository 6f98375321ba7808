// Kept connections per HTTP caller for the cluster views (caller_peers.h).

#include "http/caller_peers.h"

#include <algorithm>

#include "auth/access_control.h"

namespace txmq::broker::http_api {

caller_peers::caller_peers(boost::asio::io_context& io) : io_(io), sweeper_(io) {}

caller_peers::~caller_peers() { close(); }

cluster_mode::peer_pool& caller_peers::pool_for(const cluster_mode::peer_identity& base, const std::string& token) {
  const auto now = std::chrono::steady_clock::now();
  const std::string key = auth::sha256(token);
  auto it = pools_.find(key);
  if (it == pools_.end()) {
    if (pools_.size() >= k_max_callers) {
      auto oldest = std::min_element(pools_.begin(), pools_.end(),
                                     [](const auto& a, const auto& b) { return a.second.last_used < b.second.last_used; });
      opened_by_closed_ += oldest->second.pool->connections_opened();
      oldest->second.pool->close();
      pools_.erase(oldest);
    }
    cluster_mode::peer_identity id{base.tls, token, "txmq-http-view"};
    it = pools_.emplace(key, entry{std::make_unique<cluster_mode::peer_pool>(io_, std::move(id)), now}).first;
  }
  it->second.last_used = now;
  if (!sweeping_) {
    sweeping_ = true;
    sweeper_.expires_after(k_idle / 4);
    sweeper_.async_wait([this](boost::system::error_code ec) {
      sweeping_ = false;
      if (!ec) sweep();
    });
  }
  return *it->second.pool;
}

void caller_peers::sweep() {
  const auto now = std::chrono::steady_clock::now();
  for (auto it = pools_.begin(); it != pools_.end();) {
    if (now - it->second.last_used < k_idle) {
      ++it;
      continue;
    }
    opened_by_closed_ += it->second.pool->connections_opened();
    it->second.pool->close();
    it = pools_.erase(it);
  }
  if (pools_.empty() || sweeping_) return;
  sweeping_ = true;
  sweeper_.expires_after(k_idle / 4);
  sweeper_.async_wait([this](boost::system::error_code ec) {
    sweeping_ = false;
    if (!ec) sweep();
  });
}

void caller_peers::close() {
  sweeper_.cancel();
  for (auto& [key, e] : pools_) {
    opened_by_closed_ += e.pool->connections_opened();
    e.pool->close();
  }
  pools_.clear();
}

std::uint64_t caller_peers::connections_opened() const noexcept {
  std::uint64_t n = opened_by_closed_;
  for (const auto& [key, e] : pools_) n += e.pool->connections_opened();
  return n;
}

}  // namespace txmq::broker::http_api
