#include "net/connection.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "service/service.h"
#include "txmq/common/log.h"
#include "txmq/common/log_limiter.h"
#include "txmq/common/units.h"
#include "txmq/protocol/frame_codec.h"
#include "txmq/storage/batched_wakeups.h"

namespace txmq::broker {

namespace asio = boost::asio;
using asio::awaitable;
using asio::use_awaitable;
constexpr auto as_tuple_awaitable = asio::as_tuple(asio::use_awaitable);
constexpr std::uint32_t k_protocol_version = 1;
// A body larger than this is read in chunks that double as its bytes arrive.
constexpr std::size_t k_first_body_chunk = 64 * 1024;
// The read buffer of a new connection (it grows to k_first_body_chunk while reads fill it).
constexpr std::size_t k_first_read = 2 * 1024;
// How long a connection closed for a passed deadline may take to write its last frames.
constexpr std::chrono::milliseconds k_close_grace{2'000};
// How long a refused socket lingers for its peer to read the answer and close.
constexpr std::chrono::milliseconds k_refuse_linger{1'000};

namespace {
v1::Frame error_frame(std::uint64_t correlation_id, v1::ErrorCode code, std::string text) {
  v1::Frame f;
  f.set_correlation_id(correlation_id);
  f.mutable_error()->set_code(code);
  f.mutable_error()->set_message(std::move(text));
  return f;
}
}  // namespace

connection::connection(common::wire_stream stream, service& svc, connection_limits limits, std::uint64_t id,
                       std::function<void()> on_closed)
    : stream_(std::move(stream)),
      service_(svc),
      limits_(limits),
      id_(id),
      on_closed_(std::move(on_closed)),
      wake_writer_(stream_.socket().get_executor()),
      deadline_timer_(stream_.socket().get_executor()) {
  boost::system::error_code ec;
  auto ep = stream_.socket().remote_endpoint(ec);
  peer_ = ec ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port());
  stream_.socket().set_option(asio::ip::tcp::no_delay(true), ec);
  wake_writer_.expires_at(asio::steady_timer::time_point::max());
  deadline_timer_.expires_at(asio::steady_timer::time_point::max());
}

std::function<void(std::exception_ptr)> connection::log_end(const char* what) {
  return [self = shared_from_this(), what](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      common::log::error("connection ", self->id_, " (", self->peer_, ") ", what, " failed: ", ex.what());
    }
    self->shutdown();
  };
}

void connection::start() {
  // The handshake counts against hello_timeout: a peer that never finishes it is closed.
  set_deadline(deadline_kind::hello, limits_.hello_timeout);
  const auto ex = stream_.socket().get_executor();
  asio::co_spawn(ex, watchdog(), log_end("watchdog"));
  if (stream_.is_tls()) {
    handshaking_ = true;
    asio::co_spawn(ex, tls_handshake(), log_end("TLS handshake"));
  } else {
    start_io();
  }
}

void connection::start_io() {
  const auto ex = stream_.socket().get_executor();
  asio::co_spawn(ex, reader(), log_end("reader"));
  asio::co_spawn(ex, writer(), log_end("writer"));
}

awaitable<void> connection::tls_handshake() {
  auto self = shared_from_this();
  auto& socket = stream_.socket();
  // A TLS client speaks first with a handshake record; anything else is a plaintext client,
  // which can still read a plaintext Error saying why it is turned away.
  auto [wec] = co_await socket.async_wait(asio::ip::tcp::socket::wait_read, as_tuple_awaitable);
  if (closed_) co_return;
  std::array<unsigned char, 1> first{};
  boost::system::error_code pec;
  const std::size_t peeked = wec ? 0 : socket.receive(asio::buffer(first), asio::socket_base::message_peek, pec);
  if (wec || pec || peeked == 0) {
    shutdown();
    co_return;
  }
  if (first[0] != common::k_tls_handshake_record) {
    common::log::info("connection ", id_, " (", peer_, ") closed: a plaintext client on the TLS port");
    handshaking_ = false;
    asio::co_spawn(socket.get_executor(),
                   refuse_connection(std::move(socket),
                                     error_frame(0, v1::HELLO_REQUIRED,
                                                 "this broker port requires TLS: connect with --tls-ca FILE (or "
                                                 "--tls for the system's CAs)")),
                   [](std::exception_ptr e) {
                     if (!e) return;
                     try {
                       std::rethrow_exception(e);
                     } catch (const std::exception& ex) {
                       common::log::error("refusing a plaintext client failed: ", ex.what());
                     }
                   });
    shutdown();
    co_return;
  }
  auto [hec] = co_await stream_.tls()->async_handshake(asio::ssl::stream_base::server, as_tuple_awaitable);
  handshaking_ = false;
  if (closed_) co_return;
  if (hec) {
    // Usually the client's doing (it does not trust our certificate, speaks an old version,
    // sent no or a foreign client certificate): info, with OpenSSL's reason.
    common::log::info("connection ", id_, " (", peer_, ") closed: TLS handshake failed: ", hec.message());
    shutdown();
    co_return;
  }
  cert_principal_ = common::verified_peer_common_name(stream_.tls()->native_handle());
  if (cert_principal_) {
    common::log::debug("connection ", id_, " (", peer_, "): TLS client certificate CN=", *cert_principal_);
  }
  start_io();
}

awaitable<void> connection::reader() {
  // The handlers see the connection as a responder (converted once, not per request).
  const std::shared_ptr<responder> self = shared_from_this();
  // One read takes whatever the socket holds (up to the buffer): a client pipelining small
  // requests costs one recv for many frames, not two per frame (header, then body). Bytes
  // [begin, end) of `in` are read and not yet handled; a frame is handled once all its bytes
  // are in.
  // It starts small, so that thousands of silent sockets hold little, and doubles (up to
  // k_first_body_chunk) while reads fill it.
  std::string in(k_first_read, '\0');
  std::size_t begin = 0;
  std::size_t end = 0;
  bool frame_started = false;  // bytes of an unfinished frame are in the buffer
  bool filled = false;         // the last read filled all the room it had
  // The frames of one read wake the store's writer once, when the next read (or a wait for
  // request memory) starts: one commit group and one wake-up for a read of many pipelined
  // requests (storage/batched_wakeups.h). Never held across a co_await.
  std::optional<storage::batched_wakeups> pass;
  while (!closing_) {
    const std::size_t have = end - begin;
    // The next frame's length, once its header is in.
    std::optional<std::size_t> frame_bytes;
    if (have >= protocol::frame_header_bytes) {
      const auto* h = reinterpret_cast<const std::byte*>(in.data() + begin);
      if (!hello_done_ && !stream_.is_tls() && static_cast<unsigned char>(h[0]) == common::k_tls_handshake_record &&
          static_cast<unsigned char>(h[1]) == 0x03) {
        // The answer is plaintext, which the client's TLS layer reports as "not TLS".
        fail(v1::FRAME_MALFORMED, "a TLS handshake on the broker's plaintext port: connect without --tls/--tls-ca");
        break;
      }
      const std::uint32_t limit = hello_done_ ? limits_.max_frame_bytes : protocol::pre_hello_max_frame_bytes;
      auto length = protocol::decode_frame_length(std::span<const std::byte, protocol::frame_header_bytes>(h, protocol::frame_header_bytes), limit);
      if (!length) {
        if (length.error() == protocol::errc::frame_too_large) {
          fail(v1::FRAME_TOO_LARGE, "frame length above the limit of " + std::to_string(limit) + " bytes" +
                                        (hello_done_ ? "" : " before Hello"));
        } else {
          fail(v1::FRAME_MALFORMED, "frame length 0 is not allowed");
        }
        break;
      }
      frame_bytes = length.value();
    }
    if (!frame_bytes || have < protocol::frame_header_bytes + *frame_bytes) {
      // Read more. A frame that started keeps its frame deadline; between frames, waiting for
      // the next first byte is idleness (and, above max_request_memory, no reading at all).
      if (have == 0) {
        frame_started = false;
        begin = end = 0;
        // A connection that sent one large frame does not keep its buffer while idle.
        if (in.size() > k_first_body_chunk) {
          std::string(k_first_body_chunk, '\0').swap(in);
        }
        // Above max_request_memory no new frame is read (the socket's buffers fill and the
        // peer waits); waiting so is no idleness of the peer.
        if (limits_.memory && limits_.memory->over() && hello_done_) {
          set_deadline(deadline_kind::none, std::chrono::milliseconds(0));
          pass.reset();
          while (limits_.memory->over() && !closing_) co_await limits_.memory->wait();
          if (closing_) break;
        }
        if (hello_done_) set_deadline(deadline_kind::idle, limits_.idle_timeout);
      }
      // Room for the rest of this frame: the buffer grows with the bytes that arrived (at most
      // twice them), never to the announced length up front: a slow sender announcing 8 MiB
      // holds 64 KiB until it sends more.
      if (begin > 0 && (end == in.size() || (frame_bytes && begin + protocol::frame_header_bytes + *frame_bytes > in.size()))) {
        std::memmove(in.data(), in.data() + begin, have);
        begin = 0;
        end = have;
      }
      if (end == in.size() || (filled && in.size() < k_first_body_chunk)) {
        const std::size_t cap =
            frame_bytes ? std::max(k_first_body_chunk, protocol::frame_header_bytes + *frame_bytes) : k_first_body_chunk;
        in.resize(std::max(in.size(), std::min(cap, 2 * in.size())));
      }
      const std::size_t room = in.size() - end;
      pass.reset();
      auto [ec, n] = co_await stream_.visit(
          [&](auto& s) { return s.async_read_some(asio::buffer(in.data() + end, room), as_tuple_awaitable); });
      if (ec) break;  // peer closed or reset: nothing to say
      filled = n == room;
      if (!frame_started) {
        // The first byte starts the frame and its frame_read_timeout.
        frame_started = true;
        if (hello_done_ || std::chrono::steady_clock::now() + limits_.frame_read_timeout < deadline_) {
          set_deadline(deadline_kind::frame, limits_.frame_read_timeout);
        }
      }
      end += n;
      continue;
    }
    // A whole frame is in the buffer. Above max_request_memory it waits there, unhandled, like
    // the frames the socket holds.
    if (limits_.memory && limits_.memory->over() && hello_done_) {
      set_deadline(deadline_kind::none, std::chrono::milliseconds(0));
      pass.reset();
      while (limits_.memory->over() && !closing_) co_await limits_.memory->wait();
      if (closing_) break;
    }
    const std::size_t body_at = begin + protocol::frame_header_bytes;
    begin = body_at + *frame_bytes;
    // Before Hello the hello (or frame) deadline stays: this frame completes Hello or fails.
    // With more bytes in the buffer the next frame has started.
    if (begin == end) {
      frame_started = false;
      if (hello_done_) set_deadline(deadline_kind::none, std::chrono::milliseconds(0));
    } else if (hello_done_) {
      set_deadline(deadline_kind::frame, limits_.frame_read_timeout);
    }
    auto frame = protocol::decode_frame_body(std::as_bytes(std::span(in.data() + body_at, *frame_bytes)));
    if (!frame) {
      fail(v1::FRAME_MALFORMED, "frame body is not a txmq.v1.Frame");
      break;
    }
    const bool was_hello = !hello_done_;
    if (!pass) pass.emplace();
    if (!handle_frame(self, frame.value(), *frame_bytes)) break;
    // Frames sent right behind the Hello are under frame_read_timeout, no longer hello_timeout.
    if (was_hello && hello_done_ && begin != end) set_deadline(deadline_kind::frame, limits_.frame_read_timeout);
  }
  pass.reset();
  closing_ = true;
  wake_writer_.cancel();
}

bool connection::handle_frame(const std::shared_ptr<responder>& self, v1::Frame& f, std::size_t frame_bytes) {
  if (!hello_done_) {
    if (!f.has_hello()) {
      fail(v1::HELLO_REQUIRED, "the first frame must be Hello", f.correlation_id());
      return false;
    }
    if (f.hello().protocol_version() != k_protocol_version) {
      fail(v1::UNSUPPORTED_VERSION, "protocol version " + std::to_string(f.hello().protocol_version()) +
                                        " is not supported; this broker speaks version 1",
           f.correlation_id());
      return false;
    }
    auto admitted = service_.admit(f.hello(), cert_principal_);
    if (auto* refused = std::get_if<hello_refusal>(&admitted)) {
      fail(refused->code, std::move(refused->text), f.correlation_id());
      return false;
    }
    principal_ = std::move(std::get<std::string>(admitted));
    client_id_ = f.hello().client_id();
    producer_group_ = f.hello().producer_group();
    hello_done_ = true;
    v1::Frame ok;
    ok.set_correlation_id(f.correlation_id());
    auto* h = ok.mutable_hello_ok();
    h->set_protocol_version(k_protocol_version);
    h->set_broker_id(service_.broker_id());
    h->set_max_frame_bytes(limits_.max_frame_bytes);
    h->set_max_message_bytes(service_.max_message_bytes());
    enqueue(ok);
    service_.connection_opened(self);
    return true;
  }
  // Answers to the broker's own requests (CheckTx): no response, no in-flight slot.
  if (f.has_check_tx_result() || f.has_error()) {
    service_.handle_answer(self, std::move(f));
    return true;
  }
  if (f.correlation_id() == 0) {
    fail(v1::INVALID_ARGUMENT, "correlation_id 0 is reserved; requests need a non-zero id");
    return false;
  }
  if (in_flight_ >= limits_.max_in_flight) {
    // Not through respond(): the refused request never took a slot, so its answer frees none.
    send_error(f.correlation_id(), v1::LIMIT_EXCEEDED,
               "more than " + std::to_string(limits_.max_in_flight) +
                   " requests in flight on this connection; wait for answers before sending more");
    return true;
  }
  ++in_flight_;
  if (limits_.memory) {
    limits_.memory->charge(frame_bytes);
    charged_.emplace(f.correlation_id(), frame_bytes);
  }
  service_.handle(self, std::move(f));
  return true;
}

awaitable<void> connection::watchdog() {
  auto self = shared_from_this();
  while (!closed_) {
    auto [ec] = co_await deadline_timer_.async_wait(as_tuple_awaitable);
    (void)ec;  // cancelled = the deadline moved, or the connection closed
    if (closed_) break;
    if (std::chrono::steady_clock::now() < deadline_) {
      deadline_timer_.expires_at(deadline_);
      continue;
    }
    if (limits_.pacer) {
      // In turn with the other connections whose deadline passed (net/io_pacer.h); meanwhile
      // Hello may have come or the connection closed, so check again.
      co_await limits_.pacer->take(use_awaitable);
      if (closed_) break;
      if (std::chrono::steady_clock::now() < deadline_) continue;
    }
    deadline_passed();
  }
}

void connection::set_deadline(deadline_kind kind, std::chrono::milliseconds after) {
  deadline_kind_ = kind;
  deadline_ = after.count() > 0 ? std::chrono::steady_clock::now() + after : asio::steady_timer::time_point::max();
  // A later deadline leaves the timer alone (the watchdog re-arms when it fires early); only an
  // earlier one moves it, so the frames of a busy connection rarely touch the timer.
  if (deadline_ < deadline_timer_.expiry()) deadline_timer_.expires_at(deadline_);
}

void connection::deadline_passed() {
  using common::format_duration;
  switch (deadline_kind_) {
    case deadline_kind::none:
      return;
    case deadline_kind::hello:
      if (handshaking_) {
        // Nothing can be said before the TLS handshake completes.
        common::log::info("connection ", id_, " (", peer_, ") closed: no TLS handshake within hello_timeout (",
                          format_duration(limits_.hello_timeout), ")");
        shutdown();
        return;
      }
      fail(v1::HELLO_REQUIRED, "no Hello within hello_timeout (" + format_duration(limits_.hello_timeout) + ")");
      break;
    case deadline_kind::frame:
      fail(v1::LIMIT_EXCEEDED, "a frame was not completed within frame_read_timeout (" +
                                   format_duration(limits_.frame_read_timeout) + ")");
      break;
    case deadline_kind::idle:
      if (in_flight_ > 0) {
        // Waiting for the broker's answers is no idleness: respond() starts the idle time again
        // when the last one is sent.
        set_deadline(deadline_kind::idle, std::chrono::milliseconds(0));
        return;
      }
      fail(v1::LIMIT_EXCEEDED, "idle for idle_timeout (" + format_duration(limits_.idle_timeout) + ")");
      break;
    case deadline_kind::closing:
      // The peer did not take the reason within the grace: drop it.
      shutdown();
      return;
  }
  // Ends the reader's pending read; the writer sends the reason, then closes the socket.
  boost::system::error_code ec;
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_receive, ec);
}

