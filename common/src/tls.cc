#include "txmq/common/tls.h"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

namespace txmq::common {

namespace asio = boost::asio;
namespace ssl = asio::ssl;

namespace {

// What OpenSSL said last (its queue), or the Asio error's text.
std::string openssl_reason(const boost::system::error_code& ec) {
  if (const unsigned long e = ERR_peek_last_error(); e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    return buf;
  }
  return ec.message();
}

// One file into the context; the error names the setting or flag and the file.
template <class F>
result<void> load(std::string_view what, const std::string& file, F&& f) {
  boost::system::error_code ec;
  ERR_clear_error();
  f(ec);
  if (ec) return invalid("cannot load " + std::string(what) + " '" + file + "': " + openssl_reason(ec));
  return outcome::success();
}

void restrict_versions(ssl::context& ctx) {
  // TLS 1.0 and 1.1 are refused by both sides; compression off (CRIME).
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
  ctx.set_options(ssl::context::default_workarounds | ssl::context::no_compression);
}

}  // namespace

result<std::shared_ptr<ssl::context>> make_server_tls_context(const server_tls_files& files) {
  if (files.cert_file.empty() || files.key_file.empty()) {
    return invalid("TLS needs both tls_cert_file and tls_key_file");
  }
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  restrict_versions(*ctx);
  if (auto r = load("tls_cert_file", files.cert_file,
                    [&](auto& ec) { ctx->use_certificate_chain_file(files.cert_file, ec); });
      !r) {
    return r.error();
  }
  if (auto r = load("tls_key_file", files.key_file,
                    [&](auto& ec) { ctx->use_private_key_file(files.key_file, ssl::context::pem, ec); });
      !r) {
    return r.error();
  }
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
    ERR_clear_error();
    return invalid("tls_key_file '" + files.key_file + "' is not the key of the certificate in tls_cert_file '" +
                   files.cert_file + "'");
  }
  if (!files.client_ca_file.empty()) {
    if (auto r = load("tls_client_ca_file", files.client_ca_file,
                      [&](auto& ec) { ctx->load_verify_file(files.client_ca_file, ec); });
        !r) {
      return r.error();
    }
    // Tell clients which CAs we accept (so a client with several certificates picks one).
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca_file.c_str())) {
      SSL_CTX_set_client_CA_list(ctx->native_handle(), names);
    }
    ERR_clear_error();
    ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  }
  return ctx;
}

result<std::shared_ptr<server_tls>> server_tls::load(server_tls_files files) {
  auto ctx = make_server_tls_context(files);
  if (!ctx) return ctx.error();
  return std::shared_ptr<server_tls>(new server_tls(std::move(files), std::move(ctx).value()));
}

std::shared_ptr<ssl::context> server_tls::current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

result<void> server_tls::reload() {
  auto ctx = make_server_tls_context(files_);
  if (!ctx) return ctx.error();
  std::lock_guard lock(mutex_);
  current_ = std::move(ctx).value();
  return outcome::success();
}

result<std::shared_ptr<ssl::context>> make_client_tls_context(const client_tls_files& files) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  restrict_versions(*ctx);
  ctx->set_verify_mode(ssl::verify_peer);
  if (files.ca_file.empty()) {
    if (auto r = load("the system's CA certificates", "default paths",
                      [&](auto& ec) { ctx->set_default_verify_paths(ec); });
        !r) {
      return r.error();
    }
  } else if (auto r = load("--tls-ca", files.ca_file, [&](auto& ec) { ctx->load_verify_file(files.ca_file, ec); });
             !r) {
    return r.error();
  }
  if (files.cert_file.empty() != files.key_file.empty()) {
    return invalid("a client certificate needs both --tls-cert and --tls-key");
  }
  if (!files.cert_file.empty()) {
    if (auto r = load("--tls-cert", files.cert_file,
                      [&](auto& ec) { ctx->use_certificate_chain_file(files.cert_file, ec); });
        !r) {
      return r.error();
    }
    if (auto r = load("--tls-key", files.key_file,
                      [&](auto& ec) { ctx->use_private_key_file(files.key_file, ssl::context::pem, ec); });
        !r) {
      return r.error();
    }
    if (SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
      ERR_clear_error();
      return invalid("--tls-key '" + files.key_file + "' is not the key of --tls-cert '" + files.cert_file + "'");
    }
  }
  return ctx;
}

