// One TCP session after another: resolve and connect, Hello, then a read loop and a write loop
// until the connection breaks; requests written on a broken connection fail, queued ones wait
// for the next session, which starts after a back-off with jitter.

#include "connection_impl.h"
#include "dead_link.h"

#include <array>
#include <cstring>
#include <span>
#include <vector>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace txmq::client {

using asio::awaitable;
using tcp = asio::ip::tcp;
using namespace asio::experimental::awaitable_operators;  // NOLINT: operator|| for coroutines

namespace {

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);
constexpr std::uint32_t k_protocol_version = 1;
// The read loop's buffer: many answers of a pipelined burst per recv.
constexpr std::size_t k_read_buffer_bytes = 64 * 1024;

std::uint32_t load_be32(const std::array<std::byte, 4>& h) noexcept {
  return (std::to_integer<std::uint32_t>(h[0]) << 24) | (std::to_integer<std::uint32_t>(h[1]) << 16) |
         (std::to_integer<std::uint32_t>(h[2]) << 8) | std::to_integer<std::uint32_t>(h[3]);
}

}  // namespace

void connection::impl::begin_close() {
  closing_ = true;
  backoff_timer_.cancel();
  connect_timer_.cancel();
  dead_link_timer_.cancel();
  write_signal_.cancel();
  if (socket_) socket_->close();
}

void connection::impl::set_last_error(const error& e) {
  last_error_io_ = e;
  std::lock_guard lock(mutex_);
  last_error_ = e;
}

awaitable<void> connection::impl::run() {
  while (!closing_) {
    auto attempt = co_await connect_once();
    if (closing_) break;
    if (attempt) {
      socket_.emplace(std::move(attempt).value());
      reconnect_delay_.reset();
      on_connected();
      co_await (read_loop() || write_loop());
      socket_->close();
      socket_.reset();
      on_disconnected();
      if (closing_) break;
    } else {
      set_last_error(attempt.error());
      log("connect to " + address_->to_string() + " failed: " + attempt.error().to_string());
      if (bootstrap_.size() > 1) address_ = bootstrap_[bootstrap_next_++ % bootstrap_.size()];
      if (detail::is_refusal(attempt.error())) {
        refusal_ = attempt.error();
        {
          std::lock_guard lock(mutex_);
          refused_ = true;
        }
        cv_.notify_all();
        fail_unsent(attempt.error());
      } else if (options_.fail_while_unreachable) {
        unreachable_ = error(errc::not_connected, "cannot reach " + options_.address + " (" +
                                                      attempt.error().to_string() +
                                                      "); a cluster client re-reads Metadata and tries its leader");
        fail_unsent(*unreachable_);
      }
    }
    backoff_timer_.expires_after(reconnect_delay_.next());
    co_await backoff_timer_.async_wait(use_nothrow);
  }
  fail_all(error(errc::closed, "the connection to " + options_.address + " was closed"));
}

void connection::impl::on_connected() {
  connected_now_ = true;
  last_received_ = std::chrono::steady_clock::now();
  refusal_.reset();
  unreachable_.reset();
  ++generation_;
  connects_.fetch_add(1);
  connected_flag_.store(true);
  {
    std::lock_guard lock(mutex_);
    connected_ = true;
    refused_ = false;
  }
  cv_.notify_all();
  log("connected to " + address_->to_string());
  write_signal_.cancel();
}

void connection::impl::on_disconnected() {
  connected_now_ = false;
  dead_link_timer_.cancel();
  connected_flag_.store(false);
  {
    std::lock_guard lock(mutex_);
    connected_ = false;
  }
  std::string text = "connection to " + options_.address + " lost";
  if (disconnect_reason_) text += " (" + disconnect_reason_->to_string() + ")";
  if (broker_notice_) text += "; the broker said " + broker_notice_->to_string();
  text += " while the request was in flight; it may have been applied";
  error lost = closing_ ? error(errc::closed, "the connection to " + options_.address + " was closed")
                        : error(errc::connection_lost, std::move(text));
  set_last_error(lost);
  log(lost.message);
  disconnect_reason_.reset();
  broker_notice_.reset();
  fail_sent(lost);
}

awaitable<result<common::wire_stream>> connection::impl::connect_once() {
  connect_timer_.expires_after(options_.connect_timeout);
  auto outcome = co_await (handshake() || connect_timer_.async_wait(use_nothrow));
  if (outcome.index() == 1) {
    if (closing_) co_return error(errc::closed, "closed while connecting");
    co_return error(errc::not_connected, "no handshake with " + options_.address + " within " +
                                             std::to_string(options_.connect_timeout.count()) + " ms");
  }
  co_return std::move(std::get<0>(outcome));
}