awaitable<void> connection::writer() {
  auto self = shared_from_this();
  std::string writing;
  for (;;) {
    if (out_.empty()) {
      if (closing_) break;
      auto [ec] = co_await wake_writer_.async_wait(as_tuple_awaitable);
      (void)ec;  // cancelled = woken
      continue;
    }
    // Everything queued goes out in one write; the two buffers swap, so neither is allocated
    // again once it has grown to the connection's usual burst.
    writing.clear();
    writing.swap(out_);
    auto [ec, n] = co_await stream_.visit(
        [&](auto& s) { return asio::async_write(s, asio::buffer(writing), as_tuple_awaitable); });
    if (ec) break;
    // A burst of large answers (a big fetch) does not keep its buffer for good.
    if (writing.capacity() > limits_.max_queued_bytes / 16 && writing.capacity() > (1u << 20)) std::string().swap(writing);
  }
  shutdown();
}

void connection::enqueue(const v1::Frame& frame) {
  if (closed_) return;
  // Encoded straight into the outgoing buffer: no string per answer.
  if (auto r = protocol::encode_frame(frame, out_, limits_.max_frame_bytes); !r) {
    // Only a response we built can be this large (a fetch is bounded by max_frame_bytes).
    common::log::error("connection ", id_, ": response of ", frame.ByteSizeLong(), " bytes exceeds max_frame_bytes");
    v1::Frame err;
    err.set_correlation_id(frame.correlation_id());
    err.mutable_error()->set_code(v1::INTERNAL);
    err.mutable_error()->set_message("response too large for max_frame_bytes");
    (void)protocol::encode_frame(err, out_, limits_.max_frame_bytes);
  }
  if (out_.size() > limits_.max_queued_bytes) {
    common::log::warn("connection ", id_, " (", peer_, ") does not read its answers (", out_.size(),
              " bytes queued); closing it");
    shutdown();
    return;
  }
  wake_writer_.cancel();
}

