// Broker-to-broker requests (peer_request.h).

#include "cluster_mode/peer_request.h"

#include <array>
#include <span>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "txmq/common/address.h"
#include "txmq/protocol/errc.h"

// GCC 12's -Wmismatched-new-delete on Asio's coroutine frames: see replication_follower.cc.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace txmq::broker::cluster_mode {

namespace asio = boost::asio;
using asio::ip::tcp;

asio::awaitable<result<v1::Frame>> exchange(asio::io_context& io, const std::shared_ptr<tcp::socket>& s,
                                            protocol::frame_reader& reader, const v1::Frame& request,
                                            std::chrono::milliseconds deadline) {
  std::string out;
  if (auto r = protocol::encode_frame(request, out); !r) co_return r.error();
  asio::steady_timer timer(io, deadline);
  timer.async_wait([s](boost::system::error_code ec) {
    if (!ec) s->close(ec);
  });
  boost::system::error_code ec;
  co_await asio::async_write(*s, asio::buffer(out), asio::redirect_error(asio::use_awaitable, ec));
  std::array<std::byte, 64 * 1024> buf{};
  while (!ec) {
    auto next = reader.next();
    if (!next) {
      timer.cancel();
      co_return next.error();
    }
    if (next.value()) {
      timer.cancel();
      co_return std::move(*next.value());
    }
    const std::size_t n = co_await s->async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) reader.feed(std::span<const std::byte>(buf.data(), n));
  }
  timer.cancel();
  co_return error(protocol::errc::internal, "peer connection: " + ec.message());
}

asio::awaitable<result<std::shared_ptr<tcp::socket>>> connect_peer(asio::io_context& io, const std::string& address,
                                                                   const std::string& client_id,
                                                                   protocol::frame_reader& reader, std::uint64_t& corr,
                                                                   std::chrono::milliseconds deadline) {
  auto hp = common::parse_host_port(address);
  if (address.empty() || !hp) co_return error(protocol::errc::internal, "no address for the peer '" + address + "'");
  auto sock = std::make_shared<tcp::socket>(io);
  tcp::resolver resolver(io);
  boost::system::error_code ec;
  auto eps = co_await resolver.async_resolve(hp.value().host, std::to_string(hp.value().port),
                                             asio::redirect_error(asio::use_awaitable, ec));
  if (!ec) {
    // Bounded like a request: a peer that does not answer the SYN cannot hold the caller.
    asio::steady_timer timer(io, deadline);
    timer.async_wait([sock](boost::system::error_code e) {
      if (!e) sock->close(e);
    });
    co_await asio::async_connect(*sock, eps, asio::redirect_error(asio::use_awaitable, ec));
    timer.cancel();
  }
  if (ec) co_return error(protocol::errc::internal, "connecting to " + address + ": " + ec.message());
  sock->set_option(tcp::no_delay(true), ec);
  reader = protocol::frame_reader();
  v1::Frame hello;
  hello.set_correlation_id(++corr);
  hello.mutable_hello()->set_protocol_version(1);
  hello.mutable_hello()->set_client_id(client_id);
  auto ok = co_await exchange(io, sock, reader, hello, deadline);
  if (!ok) co_return ok.error();
  if (!ok.value().has_hello_ok()) {
    co_return error(protocol::errc::internal,
                    "the peer at " + address + " refused the Hello" +
                        (ok.value().has_error() ? ": " + ok.value().error().message() : std::string()));
  }
  co_return sock;
}

void peer_request(asio::io_context& io, std::string address, std::string client_id, v1::Frame request,
                  std::chrono::milliseconds deadline, std::function<void(result<v1::Frame>)> done) {
  asio::co_spawn(
      io,
      [&io, address = std::move(address), client_id = std::move(client_id), request = std::move(request), deadline,
       done = std::move(done)]() mutable -> asio::awaitable<void> {
        protocol::frame_reader reader;
        std::uint64_t corr = 0;
        auto sock = co_await connect_peer(io, address, client_id, reader, corr, deadline);
        if (!sock) {
          done(sock.error());
          co_return;
        }
        request.set_correlation_id(++corr);
        auto answer = co_await exchange(io, sock.value(), reader, request, deadline);
        boost::system::error_code ec;
        sock.value()->close(ec);
        done(std::move(answer));
      },
      asio::detached);
}

}  // namespace txmq::broker::cluster_mode
