// One kept connection per peer broker for forwarded transaction requests (peer_pool.h).

#include "cluster_mode/peer_pool.h"

#include <cstdlib>
#include <deque>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "txmq/common/log.h"
#include "txmq/common/metrics.h"
#include "txmq/protocol/errc.h"
#include "txmq/protocol/frame_codec.h"

// GCC 12: see replication_follower.cc (Asio's matched awaitable frame new/delete).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace txmq::broker::cluster_mode {

namespace asio = boost::asio;
using clock = std::chrono::steady_clock;

namespace {
// Connect, TLS handshake and Hello together: a peer that accepts and then hangs (SIGSTOP) must
// not hold the requests waiting for the connection longer than a request's own deadline would.
constexpr std::chrono::milliseconds k_connect_deadline{5'000};
// Requests written and not yet answered on one connection: half the peer's default
// max_in_flight_per_connection (1024), whose refusals would only come back as retries. More
// wait unwritten until answers come back.
constexpr std::size_t k_max_in_flight = 512;
}  // namespace

struct peer_pool::channel : std::enable_shared_from_this<peer_pool::channel> {
  struct pending {
    std::function<void(result<v1::Frame>)> done;
    std::unique_ptr<asio::steady_timer> timer;
    std::uint64_t link_generation = 0;  // 0: not written yet
    clock::time_point sent_at{};
  };

  channel(asio::io_context& io, const peer_identity& id, std::string address, std::function<void()> on_open)
      : io(io), id(id), address(std::move(address)), on_open(std::move(on_open)) {}

  asio::io_context& io;
  peer_identity id;
  std::string address;
  std::function<void()> on_open;
  std::shared_ptr<peer_link> link;
  std::uint64_t generation = 0;  // of `link`; a reader or writer of an older one stops
  bool connecting = false;
  std::uint64_t writing = 0;  // the generation whose writer runs, 0: none
  bool closed = false;
  clock::time_point last_read{};
  std::uint64_t next_corr = 0;
  std::size_t in_flight = 0;  // written on `link` and not answered
  std::unordered_map<std::uint64_t, pending> open;  // by correlation id
  std::deque<std::pair<std::uint64_t, std::string>> unsent;

  void add(v1::Frame request, std::chrono::milliseconds deadline, std::function<void(result<v1::Frame>)> done) {
    const std::uint64_t corr = ++next_corr;
    request.set_correlation_id(corr);
    std::string bytes;
    if (auto r = protocol::encode_frame(request, bytes); !r) {
      asio::post(io, [done = std::move(done), e = r.error()] { done(e); });
      return;
    }
    pending p;
    p.done = std::move(done);
    p.timer = std::make_unique<asio::steady_timer>(io, deadline);
    p.timer->async_wait([self = shared_from_this(), corr](boost::system::error_code ec) {
      if (!ec) self->timed_out(corr);
    });
    open.emplace(corr, std::move(p));
    unsent.emplace_back(corr, std::move(bytes));
    kick();
  }

  // Answers one request (and forgets it).
  void answer(std::uint64_t corr, result<v1::Frame> r) {
    auto it = open.find(corr);
    if (it == open.end()) return;
    auto p = std::move(it->second);
    open.erase(it);
    p.timer->cancel();
    if (p.link_generation != 0 && p.link_generation == generation && link && in_flight > 0) {
      --in_flight;
      if (!unsent.empty()) kick();
    }
    p.done(std::move(r));
  }

  void timed_out(std::uint64_t corr) {
    auto it = open.find(corr);
    if (it == open.end()) return;
    const bool silent_link = it->second.link_generation != 0 && it->second.link_generation == generation &&
                             last_read < it->second.sent_at;
    answer(corr, error(protocol::errc::internal, "broker " + address + " did not answer in time"));
    if (silent_link) drop_link(generation, "no answer, nothing read since the request was sent");
  }

  // The link of `gen` failed: the requests written on it fail (their outcome is unknown to
  // us; each caller retries the same idempotent step), those not yet written wait for the next.
  void drop_link(std::uint64_t gen, const std::string& why) {
    if (gen != generation || !link) return;
    link->close();
    link.reset();
    in_flight = 0;
    common::log::debug("peer connection to ", address, " dropped: ", why);
    std::vector<std::uint64_t> sent;
    for (auto& [corr, p] : open) {
      if (p.link_generation == gen) sent.push_back(corr);
    }
    for (auto corr : sent) answer(corr, error(protocol::errc::internal, "connection to broker " + address + ": " + why));
    if (!unsent.empty()) kick();
  }

  void fail_unsent(const error& e) {
    auto waiting = std::move(unsent);
    unsent.clear();
    for (auto& [corr, bytes] : waiting) answer(corr, e);
  }

