#include "support/wire_client.h"

#include <array>
#include <stdexcept>

#include "txmq/protocol/frame_codec.h"

namespace txmq::bench {

namespace asio = boost::asio;

wire_connection::wire_connection(asio::io_context& io, std::string host, std::uint16_t port)
    : io_(io), socket_(io), host_(std::move(host)), port_(port) {}

void wire_connection::connect_blocking(const std::string& client_id, const std::string& auth_token) {
  socket_.connect({asio::ip::make_address(host_), port_});
  socket_.set_option(asio::ip::tcp::no_delay(true));
  v1::Frame hello;
  hello.set_correlation_id(next_id_++);
  hello.mutable_hello()->set_protocol_version(1);
  hello.mutable_hello()->set_client_id(client_id);
  hello.mutable_hello()->set_auth_token(auth_token);
  std::string bytes;
  if (!protocol::encode_frame(hello, bytes)) throw std::runtime_error("cannot encode Hello");
  asio::write(socket_, asio::buffer(bytes));
  std::array<std::byte, 4> header{};
  asio::read(socket_, asio::buffer(header));
  auto len = protocol::decode_frame_length(header, protocol::default_max_frame_bytes);
  if (!len) throw std::runtime_error("bad answer to Hello");
  std::string body(len.value(), '\0');
  asio::read(socket_, asio::buffer(body));
  auto f = protocol::decode_frame_body(std::as_bytes(std::span(body.data(), body.size())));
  if (f && f.value().has_error()) throw std::runtime_error("broker refused Hello: " + f.value().error().message());
  if (!f || !f.value().has_hello_ok()) throw std::runtime_error("broker refused Hello");
  asio::co_spawn(io_, [self = shared_from_this()] { return self->read_loop(); }, [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
}

void wire_connection::request(v1::Frame frame, callback cb) {
  const auto id = next_id_++;
  frame.set_correlation_id(id);
  pending_.emplace(id, std::move(cb));
  if (!protocol::encode_frame(frame, out_, 64u << 20)) throw std::runtime_error("frame too large");
  flush();
}

void wire_connection::flush() {
  if (write_active_ || out_.empty()) return;
  write_active_ = true;
  writing_.swap(out_);
  asio::async_write(socket_, asio::buffer(writing_), [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
    self->write_active_ = false;
    self->writing_.clear();
    if (ec) throw std::runtime_error("write to broker failed: " + ec.message());
    self->flush();
  });
}

asio::awaitable<void> wire_connection::read_loop() {
  auto self = shared_from_this();
  std::array<std::byte, 4> header{};
  std::string body;
  for (;;) {
    auto [ec, n] = co_await asio::async_read(socket_, asio::buffer(header), asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    auto len = protocol::decode_frame_length(header, 64u << 20);
    if (!len) throw std::runtime_error("bad frame from broker");
    body.resize(len.value());
    auto [ec2, n2] = co_await asio::async_read(socket_, asio::buffer(body), asio::as_tuple(asio::use_awaitable));
    if (ec2) co_return;
    v1::Frame f;
    if (!f.ParseFromString(body)) throw std::runtime_error("unparsable frame from broker");
    auto it = pending_.find(f.correlation_id());
    if (it == pending_.end()) continue;
    auto cb = std::move(it->second);
    pending_.erase(it);
    cb(f);
  }
}

}  // namespace txmq::bench