void connection::release_request(std::uint64_t correlation_id) {
  auto it = charged_.find(correlation_id);
  if (it == charged_.end()) return;
  const std::size_t bytes = it->second;
  charged_.erase(it);
  limits_.memory->release(bytes);
}

void connection::respond(v1::Frame frame) { respond_with(frame); }

void connection::respond_with(const v1::Frame& frame) {
  release_request(frame.correlation_id());
  if (in_flight_ > 0 && --in_flight_ == 0 && deadline_kind_ == deadline_kind::idle) {
    set_deadline(deadline_kind::idle, limits_.idle_timeout);
  }
  enqueue(frame);
}

void connection::respond_encoded(std::uint64_t correlation_id, std::string_view frame) {
  release_request(correlation_id);
  if (in_flight_ > 0 && --in_flight_ == 0 && deadline_kind_ == deadline_kind::idle) {
    set_deadline(deadline_kind::idle, limits_.idle_timeout);
  }
  if (closed_) return;
  if (frame.empty() || frame.size() > limits_.max_frame_bytes) {
    // Only a response we built can be this large (a fetch is bounded by max_frame_bytes).
    common::log::error("connection ", id_, ": response of ", frame.size(), " bytes exceeds max_frame_bytes");
    return enqueue(error_frame(correlation_id, v1::INTERNAL, "response too large for max_frame_bytes"));
  }
  const std::size_t start = out_.size();
  out_.resize(start + protocol::frame_header_bytes + frame.size());
  const auto length = static_cast<std::uint32_t>(frame.size());
  for (std::size_t i = 0; i < protocol::frame_header_bytes; ++i) {
    out_[start + i] = static_cast<char>((length >> (8 * (protocol::frame_header_bytes - 1 - i))) & 0xff);
  }
  std::memcpy(out_.data() + start + protocol::frame_header_bytes, frame.data(), frame.size());
  if (out_.size() > limits_.max_queued_bytes) {
    common::log::warn("connection ", id_, " (", peer_, ") does not read its answers (", out_.size(),
              " bytes queued); closing it");
    shutdown();
    return;
  }
  wake_writer_.cancel();
}