awaitable<result<common::wire_stream>> connection::impl::handshake() {
  if (tls_error_) co_return *tls_error_;
  tcp::resolver resolver(io_);
  auto [rec, endpoints] = co_await resolver.async_resolve(address_->host, std::to_string(address_->port), use_nothrow);
  if (rec) co_return error(errc::not_connected, "cannot resolve " + address_->host + ": " + rec.message());
  tcp::socket socket(io_);
  auto [cec, endpoint] = co_await asio::async_connect(socket, endpoints, use_nothrow);
  if (cec) co_return error(errc::not_connected, "cannot connect to " + address_->to_string() + ": " + cec.message());
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  detail::apply_dead_link_timeout(socket, options_.dead_link_timeout);
  common::wire_stream stream = tls_context_ ? common::wire_stream(std::move(socket), tls_context_)
                                            : common::wire_stream(std::move(socket));
  if (auto* tls = stream.tls()) {
    const std::string& name = options_.tls.server_name.empty() ? address_->host : options_.tls.server_name;
    if (auto r = stream.expect_server_name(name); !r) co_return error(errc::tls_failed, r.error().message);
    auto [hec] = co_await tls->async_handshake(asio::ssl::stream_base::client, use_nothrow);
    if (hec) {
      co_return error(errc::tls_failed, common::describe_tls_failure(hec, tls->native_handle(), options_.address));
    }
  }

  v1::Frame hello;
  hello.set_correlation_id(next_id_.fetch_add(1));
  auto* h = hello.mutable_hello();
  h->set_protocol_version(k_protocol_version);
  h->set_client_id(options_.client_id);
  h->set_producer_group(options_.producer_group);
  h->set_auth_token(options_.auth_token);
  std::string bytes;
  if (!protocol::encode_frame(hello, bytes, protocol::pre_hello_max_frame_bytes)) {
    co_return error(errc::invalid_argument, "the Hello frame (client id, producer group, token) is above 64 KiB");
  }
  auto [wec, written] =
      co_await stream.visit([&](auto& s) { return asio::async_write(s, asio::buffer(bytes), use_nothrow); });
  if (wec) co_return error(errc::not_connected, "cannot send Hello to " + options_.address + ": " + wec.message());

  auto answer = co_await read_frame(stream, protocol::pre_hello_max_frame_bytes);
  if (!answer) {
    if (answer.error().is(errc::tls_failed)) co_return answer.error();
    co_return error(errc::not_connected, "handshake with " + options_.address + ": " + answer.error().to_string());
  }
  const v1::Frame& f = answer.value();
  if (f.has_error()) co_return from_wire(f.error().code(), f.error().message());
  if (!f.has_hello_ok()) {
    co_return error(errc::unexpected_response, "the broker at " + options_.address + " answered Hello with frame body " +
                                                   std::to_string(static_cast<int>(f.body_case())));
  }
  server_info info;
  info.protocol_version = f.hello_ok().protocol_version();
  info.broker_id = f.hello_ok().broker_id();
  info.max_frame_bytes = f.hello_ok().max_frame_bytes() != 0 ? f.hello_ok().max_frame_bytes()
                                                             : protocol::default_max_frame_bytes;
  info.max_message_bytes = f.hello_ok().max_message_bytes();
  send_limit_.store(info.max_frame_bytes);
  receive_limit_ = options_.max_frame_bytes != 0 ? std::min(options_.max_frame_bytes, info.max_frame_bytes)
                                                 : info.max_frame_bytes;
  {
    std::lock_guard lock(mutex_);
    server_ = info;
  }
  co_return std::move(stream);
}

// One frame: the length is checked against the limit before anything is allocated.
error connection::impl::read_error(const boost::system::error_code& ec, common::wire_stream& stream,
                                   std::string_view what) {
  // A TLS alert after the handshake: with TLS 1.3 the broker reports a missing or refused
  // client certificate only here.
  if (stream.tls() && ec.category() == asio::error::get_ssl_category()) {
    return error(errc::tls_failed, common::describe_tls_failure(ec, stream.tls()->native_handle(), options_.address));
  }
  if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) {
    return error(errc::connection_lost, "the broker closed the connection");
  }
  return error(errc::connection_lost, std::string(what) + ec.message());
}

awaitable<result<v1::Frame>> connection::impl::read_frame(common::wire_stream& stream, std::uint32_t limit) {
  std::array<std::byte, protocol::frame_header_bytes> header{};
  auto [hec, hn] =
      co_await stream.visit([&](auto& s) { return asio::async_read(s, asio::buffer(header), use_nothrow); });
  if (hec) co_return read_error(hec, stream, "read failed: ");
  auto length = protocol::decode_frame_length(header, limit);
  if (!length) {
    if (length.error() == protocol::errc::frame_too_large) {
      co_return error(protocol::errc::frame_too_large, "the broker sent a frame of " + std::to_string(load_be32(header)) +
                                                           " bytes, above the limit of " + std::to_string(limit));
    }
    co_return error(protocol::errc::frame_malformed, "the broker sent a zero-length frame");
  }
  std::string body(length.value(), '\0');
  auto [bec, bn] = co_await stream.visit([&](auto& s) { return asio::async_read(s, asio::buffer(body), use_nothrow); });
  if (bec) co_return read_error(bec, stream, "the stream ended inside a frame: ");
  auto frame = protocol::decode_frame_body(std::as_bytes(std::span(body)));
  if (!frame) co_return error(protocol::errc::frame_malformed, "the broker sent a frame that is not a txmq.v1.Frame");
  co_return std::move(frame).value();
}

