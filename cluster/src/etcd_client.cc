#include "txmq/cluster/etcd_client.h"

#include <algorithm>
#include <limits>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/stream_parser.hpp>

#include "etcd_json.h"
#include "txmq/cluster/errc.h"

namespace txmq::cluster {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using clock = std::chrono::steady_clock;

// An idle pool this small is enough: the control plane has a handful of requests in flight.
constexpr std::size_t k_max_idle = 4;

struct etcd_client::connection {
  explicit connection(asio::any_io_executor ex) : stream(std::move(ex)) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  std::size_t endpoint = 0;
};

void watch_stop::stop() {
  stopped_ = true;
  if (close_) close_();
}

std::string prefix_end(std::string_view prefix) {
  std::string end(prefix);
  // The smallest key greater than every key with this prefix: drop trailing 0xff bytes, then
  // add one to the last byte. An empty result means "to the end of the key space" ("\0").
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) return std::string(1, '\0');
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

result<std::vector<common::host_port>> parse_etcd_endpoints(std::string_view urls) {
  std::vector<common::host_port> out;
  while (!urls.empty()) {
    const auto comma = urls.find(',');
    std::string_view part = urls.substr(0, comma);
    urls = comma == std::string_view::npos ? std::string_view() : urls.substr(comma + 1);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    if (part.empty()) continue;
    if (part.starts_with("https://"))
      return error(errc::invalid_argument, "etcd endpoint '" + std::string(part) +
                                               "': https is not supported yet (use http:// on a private network)");
    if (part.starts_with("http://")) part.remove_prefix(7);
    if (!part.empty() && part.back() == '/') part.remove_suffix(1);
    auto hp = common::parse_host_port(part);
    if (!hp || hp.value().port == 0)
      return error(errc::invalid_argument, "etcd endpoint '" + std::string(part) +
                                               "' is not http://HOST:PORT (e.g. http://127.0.0.1:2379)");
    out.push_back(std::move(hp).value());
  }
  if (out.empty()) return error(errc::invalid_argument, "no etcd endpoint given (e.g. http://127.0.0.1:2379)");
  return out;
}

etcd_client::etcd_client(asio::any_io_executor ex, etcd_options options)
    : ex_(std::move(ex)), options_(std::move(options)) {}

etcd_client::~etcd_client() = default;

void etcd_client::close() { idle_.clear(); }

asio::awaitable<result<std::unique_ptr<etcd_client::connection>>> etcd_client::connect(clock::time_point deadline) {
  const std::size_t n = options_.endpoints.size();
  if (n == 0) co_return error(errc::invalid_argument, "no etcd endpoint configured");
  std::string failures;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t index = (current_ + i) % n;
    const auto& address = options_.endpoints[index];
    auto endpoint = common::to_endpoint(address);
    if (!endpoint) {
      failures += (failures.empty() ? "" : "; ") + endpoint.error().message;
      continue;
    }
    // Each endpoint left gets an equal share of the time left, so a hung one does not eat the
    // time of the next.
    const auto now = clock::now();
    if (now >= deadline) break;
    const auto share = (deadline - now) / static_cast<long>(n - i);
    auto c = std::make_unique<connection>(ex_);
    c->endpoint = index;
    c->stream.expires_after(share);
    beast::error_code ec;
    co_await c->stream.async_connect(endpoint.value(), asio::redirect_error(asio::use_awaitable, ec));
    if (!ec) {
      current_ = index;
      co_return std::move(c);
    }
    failures += (failures.empty() ? "" : "; ") + address.to_string() + ": " + ec.message();
  }
  co_return error(errc::etcd_unavailable, "no etcd endpoint answered (" + failures + ")");
}