void connection::send_request(const v1::Frame& frame) { enqueue(frame); }

void connection::send_error(std::uint64_t correlation_id, v1::ErrorCode code, std::string text) {
  enqueue(error_frame(correlation_id, code, std::move(text)));
}

namespace {

// A flood of sockets closed by the limits (thousands a second that never said Hello) must not
// become a flood of log lines: at most 10 lines a second, the next one counting the rest.
common::log::log_limiter close_lines(10, std::chrono::seconds(1));

}  // namespace

void connection::fail(v1::ErrorCode code, std::string text, std::uint64_t correlation_id) {
  if (auto line = close_lines.admit()) {
    common::log::info("connection ", id_, " (", peer_, ") closed: ", text, line.suppressed_note());
  }
  enqueue(error_frame(correlation_id, code, std::move(text)));
  closing_ = true;
  wake_writer_.cancel();
  // A reader waiting for request memory ends (the others wait again).
  if (limits_.memory) limits_.memory->wake_all();
  // A peer that does not read the reason does not keep the connection.
  set_deadline(deadline_kind::closing, k_close_grace);
}

void connection::close() {
  closing_ = true;
  boost::system::error_code ec;
  // Ends the reader; the writer finishes the queue and then closes the socket.
  stream_.socket().shutdown(asio::ip::tcp::socket::shutdown_receive, ec);
  // Before the reader and writer exist (TLS handshake) there is nobody to finish: close now.
  if (handshaking_) shutdown();
  wake_writer_.cancel();
  if (limits_.memory) limits_.memory->wake_all();
}