awaitable<void> connection::impl::read_loop() {
  // One read takes whatever the socket holds (up to the buffer) and every whole frame in it is
  // dispatched before the next read: a burst of answers costs one recv, not two (header, then
  // body) per answer (issue #15, ninth round). Bytes [begin, end) are read and not yet handled.
  // A frame's length is checked against the limit before the buffer grows for it.
  std::string in(k_read_buffer_bytes, '\0');
  std::size_t begin = 0;
  std::size_t end = 0;
  auto& stream = *socket_;
  for (;;) {
    while (end - begin >= protocol::frame_header_bytes) {
      std::array<std::byte, protocol::frame_header_bytes> header{};
      std::memcpy(header.data(), in.data() + begin, header.size());
      auto length = protocol::decode_frame_length(header, receive_limit_);
      if (!length) {
        if (!disconnect_reason_) {
          disconnect_reason_ = length.error() == protocol::errc::frame_too_large
                                   ? error(protocol::errc::frame_too_large,
                                           "the broker sent a frame of " + std::to_string(load_be32(header)) +
                                               " bytes, above the limit of " + std::to_string(receive_limit_))
                                   : error(protocol::errc::frame_malformed, "the broker sent a zero-length frame");
        }
        co_return;
      }
      const std::size_t whole = protocol::frame_header_bytes + length.value();
      if (end - begin < whole) {
        // Room for the whole frame, from the front of the buffer.
        if (in.size() < whole) in.resize(whole);
        if (begin + whole > in.size()) {
          std::memmove(in.data(), in.data() + begin, end - begin);
          end -= begin;
          begin = 0;
        }
        break;
      }
      auto frame = protocol::decode_frame_body(
          std::as_bytes(std::span(in.data() + begin + protocol::frame_header_bytes, length.value())));
      begin += whole;
      if (!frame) {
        if (!disconnect_reason_) {
          disconnect_reason_ = error(protocol::errc::frame_malformed, "the broker sent a frame that is not a txmq.v1.Frame");
        }
        co_return;
      }
      dispatch(std::move(frame).value());
    }
    if (begin == end) {
      begin = end = 0;
      // A large answer does not keep its buffer while the connection is quiet.
      if (in.size() > 4 * k_read_buffer_bytes) std::string(k_read_buffer_bytes, '\0').swap(in);
    } else if (end == in.size()) {
      std::memmove(in.data(), in.data() + begin, end - begin);
      end -= begin;
      begin = 0;
    }
    const bool inside_frame = end > begin;
    auto [ec, n] = co_await stream.visit(
        [&](auto& s) { return s.async_read_some(asio::buffer(in.data() + end, in.size() - end), use_nothrow); });
    if (ec) {
      // A reason given first (a link found dead, which closed the socket) is the real one.
      if (!disconnect_reason_) {
        disconnect_reason_ = read_error(ec, stream, inside_frame ? "the stream ended inside a frame: " : "read failed: ");
      }
      co_return;
    }
    end += n;
  }
}

awaitable<void> connection::impl::write_loop() {
  std::vector<std::string> batch;
  std::vector<asio::const_buffer> buffers;
  for (;;) {
    if (write_queue_.empty()) {
      write_signal_.expires_at(asio::steady_timer::time_point::max());
      co_await write_signal_.async_wait(use_nothrow);
      auto cs = co_await asio::this_coro::cancellation_state;
      if (closing_ || cs.cancelled() != asio::cancellation_type::none) co_return;
      continue;
    }
    batch.clear();
    buffers.clear();
    // Coalesce what is queued into one write, up to a few MiB.
    std::size_t bytes = 0;
    while (!write_queue_.empty() && (batch.empty() || bytes < (4u << 20))) {
      auto q = std::move(write_queue_.front());
      write_queue_.pop_front();
      write_queue_bytes_ -= q.bytes.size();
      if (q.request_id != 0) {
        auto it = pending_.find(q.request_id);
        if (it == pending_.end()) continue;
        it->second.sent = true;
      } else if (q.generation != generation_) {
        continue;
      }
      bytes += q.bytes.size();
      batch.push_back(std::move(q.bytes));
    }
    for (const auto& b : batch) buffers.push_back(asio::buffer(b));
    if (buffers.empty()) continue;
    auto [ec, n] = co_await socket_->visit([&](auto& s) { return asio::async_write(s, buffers, use_nothrow); });
    if (ec) {
      // A reason given first (a dead link found, the read side's error) is the real one: the
      // socket it closed ends this write with "Operation canceled".
      if (!disconnect_reason_) disconnect_reason_ = error(errc::connection_lost, "write failed: " + ec.message());
      co_return;
    }
  }
}

}  // namespace txmq::client
