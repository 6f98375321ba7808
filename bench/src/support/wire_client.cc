#include "support/wire_client.h"

#include <array>
#include <cstring>
#include <stdexcept>

#include "txmq/protocol/frame_codec.h"

namespace txmq::bench {

namespace asio = boost::asio;

wire_connection::wire_connection(asio::io_context& io, std::string host, std::uint16_t port,
                                 std::shared_ptr<asio::ssl::context> tls, std::string server_name)
    : io_(io),
      stream_(tls ? common::wire_stream(asio::ip::tcp::socket(io), std::move(tls))
                  : common::wire_stream(asio::ip::tcp::socket(io))),
      server_name_(std::move(server_name)),
      host_(std::move(host)),
      port_(port) {}

void wire_connection::connect_blocking(const std::string& client_id, const std::string& auth_token) {
  asio::ip::tcp::resolver resolver(io_);
  asio::connect(stream_.socket(), resolver.resolve(host_, std::to_string(port_)));
  stream_.socket().set_option(asio::ip::tcp::no_delay(true));
  if (auto* tls = stream_.tls()) {
    if (auto r = stream_.expect_server_name(server_name_); !r) throw std::runtime_error(r.error().message);
    boost::system::error_code ec;
    tls->handshake(asio::ssl::stream_base::client, ec);
    if (ec) throw std::runtime_error(common::describe_tls_failure(ec, tls->native_handle(), host_));
  }
  v1::Frame hello;
  hello.set_correlation_id(next_id_++);
  hello.mutable_hello()->set_protocol_version(1);
  hello.mutable_hello()->set_client_id(client_id);
  hello.mutable_hello()->set_auth_token(auth_token);
  std::string bytes;
  if (!protocol::encode_frame(hello, bytes)) throw std::runtime_error("cannot encode Hello");
  stream_.visit([&](auto& s) { asio::write(s, asio::buffer(bytes)); });
  std::array<std::byte, 4> header{};
  stream_.visit([&](auto& s) { asio::read(s, asio::buffer(header)); });
  auto len = protocol::decode_frame_length(header, protocol::default_max_frame_bytes);
  if (!len) throw std::runtime_error("bad answer to Hello");
  std::string body(len.value(), '\0');
  stream_.visit([&](auto& s) { asio::read(s, asio::buffer(body)); });
  auto f = protocol::decode_frame_body(std::as_bytes(std::span(body.data(), body.size())));
  if (f && f.value().has_error()) throw std::runtime_error("broker refused Hello: " + f.value().error().message());
  if (!f || !f.value().has_hello_ok()) throw std::runtime_error("broker refused Hello");
  asio::co_spawn(io_, [self = shared_from_this()] { return self->read_loop(); }, [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
}

void wire_connection::send_encoded_now(v1::Frame& frame, callback cb) {
  if (!lost_.empty()) throw std::runtime_error(lost_);
  const auto id = next_id_++;
  frame.set_correlation_id(id);
  pending_.emplace(id, std::move(cb));
  if (!protocol::encode_frame(frame, out_, 64u << 20)) throw std::runtime_error("frame too large");
  // Requests made while the read loop hands out a read's answers (a closed-loop publisher
  // sends one per answer) go out together once it has handed out all of them: one write for
  // the pass, not one per request (issue #15, ninth round). Elsewhere: at once.
  if (!dispatching_) flush();
}

void wire_connection::flush() {
  if (write_active_ || out_.empty()) return;
  write_active_ = true;
  writing_.swap(out_);
  auto done = [self = shared_from_this()](boost::system::error_code ec, std::size_t) {
    self->write_active_ = false;
    self->writing_.clear();
    if (ec) throw std::runtime_error("write to broker failed: " + ec.message());
    self->flush();
  };
  stream_.visit([&](auto& s) { asio::async_write(s, asio::buffer(writing_), done); });
}

asio::awaitable<void> wire_connection::read_loop() {
  auto self = shared_from_this();
  // One read takes whatever the socket holds (up to the buffer), and every whole frame in it is
  // handled before the next read: many answers per recv instead of two recvs (header, then
  // body) per answer. Bytes [begin, end) are read and not yet handled.
  std::string in(64 * 1024, '\0');
  std::size_t begin = 0, end = 0;
  v1::Frame f;
  for (;;) {
    dispatching_ = true;
    for (;;) {
      const std::size_t have = end - begin;
      if (have < protocol::frame_header_bytes) break;
      auto len = protocol::decode_frame_length(
          std::span<const std::byte, protocol::frame_header_bytes>(reinterpret_cast<const std::byte*>(in.data() + begin),
                                                                   protocol::frame_header_bytes),
          64u << 20);
      if (!len) throw std::runtime_error("bad frame from broker");
      const std::size_t whole = protocol::frame_header_bytes + len.value();
      if (have < whole) {
        // Room for the rest of this frame at the front of the buffer.
        if (whole > in.size()) in.resize(whole);
        if (begin + whole > in.size()) {
          std::memmove(in.data(), in.data() + begin, have);
          begin = 0;
          end = have;
        }
        break;
      }
      f.Clear();
      if (!f.ParseFromArray(in.data() + begin + protocol::frame_header_bytes, static_cast<int>(len.value()))) {
        throw std::runtime_error("unparsable frame from broker");
      }
      begin += whole;
      auto it = pending_.find(f.correlation_id());
      if (it == pending_.end()) continue;
      auto cb = std::move(it->second);
      pending_.erase(it);
      cb(f);
    }
    dispatching_ = false;
    flush();
    if (begin == end) begin = end = 0;
    if (end == in.size()) {
      std::memmove(in.data(), in.data() + begin, end - begin);
      end -= begin;
      begin = 0;
    }
    auto [ec, n] = co_await stream_.visit([&](auto& s) {
      return s.async_read_some(asio::buffer(in.data() + end, in.size() - end), asio::as_tuple(asio::use_awaitable));
    });
    if (ec) {
      // A broker that dies (or closes) never answers what is in flight: a workload waiting for
      // those answers would wait forever, so the run ends here with the reason. A connection
      // with nothing in flight ends quietly (the bench may be done with it); its next request
      // throws.
      lost_ = "connection to the broker at " + host_ + ":" + std::to_string(port_) + " lost (" + ec.message() + ")";
      if (!pending_.empty()) throw std::runtime_error(lost_ + " with " + std::to_string(pending_.size()) + " requests unanswered");
      co_return;
    }
    end += n;
  }
}

}  // namespace txmq::bench