void connection::shutdown() {
  if (closed_) return;
  closed_ = true;
  closing_ = true;
  stream_.close();
  wake_writer_.cancel();
  deadline_timer_.cancel();
  std::string().swap(out_);
  // Answers to this connection's requests are dropped from now on: what they held is free.
  if (limits_.memory) {
    for (auto& [corr, bytes] : charged_) limits_.memory->release(bytes);
    limits_.memory->wake_all();
  }
  charged_.clear();
  service_.connection_closed(*this);
  if (on_closed_) std::exchange(on_closed_, nullptr)();
}

awaitable<void> refuse_connection(asio::ip::tcp::socket socket, v1::Frame error) {
  // Shared with the linger timer's handler, which may run after this coroutine ended.
  auto s = std::make_shared<asio::ip::tcp::socket>(std::move(socket));
  boost::system::error_code ec;
  asio::steady_timer linger(s->get_executor(), k_refuse_linger);
  // Closing the socket when the linger ends wakes the read below.
  linger.async_wait([s](boost::system::error_code wait_ec) {
    if (wait_ec) return;
    boost::system::error_code close_ec;
    s->close(close_ec);
  });
  std::string bytes;
  if (protocol::encode_frame(error, bytes, protocol::pre_hello_max_frame_bytes)) {
    // A few hundred bytes into the empty send buffer of a new socket: completes at once.
    co_await asio::async_write(*s, asio::buffer(bytes), as_tuple_awaitable);
  }
  s->shutdown(asio::ip::tcp::socket::shutdown_send, ec);
  std::array<char, 4096> sink{};
  std::size_t drained = 0;
  while (s->is_open() && drained < protocol::pre_hello_max_frame_bytes) {
    auto [read_ec, n] = co_await s->async_read_some(asio::buffer(sink), as_tuple_awaitable);
    if (read_ec) break;
    drained += n;
  }
  linger.cancel();
  s->close(ec);
}

}  // namespace txmq::broker
