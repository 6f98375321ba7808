// The public connection: the facade over connection::impl and the calls made on user threads
// (construction, close, waiting for the connection, submitting requests). See
// connection_impl.h for how the three source files divide the work.

#include "connection_impl.h"

#include <future>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>

#include "txmq/common/address.h"

namespace txmq::client {

result<broker_address> broker_address::parse(std::string_view text) {
  auto parsed = common::parse_host_port(text);
  if (!parsed) return error(errc::bad_address, parsed.error().message);
  // Port 0 means "any free port" to a listener; a client cannot connect to it.
  if (parsed.value().port == 0) {
    return error(errc::bad_address, "'" + std::string(text) + "' is not HOST:PORT (the port must be a number from 1 to 65535)");
  }
  auto& address = parsed.value();
  return broker_address{std::move(address.host), address.port};
}

std::string broker_address::to_string() const { return common::host_port{host, port}.to_string(); }

bool is_response(const v1::Frame& frame) noexcept {
  switch (frame.body_case()) {
    case v1::Frame::kError:
    case v1::Frame::kHelloOk:
    case v1::Frame::kProduceResponse:
    case v1::Frame::kFetchResponse:
    case v1::Frame::kDeliveryResults:
    case v1::Frame::kTopicInfo:
    case v1::Frame::kListTopicsResponse:
    case v1::Frame::kGroupInfo:
    case v1::Frame::kListGroupsResponse:
    case v1::Frame::kDlqListResponse:
    case v1::Frame::kDlqRedriveResponse:
    case v1::Frame::kPrepareResponse:
    case v1::Frame::kEndTxResponse:
    case v1::Frame::kTxListResponse:
    case v1::Frame::kTxInfo:
    case v1::Frame::kWebhook:
    case v1::Frame::kWebhookListResponse:
    case v1::Frame::kWebhookDeleteResponse:
    case v1::Frame::kWebhookAttemptsResponse:
    case v1::Frame::kWebhookReplayResponse:
    case v1::Frame::kPrincipalCreateResponse:
    case v1::Frame::kPrincipalListResponse:
    case v1::Frame::kPrincipalDeleteResponse:
    case v1::Frame::kAclChangeResponse:
    case v1::Frame::kAclListResponse:
    case v1::Frame::kMetadataResponse:
      return true;
    default:
      return false;
  }
}

connection::impl::impl(connection_options options) : options_(std::move(options)) {
  // A bootstrap list "HOST:PORT,HOST:PORT": the first is tried first, and each failed attempt
  // moves to the next (cluster mode: any live node answers Metadata).
  std::string_view rest = options_.address;
  for (;;) {
    const auto comma = rest.find(',');
    auto address = broker_address::parse(rest.substr(0, comma));
    if (!address) {
      address_error_ = address.error();
      bootstrap_.clear();
      break;
    }
    bootstrap_.push_back(std::move(address).value());
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  if (!bootstrap_.empty()) address_ = bootstrap_.front();
  // A CA file implies TLS: nobody names a CA to speak plaintext.
  if (options_.tls.enabled || !options_.tls.ca_file.empty()) {
    auto ctx = common::make_client_tls_context(
        {options_.tls.ca_file, options_.tls.cert_file, options_.tls.key_file});
    if (ctx) {
      tls_context_ = std::move(ctx).value();
    } else {
      tls_error_ = error(errc::tls_failed, ctx.error().message);
    }
  }
  thread_ = std::thread([this] {
    io_thread_id_.store(std::this_thread::get_id());
    io_.run();
  });
  if (address_) {
    asio::co_spawn(io_, run(), [this](std::exception_ptr ep) {
      if (ep) {
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          log(std::string("connection loop failed: ") + e.what());
        }
        fail_all(error(errc::closed, "the connection to " + options_.address + " stopped after an internal error"));
      }
      std::lock_guard lock(mutex_);
      run_finished_ = true;
      cv_.notify_all();
    });
  } else {
    std::lock_guard lock(mutex_);
    run_finished_ = true;
  }
}

connection::impl::~impl() {
  close();
  handler_pool_.join();
  work_.reset();
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

void connection::impl::close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  asio::post(io_, [this] { begin_close(); });
  if (on_io_thread()) return;
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return run_finished_; });
  lock.unlock();
  // Requests that could not be posted before run() ended (a bad address) fail here too.
  std::promise<void> drained;
  asio::post(io_, [&] {
    fail_all(error(errc::closed, "the connection to " + options_.address + " was closed"));
    drained.set_value();
  });
  drained.get_future().wait();
}