asio::awaitable<result<std::string>> etcd_client::post(std::string_view target, std::string body) {
  const auto deadline = clock::now() + options_.request_timeout;
  std::string last_failure;
  // A reused connection may have been closed by etcd meanwhile: such a failure is retried on a
  // new connection. A failure on a new connection moves on to the next endpoint.
  for (int attempt = 0; attempt < static_cast<int>(options_.endpoints.size()) + 2 && clock::now() < deadline;
       ++attempt) {
    std::unique_ptr<connection> c;
    bool reused = false;
    if (!idle_.empty()) {
      c = std::move(idle_.back());
      idle_.pop_back();
      reused = true;
    } else {
      auto opened = co_await connect(deadline);
      if (!opened) co_return opened.error();
      c = std::move(opened).value();
    }
    http::request<http::string_body> req{http::verb::post, target, 11};
    req.set(http::field::host, options_.endpoints[c->endpoint].to_string());
    req.set(http::field::content_type, "application/json");
    req.keep_alive(true);
    req.body() = body;
    req.prepare_payload();
    c->stream.expires_at(deadline);
    beast::error_code ec;
    co_await http::async_write(c->stream, req, asio::redirect_error(asio::use_awaitable, ec));
    http::response_parser<http::string_body> parser;
    parser.body_limit(64u << 20);
    if (!ec) co_await http::async_read(c->stream, c->buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      last_failure = options_.endpoints[c->endpoint].to_string() + ": " + ec.message();
      if (!reused) current_ = (c->endpoint + 1) % options_.endpoints.size();
      continue;
    }
    auto res = parser.release();
    const bool keep = res.keep_alive();
    const unsigned status = res.result_int();
    std::string answer = std::move(res.body());
    if (keep && idle_.size() < k_max_idle) {
      c->stream.expires_never();
      idle_.push_back(std::move(c));
    }
    if (status != 200) co_return detail::decode_error(status, answer);
    co_return answer;
  }
  co_return error(errc::etcd_unavailable,
                  "etcd did not answer " + std::string(target) + " within " +
                      std::to_string(options_.request_timeout.count()) + "ms" +
                      (last_failure.empty() ? std::string() : " (" + last_failure + ")"));
}

namespace {
// Answers of unary calls are objects; a gateway error may also come with status 200.
result<boost::json::object> answer_object(const std::string& text) {
  TXMQ_TRY(auto o, detail::parse_object(text));
  if (const auto* e = o.if_contains("error"); e != nullptr && !(e->is_string() && e->get_string().empty()))
    return detail::decode_error(200, text);
  return o;
}
}  // namespace

asio::awaitable<result<range_result>> etcd_client::range(std::string key, std::string range_end) {
  auto text = co_await post("/v3/kv/range", detail::encode_range(key, range_end));
  if (!text) co_return text.error();
  auto o = answer_object(text.value());
  if (!o) co_return o.error();
  co_return detail::decode_range(o.value());
}

asio::awaitable<result<std::int64_t>> etcd_client::put(std::string key, std::string value, std::int64_t lease) {
  auto text = co_await post("/v3/kv/put", detail::encode_put(key, value, lease));
  if (!text) co_return text.error();
  auto o = answer_object(text.value());
  if (!o) co_return o.error();
  co_return detail::decode_revision(o.value());
}

asio::awaitable<result<std::int64_t>> etcd_client::remove(std::string key, std::string range_end) {
  auto text = co_await post("/v3/kv/deleterange", detail::encode_delete(key, range_end));
  if (!text) co_return text.error();
  auto o = answer_object(text.value());
  if (!o) co_return o.error();
  co_return detail::decode_deleted(o.value());
}

asio::awaitable<result<txn_result>> etcd_client::txn(const txn_request& request) {
  auto text = co_await post("/v3/kv/txn", detail::encode_txn(request));
  if (!text) co_return text.error();
  auto o = answer_object(text.value());
  if (!o) co_return o.error();
  co_return detail::decode_txn(o.value());
}

asio::awaitable<result<lease_grant_result>> etcd_client::lease_grant(std::chrono::seconds ttl) {
  auto text = co_await post("/v3/lease/grant", detail::encode_lease_grant(ttl.count()));
  if (!text) co_return text.error();
  auto o = answer_object(text.value());
  if (!o) co_return o.error();
  co_return detail::decode_lease_grant(o.value());
}

asio::awaitable<result<std::chrono::seconds>> etcd_client::lease_keepalive(std::int64_t id) {
  // The gateway's keep-alive is a stream; one request in the body gives one answer, then the
  // stream ends.
  auto text = co_await post("/v3/lease/keepalive", detail::encode_lease_id(id));
  if (!text) co_return text.error();
  auto o = detail::parse_object(text.value());
  if (!o) co_return o.error();
  co_return detail::decode_keepalive(o.value());
}

