// The one way a broker dials another broker of its cluster (peer_connection.h).

#include "cluster_mode/peer_connection.h"

#include <array>
#include <span>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "txmq/common/address.h"
#include "txmq/protocol/errc.h"

// GCC 12: see replication_follower.cc (Asio's matched awaitable frame new/delete).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif

namespace txmq::broker::cluster_mode {

namespace asio = boost::asio;
using asio::ip::tcp;

result<std::shared_ptr<asio::ssl::context>> make_peer_tls_context(const std::string& ca_file,
                                                                  const std::string& cert_file,
                                                                  const std::string& key_file,
                                                                  bool present_certificate) {
  common::client_tls_files files;
  files.ca_file = ca_file;
  if (present_certificate) {
    files.cert_file = cert_file;
    files.key_file = key_file;
  }
  auto ctx = common::make_client_tls_context(files);
  if (!ctx) return error(ctx.error().code, "inter-broker TLS (cluster_tls_ca_file): " + ctx.error().message);
  return ctx;
}

void peer_link::close() noexcept { stream_.close(); }

asio::awaitable<boost::system::error_code> peer_link::write_frame(const std::string& encoded) {
  boost::system::error_code ec;
  co_await stream_.visit([&](auto& s) {
    return asio::async_write(s, asio::buffer(encoded), asio::redirect_error(asio::use_awaitable, ec));
  });
  co_return ec;
}

asio::awaitable<result<v1::Frame>> peer_link::read_frame() {
  std::array<std::byte, 16 * 1024> buf{};
  boost::system::error_code ec;
  for (;;) {
    auto next = reader_.next();
    if (!next) co_return next.error();
    if (next.value()) co_return std::move(*next.value());
    const std::size_t n = co_await stream_.visit([&](auto& s) {
      return s.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    });
    if (ec) co_return error(protocol::errc::internal, "connection to broker " + address_ + ": " + ec.message());
    reader_.feed(std::span<const std::byte>(buf.data(), n));
  }
}

asio::awaitable<result<v1::Frame>> peer_link::exchange(v1::Frame request, std::chrono::milliseconds deadline) {
  request.set_correlation_id(++corr_);
  std::string out;
  if (auto r = protocol::encode_frame(request, out); !r) co_return r.error();
  asio::steady_timer timer(stream_.socket().get_executor(), deadline);
  // Closing the socket ends the pending read or write (also under TLS).
  timer.async_wait([this](boost::system::error_code ec) {
    if (!ec) stream_.close();
  });
  boost::system::error_code ec;
  co_await stream_.visit([&](auto& s) {
    return asio::async_write(s, asio::buffer(out), asio::redirect_error(asio::use_awaitable, ec));
  });
  std::array<std::byte, 64 * 1024> buf{};
  while (!ec) {
    auto next = reader_.next();
    if (!next) {
      timer.cancel();
      co_return next.error();
    }
    if (next.value()) {
      timer.cancel();
      co_return std::move(*next.value());
    }
    const std::size_t n = co_await stream_.visit([&](auto& s) {
      return s.async_read_some(asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    });
    if (!ec) reader_.feed(std::span<const std::byte>(buf.data(), n));
  }
  timer.cancel();
  co_return error(protocol::errc::internal, "connection to broker " + address_ + ": " + ec.message());
}

asio::awaitable<result<std::shared_ptr<peer_link>>> connect_peer(asio::io_context& io, const peer_identity& id,
                                                                  const std::string& address,
                                                                  std::chrono::milliseconds deadline) {
  auto hp = common::parse_host_port(address);
  if (address.empty() || !hp) co_return error(protocol::errc::internal, "no usable address for the broker: '" + address + "'");
  const std::string host = hp.value().host;
  tcp::socket sock(io);
  boost::system::error_code ec;
  {
    // The connect and the handshake are bounded together (a SIGSTOPped peer accepts, then hangs).
    asio::steady_timer timer(io, deadline);
    bool expired = false;
    timer.async_wait([&](boost::system::error_code t) {
      if (t) return;
      expired = true;
      boost::system::error_code ignored;
      sock.close(ignored);
    });
    tcp::resolver resolver(io);
    auto eps = co_await resolver.async_resolve(host, std::to_string(hp.value().port),
                                               asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) co_await asio::async_connect(sock, eps, asio::redirect_error(asio::use_awaitable, ec));
    timer.cancel();
    if (ec || expired) {
      co_return error(protocol::errc::internal,
                      "cannot connect to broker " + address + ": " + (expired ? "timed out" : ec.message()));
    }
  }
  sock.set_option(tcp::no_delay(true), ec);
  std::shared_ptr<peer_link> link;
  if (id.tls) {
    common::wire_stream stream(std::move(sock), id.tls);
    if (auto r = stream.expect_server_name(host); !r) co_return r.error();
    asio::steady_timer timer(io, deadline);
    timer.async_wait([&stream](boost::system::error_code t) {
      if (!t) stream.close();
    });
    co_await stream.tls()->async_handshake(asio::ssl::stream_base::client,
                                           asio::redirect_error(asio::use_awaitable, ec));
    timer.cancel();
    if (ec) {
      co_return error(protocol::errc::internal,
                      "TLS with broker " + address + ": " +
                          common::describe_tls_failure(ec, stream.tls()->native_handle(), address));
    }
    link = std::make_shared<peer_link>(std::move(stream), address);
  } else {
    link = std::make_shared<peer_link>(common::wire_stream(std::move(sock)), address);
  }
  v1::Frame hello;
  hello.mutable_hello()->set_protocol_version(1);
  hello.mutable_hello()->set_client_id(id.client_id);
  if (!id.token.empty()) hello.mutable_hello()->set_auth_token(id.token);
  auto ok = co_await link->exchange(std::move(hello), deadline);
  if (!ok) co_return ok.error();
  if (!ok.value().has_hello_ok()) {
    const auto& e = ok.value().error();
    link->close();
    co_return error(protocol::errc::internal,
                    "broker " + address + " refused this broker's Hello (" + v1::ErrorCode_Name(e.code()) + "): " +
                        e.message() +
                        (e.code() == v1::NOT_AUTHENTICATED ? " (is cluster_token_file the same on every broker?)" : ""));
  }
  co_return link;
}

void peer_request(asio::io_context& io, const peer_identity& id, std::string address, v1::Frame request,
                  std::chrono::milliseconds deadline, std::function<void(result<v1::Frame>)> done) {
  asio::co_spawn(
      io,
      [&io, id, address = std::move(address), request = std::move(request), deadline,
       done = std::move(done)]() mutable -> asio::awaitable<void> {
        auto link = co_await connect_peer(io, id, address, deadline);
        if (!link) {
          done(link.error());
          co_return;
        }
        auto answer = co_await link.value()->exchange(std::move(request), deadline);
        link.value()->close();
        done(std::move(answer));
      },
      asio::detached);
}

}  // namespace txmq::broker::cluster_mode