  void kick() {
    if (closed) return;
    if (!link) {
      if (connecting || unsent.empty()) return;
      connecting = true;
      asio::co_spawn(io, connect(shared_from_this()), asio::detached);
      return;
    }
    if (writing != generation && !unsent.empty()) {
      writing = generation;
      asio::co_spawn(io, write_loop(shared_from_this(), link, generation), asio::detached);
    }
  }

  static asio::awaitable<void> connect(std::shared_ptr<channel> self) {
    auto made = co_await connect_peer(self->io, self->id, self->address, k_connect_deadline);
    self->connecting = false;
    if (self->closed) {
      if (made) made.value()->close();
      co_return;
    }
    if (!made) {
      common::log::debug("peer connection to ", self->address, " failed: ", made.error().message);
      self->fail_unsent(made.error());
      co_return;
    }
    self->link = std::move(made).value();
    const std::uint64_t gen = ++self->generation;
    self->last_read = clock::now();
    if (self->on_open) self->on_open();
    asio::co_spawn(self->io, read_loop(self, self->link, gen), asio::detached);
    self->kick();
  }

  static asio::awaitable<void> write_loop(std::shared_ptr<channel> self, std::shared_ptr<peer_link> link,
                                          std::uint64_t gen) {
    while (!self->closed && self->link == link && !self->unsent.empty() && self->in_flight < k_max_in_flight) {
      auto [corr, bytes] = std::move(self->unsent.front());
      self->unsent.pop_front();
      auto it = self->open.find(corr);
      if (it == self->open.end()) continue;  // timed out before it was written
      it->second.link_generation = gen;
      it->second.sent_at = clock::now();
      ++self->in_flight;
      const auto ec = co_await link->write_frame(bytes);
      if (ec) {
        if (self->writing == gen) self->writing = 0;
        self->drop_link(gen, "write failed: " + ec.message());
        co_return;
      }
    }
    if (self->writing == gen) self->writing = 0;
    // A new link may have been made while this one wrote: its writer starts now.
    self->kick();
  }

  static asio::awaitable<void> read_loop(std::shared_ptr<channel> self, std::shared_ptr<peer_link> link,
                                         std::uint64_t gen) {
    for (;;) {
      auto frame = co_await link->read_frame();
      if (gen != self->generation) co_return;  // dropped meanwhile: its requests were answered
      if (!frame) {
        self->drop_link(gen, frame.error().message);
        co_return;
      }
      self->last_read = clock::now();
      const std::uint64_t corr = frame.value().correlation_id();
      self->answer(corr, std::move(frame).value());
    }
  }

  void shut() {
    closed = true;
    on_open = nullptr;
    if (link) link->close();
    link.reset();
    ++generation;
    std::vector<std::uint64_t> all;
    for (auto& [corr, p] : open) all.push_back(corr);
    unsent.clear();
    for (auto corr : all) answer(corr, error(protocol::errc::shutting_down, "shutting down"));
  }
};

peer_pool::peer_pool(asio::io_context& io, peer_identity id, common::counter* opened)
    : io_(io), id_(std::move(id)), opened_(opened) {}

peer_pool::~peer_pool() { close(); }

void peer_pool::request(const std::string& address, v1::Frame request, std::chrono::milliseconds deadline,
                        std::function<void(result<v1::Frame>)> done) {
#ifdef TXMQ_FAULT_HOOKS
  // Test builds: TXMQ_TEST_PEER_FRESH_CONNECTIONS=1 sends each request over a connection of its
  // own, closed after its answer, as before the pool (docs/BENCHMARKS.md "Cluster": the
  // before/after count of txmq_peer_connections_opened_total). Counted as opened each time.
  static const bool fresh = [] {
    const char* v = std::getenv("TXMQ_TEST_PEER_FRESH_CONNECTIONS");
    return v != nullptr && std::string_view(v) == "1";
  }();
  if (fresh) {
    ++opened_count_;
    if (opened_) opened_->inc();
    return peer_request(io_, id_, address, std::move(request), deadline, std::move(done));
  }
#endif
  auto& ch = channels_[address];
  if (!ch) {
    ch = std::make_shared<channel>(io_, id_, address, [this, address] {
      ++opened_count_;
      if (opened_) opened_->inc();
      common::log::debug("peer connection to ", address, " opened (", opened_count_, " so far)");
    });
  }
  ch->add(std::move(request), deadline, std::move(done));
}

void peer_pool::close() {
  for (auto& [address, ch] : channels_) ch->shut();
  channels_.clear();
}

}  // namespace txmq::broker::cluster_mode