asio::awaitable<result<void>> etcd_client::lease_revoke(std::int64_t id) {
  auto text = co_await post("/v3/lease/revoke", detail::encode_lease_id(id));
  if (!text) {
    if (text.error().is(errc::lease_not_found)) co_return outcome::success();
    co_return text.error();
  }
  co_return outcome::success();
}

asio::awaitable<error> etcd_client::watch(std::string key, std::string range_end, std::int64_t start_revision,
                                          std::function<void(const std::vector<watch_event>&)> on_events,
                                          std::int64_t& next_revision, std::shared_ptr<watch_stop> stop) {
  next_revision = start_revision;
  if (stop && stop->stopped()) co_return error(errc::etcd_unavailable, "watch stopped");
  auto opened = co_await connect(clock::now() + options_.request_timeout);
  if (!opened) co_return opened.error();
  auto c = std::move(opened).value();
  // Stopped while connecting: nothing would close this connection later.
  if (stop && stop->stopped()) co_return error(errc::etcd_unavailable, "watch stopped");
  if (stop) stop->close_ = [s = &c->stream] { s->socket().close(); };
  struct unhook {
    std::shared_ptr<watch_stop> stop;
    ~unhook() {
      if (stop) stop->close_ = nullptr;
    }
  } unhook_on_exit{stop};

  http::request<http::string_body> req{http::verb::post, "/v3/watch", 11};
  req.set(http::field::host, options_.endpoints[c->endpoint].to_string());
  req.set(http::field::content_type, "application/json");
  req.body() = detail::encode_watch_create(key, range_end, start_revision);
  req.prepare_payload();
  beast::error_code ec;
  c->stream.expires_after(options_.request_timeout);
  co_await http::async_write(c->stream, req, asio::redirect_error(asio::use_awaitable, ec));
  http::response_parser<http::empty_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  if (!ec) co_await http::async_read_header(c->stream, c->buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return error(errc::etcd_unavailable, "watch: " + ec.message());
  if (parser.get().result_int() != 200)
    co_return error(errc::etcd_error, "watch: HTTP " + std::to_string(parser.get().result_int()));
  // The stream stays open without a deadline: a dead etcd ends it with a reset or EOF, a hung
  // one is noticed by the session's keep-alives, whose owner then stops this watch.
  c->stream.expires_never();

  std::string pending;
  auto on_chunk = [&pending](std::uint64_t remain, std::string_view body, beast::error_code& cec) {
    if (remain == body.size()) cec = http::error::end_of_chunk;
    pending.append(body.data(), body.size());
    return body.size();
  };
  parser.on_chunk_body(on_chunk);
  boost::json::stream_parser json;
  while (!parser.is_done()) {
    co_await http::async_read(c->stream, c->buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec && ec != http::error::end_of_chunk) {
      if (stop && stop->stopped()) co_return error(errc::etcd_unavailable, "watch stopped");
      co_return error(errc::etcd_unavailable, "watch stream ended: " + ec.message());
    }
    // The gateway writes one JSON object per message, separated by newlines; a message may
    // arrive in pieces.
    std::size_t used = 0;
    while (used < pending.size()) {
      boost::system::error_code jec;
      used += json.write_some(pending.data() + used, pending.size() - used, jec);
      if (jec) co_return error(errc::bad_response, "watch stream: not JSON (" + jec.message() + ")");
      if (!json.done()) break;
      auto value = json.release();
      json.reset();
      if (!value.is_object()) co_return error(errc::bad_response, "watch stream: a message is not an object");
      auto m = detail::decode_watch_message(value.get_object());
      if (!m) co_return m.error();
      auto& msg = m.value();
      if (msg.compact_revision > 0)
        co_return error(errc::etcd_error, "watch: revision " + std::to_string(next_revision) +
                                              " was compacted (oldest kept: " +
                                              std::to_string(msg.compact_revision) + "); read the state anew");
      if (msg.canceled) co_return error(errc::etcd_error, "watch canceled by etcd: " + msg.cancel_reason);
      if (!msg.events.empty()) {
        next_revision = msg.events.back().kv.mod_revision + 1;
        on_events(msg.events);
      } else if (msg.created && next_revision == 0) {
        next_revision = msg.revision + 1;
      }
    }
    pending.erase(0, used);
  }
  co_return error(errc::etcd_unavailable, "watch stream closed by etcd");
}

}  // namespace txmq::cluster
