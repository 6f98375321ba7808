#pragma once

// TLS for the broker's two ports and for the clients (Asio SSL over OpenSSL, TLS 1.2 or later;
// docs/security.md "TLS"):
//   - server_tls: the broker's certificate, key and (for mTLS) client CA, loaded into an
//     ssl::context that reload() replaces as a whole (SIGHUP); connections keep the context
//     they were accepted with, so a reload never disturbs them;
//   - make_client_tls_context: a client's context (system CAs and/or a CA file, an optional
//     client certificate for mTLS);
//   - wire_stream: a TCP socket or a TLS stream over one, chosen at accept or connect. Callers
//     visit() it with one lambda, so both alternatives run the same code with no copy and no
//     extra coroutine frame on the plain path;
//   - describe_tls_failure: a handshake error as a sentence saying what to do.
//
// Thread-safety: server_tls::current() and reload() may be called from any thread (a mutex
// guards the pointer). An ssl::context is not modified after it is built, so it may be shared
// by connections on any thread. wire_stream is as thread-safe as an Asio socket (one strand).

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <variant>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>

#include "txmq/protocol/result.h"

namespace txmq::common {

// The first byte of every TLS connection (a ClientHello record is content type 22). A server
// that peeks anything else on its TLS port knows a plaintext client is speaking.
inline constexpr unsigned char k_tls_handshake_record = 0x16;

struct server_tls_files {
  std::string cert_file;       // PEM certificate chain, the leaf first
  std::string key_file;        // PEM private key of the leaf
  std::string client_ca_file;  // PEM CAs whose client certificates are required; empty = no mTLS
};

// A server context for `files`: TLS 1.2 minimum, the chain and key (checked to match), and with
// a client CA file, client certificates required and verified. Errors name the file and
// OpenSSL's reason ("cannot load tls_key_file '/x/k.pem': no start line").
[[nodiscard]] result<std::shared_ptr<boost::asio::ssl::context>> make_server_tls_context(
    const server_tls_files& files);

// The server's current context. reload() builds a new one from the same files and swaps it in
// only if it loads; on error the previous one stays and the error is returned.
class server_tls {
 public:
  // Loads the files once; errors as make_server_tls_context.
  [[nodiscard]] static result<std::shared_ptr<server_tls>> load(server_tls_files files);

  [[nodiscard]] std::shared_ptr<boost::asio::ssl::context> current() const;
  [[nodiscard]] result<void> reload();
  [[nodiscard]] const server_tls_files& files() const noexcept { return files_; }
  [[nodiscard]] bool requires_client_certificate() const noexcept { return !files_.client_ca_file.empty(); }

 private:
  server_tls(server_tls_files files, std::shared_ptr<boost::asio::ssl::context> ctx)
      : files_(std::move(files)), current_(std::move(ctx)) {}
  server_tls_files files_;
  mutable std::mutex mutex_;
  std::shared_ptr<boost::asio::ssl::context> current_;
};

struct client_tls_files {
  std::string ca_file;    // PEM CAs to trust; empty = the system's default CAs
  std::string cert_file;  // client certificate for mTLS; empty = none
  std::string key_file;   // its key (required with cert_file)
};

// A client context: TLS 1.2 minimum, peer verification on, the CAs of `files.ca_file` or the
// system's. Host names are verified per connection (wire_stream::client_handshake). Errors name
// the file and OpenSSL's reason.
[[nodiscard]] result<std::shared_ptr<boost::asio::ssl::context>> make_client_tls_context(
    const client_tls_files& files);

// The CN of the verified peer certificate of `ssl`, if the peer sent one and it verified.
[[nodiscard]] std::optional<std::string> verified_peer_common_name(SSL* ssl);

// A TCP socket or a TLS stream over one.
class wire_stream {
 public:
  using tcp = boost::asio::ip::tcp;
  using tls_stream = boost::asio::ssl::stream<tcp::socket>;

  explicit wire_stream(tcp::socket socket) : stream_(std::in_place_type<tcp::socket>, std::move(socket)) {}
  // A TLS stream over `socket`; keeps `ctx` alive as long as the stream.
  wire_stream(tcp::socket socket, std::shared_ptr<boost::asio::ssl::context> ctx)
      : ctx_(std::move(ctx)), stream_(std::in_place_type<tls_stream>, std::move(socket), *ctx_) {}

  [[nodiscard]] bool is_tls() const noexcept { return stream_.index() == 1; }
  [[nodiscard]] tcp::socket& socket() noexcept {
    return is_tls() ? std::get<tls_stream>(stream_).next_layer() : std::get<tcp::socket>(stream_);
  }
  [[nodiscard]] tls_stream* tls() noexcept { return std::get_if<tls_stream>(&stream_); }

  // Calls f with the stream (tcp::socket& or tls_stream&); both calls must return one type, as
  // every Asio initiation with the same completion token does.
  template <class F>
  decltype(auto) visit(F&& f) {
    return std::visit(std::forward<F>(f), stream_);
  }

  // Client side: SNI and certificate host-name verification for `host` (a name or an IP
  // literal). Call before the handshake. Errors: OpenSSL refused the name.
  [[nodiscard]] result<void> expect_server_name(const std::string& host);

  // Closes the TCP socket (no TLS close_notify: callers that want one shut down first).
  void close() noexcept {
    boost::system::error_code ignored;
    socket().shutdown(tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
  }

 private:
  std::shared_ptr<boost::asio::ssl::context> ctx_;
  std::variant<tcp::socket, tls_stream> stream_;
};

// A client's handshake error as a sentence for a person: an untrusted certificate, a host name
// the certificate does not name, a plaintext server ("is it a plaintext port? connect without
// --tls"), a refused protocol version, a missing client certificate. `where` is HOST:PORT.
[[nodiscard]] std::string describe_tls_failure(const boost::system::error_code& ec, SSL* ssl,
                                               const std::string& where);

}  // namespace txmq::common