std::optional<std::string> verified_peer_common_name(SSL* ssl) {
  if (ssl == nullptr || SSL_get_verify_result(ssl) != X509_V_OK) return std::nullopt;
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return std::nullopt;
  std::optional<std::string> out;
  X509_NAME* subject = X509_get_subject_name(cert);
  const int index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (index >= 0) {
    ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, index));
    unsigned char* utf8 = nullptr;
    const int n = ASN1_STRING_to_UTF8(&utf8, data);
    if (n > 0) out = std::string(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(n));
    OPENSSL_free(utf8);
  }
  X509_free(cert);
  return out;
}

result<void> wire_stream::expect_server_name(const std::string& host) {
  auto* s = tls();
  if (s == nullptr) return outcome::success();
  SSL* handle = s->native_handle();
  boost::system::error_code ec;
  (void)asio::ip::make_address(host, ec);
  if (!ec) {
    // An IP literal: checked against the certificate's IP addresses; no SNI (RFC 6066).
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(handle), host.c_str()) != 1) {
      return invalid("cannot verify the broker's certificate for address " + host);
    }
    return outcome::success();
  }
  if (SSL_set_tlsext_host_name(handle, host.c_str()) != 1 || SSL_set1_host(handle, host.c_str()) != 1) {
    return invalid("cannot verify the broker's certificate for host name " + host);
  }
  return outcome::success();
}

std::string describe_tls_failure(const boost::system::error_code& ec, SSL* ssl, const std::string& where) {
  if (ssl != nullptr) {
    const long verify = SSL_get_verify_result(ssl);
    if (verify == X509_V_ERR_HOSTNAME_MISMATCH || verify == X509_V_ERR_IP_ADDRESS_MISMATCH) {
      return "the certificate of " + where +
             " does not name the host connected to (wrong host name); connect with a name the certificate "
             "lists, or use a certificate that names this host";
    }
    if (verify != X509_V_OK && SSL_get0_peer_certificate(ssl) != nullptr) {
      return "the certificate of " + where + " is not trusted (" + X509_verify_cert_error_string(verify) +
             "); pass the CA that signed it with --tls-ca FILE";
    }
  }
  const std::string reason = ec.category() == asio::error::get_ssl_category()
                                 ? std::string(ERR_reason_error_string(static_cast<unsigned long>(ec.value()))
                                                   ? ERR_reason_error_string(static_cast<unsigned long>(ec.value()))
                                                   : "")
                                 : std::string();
  const int r = ec.category() == asio::error::get_ssl_category() ? ERR_GET_REASON(static_cast<unsigned long>(ec.value()))
                                                                 : 0;
  ERR_clear_error();
  if (r == SSL_R_WRONG_VERSION_NUMBER || r == SSL_R_PACKET_LENGTH_TOO_LONG ||
      r == SSL_R_UNEXPECTED_RECORD || r == SSL_R_UNKNOWN_PROTOCOL) {
    return where + " did not answer in TLS (" + reason +
           "): it is probably a plaintext port; connect without --tls/--tls-ca, or to the broker's TLS port";
  }
  if (r == SSL_R_UNSUPPORTED_PROTOCOL || r == SSL_R_TLSV1_ALERT_PROTOCOL_VERSION ||
      r == SSL_R_NO_PROTOCOLS_AVAILABLE) {
    return where + " and this client share no TLS version (" + reason + "); txmq requires TLS 1.2 or later";
  }
  if (r == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED || r == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE ||
      r == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
    return where + " refused the TLS handshake (" + reason +
           "): it requires a client certificate signed by its client CA; pass --tls-cert FILE --tls-key FILE";
  }
  if (r == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE || r == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
      r == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN) {
    return where + " refused our client certificate (" + reason + "): it is not signed by the broker's client CA";
  }
  if (r == SSL_R_CERTIFICATE_VERIFY_FAILED) {
    return "the certificate of " + where + " is not trusted; pass the CA that signed it with --tls-ca FILE";
  }
  if (ec == asio::error::eof || ec == ssl::error::stream_truncated || ec == asio::error::connection_reset) {
    return where + " closed the connection during the TLS handshake (is it a plaintext port? connect without "
                   "--tls/--tls-ca)";
  }
  return "TLS handshake with " + where + " failed: " + (reason.empty() ? ec.message() : reason);
}

}  // namespace txmq::common