result<void> connection::impl::wait_connected(std::chrono::milliseconds timeout) {
  if (!address_) return address_error_;
  std::unique_lock lock(mutex_);
  cv_.wait_for(lock, timeout, [&] { return connected_ || refused_ || closed_; });
  if (connected_) return outcome::success();
  if (closed_) return error(errc::closed, "the connection to " + options_.address + " was closed");
  if (last_error_ && (refused_ || detail::is_refusal(*last_error_))) return *last_error_;
  std::string text = "no connection to " + options_.address + " within " + std::to_string(timeout.count()) + " ms";
  if (last_error_) text += " (last attempt: " + last_error_->to_string() + ")";
  return error(errc::not_connected, std::move(text));
}

void connection::impl::async_request(v1::Frame& request, response_callback cb, std::optional<std::chrono::milliseconds> timeout) {
  if (!address_) return cb(address_error_);
  const std::uint64_t id = next_id_.fetch_add(1);
  request.set_correlation_id(id);
  std::string bytes;
  if (auto r = protocol::encode_frame(request, bytes, send_limit_.load()); !r) {
    if (r.error() == protocol::errc::frame_too_large) {
      return cb(error(protocol::errc::frame_too_large,
                      "request of " + std::to_string(request.ByteSizeLong()) + " bytes is above the broker's frame limit of " +
                          std::to_string(send_limit_.load()) + " bytes; send smaller batches"));
    }
    return cb(error(errc::invalid_argument, "cannot encode an empty request frame"));
  }
  const auto wait = timeout.value_or(options_.request_timeout);
  std::lock_guard lock(mutex_);
  if (closed_) return cb(error(errc::closed, "the connection to " + options_.address + " was closed"));
  asio::post(io_, [this, id, bytes = std::move(bytes), cb = std::move(cb), wait]() mutable {
    enqueue_request(id, std::move(bytes), std::move(cb), wait);
  });
}

result<v1::Frame> connection::impl::request(v1::Frame request, std::optional<std::chrono::milliseconds> timeout) {
  if (on_io_thread()) {
    return error(errc::would_deadlock, "connection::request() called on the connection's io thread (from a callback); use async_request");
  }
  auto done = std::make_shared<std::promise<result<v1::Frame>>>();
  auto future = done->get_future();
  async_request(request, [done](result<v1::Frame> r) { done->set_value(std::move(r)); }, timeout);
  // Every request is answered: by the broker, by its timeout timer, or by close().
  return future.get();
}

connection::connection(connection_options options) : impl_(std::make_unique<impl>(std::move(options))) {}
connection::~connection() = default;

result<std::shared_ptr<connection>> connection::connect(connection_options options) {
  const auto timeout = options.connect_timeout;
  auto c = std::make_shared<connection>(std::move(options));
  auto ready = c->wait_connected(timeout);
  if (!ready) return ready.error();
  return c;
}

result<void> connection::wait_connected(std::chrono::milliseconds timeout) { return impl_->wait_connected(timeout); }

void connection::async_request(v1::Frame request, response_callback cb, std::optional<std::chrono::milliseconds> timeout) {
  impl_->async_request(request, std::move(cb), timeout);
}

void connection::async_request_encoding_now(v1::Frame& request, response_callback cb,
                                            std::optional<std::chrono::milliseconds> timeout) {
  impl_->async_request(request, std::move(cb), timeout);
}

result<v1::Frame> connection::request(v1::Frame request, std::optional<std::chrono::milliseconds> timeout) {
  return impl_->request(std::move(request), timeout);
}

void connection::set_request_handler(request_handler handler) { impl_->set_request_handler(std::move(handler)); }
bool connection::is_connected() const noexcept { return impl_->is_connected(); }
std::optional<server_info> connection::server() const { return impl_->server(); }
std::uint64_t connection::connects() const noexcept { return impl_->connects(); }
const connection_options& connection::options() const noexcept { return impl_->options(); }
void connection::close() { impl_->close(); }

}  // namespace txmq::client
