// TLS end to end (docs/security.md "TLS"): the real txmq-broker with certificates the openssl
// binary makes in a temporary directory (a CA, a server certificate for 127.0.0.1/localhost, one
// for another host name, one from an unknown CA, a client certificate), the txmq CLI, the
// producer and consumer libraries, curl on the admin port, and OpenSSL contexts of our own for
// what the clients refuse to do (TLS 1.1). Each refusal must say what is wrong.

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "broker_process.h"
#include "fault_support.h"
#include "child_process.h"
#include "cli_runner.h"
#include "eventually.h"
#include "test_certificates.h"
#include "txmq/consumer/consumer.h"
#include "txmq/producer/producer.h"

namespace txmq::test {
namespace {

namespace asio = boost::asio;
namespace fs = std::filesystem;

// Runs a shell command; its stdout and stderr (the errors curl and openssl print are asserted).
std::string shell(const std::string& command) { return shell_stdout(command + " 2>&1"); }

// The certificates of one test, made by the openssl binary (support/test_certificates.h).
using certificates = test_certificates;

class tls_test : public ::testing::Test {
 protected:
  void SetUp() override {
    certs_.dir = fs::temp_directory_path() / ("txmq-tls-" + std::to_string(::getpid()) + "-" +
                                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(certs_.dir);
    fs::create_directories(certs_.dir);
    ASSERT_NO_FATAL_FAILURE(certs_.authority("ca", "txmq test CA"));
    ASSERT_NO_FATAL_FAILURE(certs_.leaf("server", "localhost", "DNS:localhost,IP:127.0.0.1"));
    ASSERT_NO_FATAL_FAILURE(certs_.leaf("wrong", "wrong.example", "DNS:wrong.example"));
    ASSERT_NO_FATAL_FAILURE(certs_.authority("other-ca", "another CA"));
    ASSERT_NO_FATAL_FAILURE(certs_.leaf("foreign", "localhost", "DNS:localhost,IP:127.0.0.1", "other-ca"));
    ASSERT_NO_FATAL_FAILURE(certs_.leaf("client", "alice", "DNS:alice"));
    ASSERT_NO_FATAL_FAILURE(certs_.leaf("stranger", "mallory", "DNS:mallory", "other-ca"));
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(certs_.dir, ec);
  }

  std::vector<std::string> serving(const std::string& leaf, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--tls-cert-file", certs_.path(leaf + ".pem"), "--tls-key-file",
                                     certs_.path(leaf + ".key")};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  // txmq --broker HOST:PORT --tls-ca ca.pem args...
  cli_result txmq_tls(const broker_process& b, std::vector<std::string> args, const std::string& host = "127.0.0.1") {
    std::vector<std::string> all = {"--broker", host + ":" + std::to_string(b.port()), "--tls-ca", certs_.path("ca.pem")};
    all.insert(all.end(), args.begin(), args.end());
    return run_txmq(all);
  }

  certificates certs_;
};

// The CN of the certificate the broker serves on `port` now (no verification: only looking).
std::string served_cn(std::uint16_t port) {
  asio::io_context io;
  asio::ssl::context ctx(asio::ssl::context::tls_client);
  asio::ssl::stream<asio::ip::tcp::socket> s(io, ctx);
  s.next_layer().connect({asio::ip::make_address("127.0.0.1"), port});
  boost::system::error_code ec;
  s.handshake(asio::ssl::stream_base::client, ec);
  if (ec) return "handshake failed: " + ec.message();
  X509* cert = SSL_get1_peer_certificate(s.native_handle());
  if (cert == nullptr) return "no certificate";
  char cn[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
  X509_free(cert);
  return cn;
}

TEST_F(tls_test, the_cli_connects_with_tls_ca_by_address_and_by_name) {
  broker_process b(serving("server"));
  b.start();
  auto created = txmq_tls(b, {"topic", "create", "t", "--partitions", "1"});
  ASSERT_EQ(created.status, 0) << created;
  auto produced = txmq_tls(b, {"produce", "t", "over tls"}, "localhost");
  ASSERT_EQ(produced.status, 0) << produced;
  auto consumed = txmq_tls(b, {"--json", "consume", "t", "--group", "g", "--max", "1", "--wait", "5000"});
  ASSERT_EQ(consumed.status, 0) << consumed;
  ASSERT_EQ(consumed.objects().size(), 1u) << consumed;
  EXPECT_EQ(std::string(consumed.objects()[0].at("body").as_string()), "over tls");
  EXPECT_NE(b.log().find(", TLS"), std::string::npos) << b.log();
}

TEST_F(tls_test, the_producer_and_consumer_libraries_connect_with_tls) {
  broker_process b(serving("server"));
  b.start();
  ASSERT_EQ(txmq_tls(b, {"topic", "create", "libs", "--partitions", "1"}).status, 0);
  client::connection_options co;
  co.address = "localhost:" + std::to_string(b.port());
  co.tls.ca_file = certs_.path("ca.pem");
  {
    producer::producer_options po;
    po.connection = co;
    producer::producer p(po);
    producer::outgoing_message m;
    m.topic = "libs";
    m.body = "from the library";
    auto r = p.send(std::move(m));
    ASSERT_TRUE(r) << r.error().message;
  }
  consumer::consumer_options copts;
  copts.connection = co;
  copts.group = "g";
  copts.topics = {"libs"};
  consumer::consumer c(copts);
  std::vector<consumer::delivery> got;
  ASSERT_TRUE(eventually([&] {
    auto f = c.fetch(10, std::chrono::milliseconds(200));
    if (f) got.insert(got.end(), f.value().begin(), f.value().end());
    return !got.empty();
  }));
  EXPECT_EQ(got.at(0).message.body(), "from the library");
}

TEST_F(tls_test, an_untrusted_certificate_is_refused_clearly) {
  broker_process b(serving("foreign"));
  b.start();
  auto r = txmq_tls(b, {"topic", "list"});
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("is not trusted"), std::string::npos) << r;
  EXPECT_NE(r.err.find("--tls-ca"), std::string::npos) << r;
  // --tls trusts the system's CAs, which do not include a test CA either.
  auto sys = run_txmq({"--broker", b.address(), "--tls", "topic", "list"});
  EXPECT_EQ(sys.status, 1) << sys;
  EXPECT_NE(sys.err.find("is not trusted"), std::string::npos) << sys;
}

TEST_F(tls_test, a_certificate_for_another_host_name_is_refused_clearly) {
  broker_process b(serving("wrong"));
  b.start();
  auto r = txmq_tls(b, {"topic", "list"}, "localhost");
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("wrong host name"), std::string::npos) << r;
  // The same certificate is accepted for the name it carries (the chain itself is fine).
  auto named = txmq_tls(b, {"--tls-server-name", "wrong.example", "topic", "list"});
  EXPECT_EQ(named.status, 0) << named;
  // And a right certificate is refused for a name it does not carry.
  broker_process right(serving("server"));
  right.start();
  auto other = txmq_tls(right, {"--tls-server-name", "wrong.example", "topic", "list"});
  EXPECT_EQ(other.status, 1) << other;
  EXPECT_NE(other.err.find("wrong host name"), std::string::npos) << other;
}

TEST_F(tls_test, plaintext_against_the_tls_port_and_tls_against_the_plain_port_say_so) {
  broker_process tls(serving("server"));
  tls.start();
  auto plain = run_txmq({"--broker", tls.address(), "topic", "list"});
  EXPECT_EQ(plain.status, 1) << plain;
  EXPECT_NE(plain.err.find("requires TLS"), std::string::npos) << plain;
  // The broker goes on serving.
  EXPECT_EQ(txmq_tls(tls, {"topic", "list"}).status, 0);
  EXPECT_NE(tls.log().find("a plaintext client on the TLS port"), std::string::npos);

  broker_process open;
  open.start();
  auto r = txmq_tls(open, {"topic", "list"});
  EXPECT_EQ(r.status, 1) << r;
  EXPECT_NE(r.err.find("plaintext port"), std::string::npos) << r;
  EXPECT_EQ(txmq(open, {"topic", "list"}).status, 0);
}

TEST_F(tls_test, a_handshake_that_never_completes_is_closed_after_hello_timeout) {
  broker_process b(serving("server", {"--hello-timeout", "500ms"}));
  b.start();
  asio::io_context io;
  asio::ip::tcp::socket s(io);
  s.connect({asio::ip::make_address("127.0.0.1"), b.port()});
  // The first byte of a TLS record, then nothing.
  const unsigned char first = 0x16;
  asio::write(s, asio::buffer(&first, 1));
  const auto t0 = std::chrono::steady_clock::now();
  char sink[64];
  boost::system::error_code ec;
  (void)s.read_some(asio::buffer(sink), ec);  // returns when the broker closes
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(ec) << "the broker answered instead of closing";
  EXPECT_GE(waited, std::chrono::milliseconds(400));
  EXPECT_LT(waited, std::chrono::seconds(5));
  EXPECT_NE(b.log().find("no TLS handshake within hello_timeout"), std::string::npos) << b.log();
  EXPECT_EQ(txmq_tls(b, {"topic", "list"}).status, 0);
}

TEST_F(tls_test, tls_1_1_is_refused) {
  broker_process b(serving("server"));
  b.start();
  // A client that offers TLS 1.1 only (security level 0 so that OpenSSL sends it at all).
  asio::io_context io;
  asio::ssl::context ctx(asio::ssl::context::tls_client);
  SSL_CTX_set_security_level(ctx.native_handle(), 0);
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_1_VERSION);
  SSL_CTX_set_max_proto_version(ctx.native_handle(), TLS1_1_VERSION);
  SSL_CTX_set_cipher_list(ctx.native_handle(), "DEFAULT:@SECLEVEL=0");
  asio::ssl::stream<asio::ip::tcp::socket> s(io, ctx);
  s.next_layer().connect({asio::ip::make_address("127.0.0.1"), b.port()});
  boost::system::error_code ec;
  s.handshake(asio::ssl::stream_base::client, ec);
  ASSERT_TRUE(ec);
  // The broker's alert, not our own refusal to send 1.1.
  EXPECT_NE(ec.message().find("protocol version"), std::string::npos) << ec.message();
  // openssl s_client -tls1_1 says the same.
  const auto out = shell("openssl s_client -connect 127.0.0.1:" + std::to_string(b.port()) +
                         " -tls1_1 -cipher DEFAULT@SECLEVEL=0 </dev/null");
  EXPECT_NE(out.find("alert protocol version"), std::string::npos) << out;
  EXPECT_EQ(txmq_tls(b, {"topic", "list"}).status, 0);
}

TEST_F(tls_test, mtls_requires_a_client_certificate_of_the_client_ca) {
  broker_process b(serving("server", {"--tls-client-ca-file", certs_.path("ca.pem"), "--log-level", "debug"}));
  b.start();
  auto with = txmq_tls(b, {"--tls-cert", certs_.path("client.pem"), "--tls-key", certs_.path("client.key"), "topic",
                           "list"});
  EXPECT_EQ(with.status, 0) << with;
  EXPECT_NE(b.log().find("client certificate CN=alice"), std::string::npos) << b.log();

  auto without = txmq_tls(b, {"topic", "list"});
  EXPECT_EQ(without.status, 1) << without;
  EXPECT_NE(without.err.find("client certificate"), std::string::npos) << without;

  auto stranger = txmq_tls(b, {"--tls-cert", certs_.path("stranger.pem"), "--tls-key", certs_.path("stranger.key"),
                               "topic", "list"});
  EXPECT_EQ(stranger.status, 1) << stranger;
  EXPECT_NE(stranger.err.find("TLS"), std::string::npos) << stranger;
  EXPECT_EQ(b.log().find("CN=mallory"), std::string::npos);

  // The admin port asks for the same client certificates.
  const std::string url = "https://127.0.0.1:" + std::to_string(b.http_port()) + "/healthz";
  EXPECT_EQ(shell("curl -sS --cacert " + certs_.path("ca.pem") + " --cert " + certs_.path("client.pem") + " --key " +
                  certs_.path("client.key") + " " + url),
            "ok");
  EXPECT_NE(shell("curl -sS --cacert " + certs_.path("ca.pem") + " " + url), "ok");
}

TEST_F(tls_test, the_admin_http_serves_https_only) {
  broker_process b(serving("server"));
  b.start();
  const std::string port = std::to_string(b.http_port());
  EXPECT_EQ(shell("curl -sS --cacert " + certs_.path("ca.pem") + " https://127.0.0.1:" + port + "/healthz"), "ok");
  EXPECT_EQ(shell("curl -sS --cacert " + certs_.path("ca.pem") + " https://localhost:" + port + "/healthz"), "ok");
  const auto plain = shell("curl -sS http://127.0.0.1:" + port + "/healthz");
  EXPECT_NE(plain, "ok");
  const auto untrusted = shell("curl -sS https://127.0.0.1:" + port + "/healthz");
  EXPECT_NE(untrusted.find("certificate"), std::string::npos) << untrusted;
  EXPECT_EQ(shell("curl -sS --cacert " + certs_.path("ca.pem") + " https://127.0.0.1:" + port + "/healthz"), "ok");
}

TEST_F(tls_test, sighup_reloads_the_certificate_and_a_bad_file_keeps_the_old_one) {
  // The broker reads server.pem/server.key; the test overwrites them.
  fs::copy_file(certs_.path("server.pem"), certs_.path("live.pem"));
  fs::copy_file(certs_.path("server.key"), certs_.path("live.key"));
  broker_process b(serving("live"));
  b.start();
  EXPECT_EQ(served_cn(b.port()), "localhost");
  ASSERT_NO_FATAL_FAILURE(certs_.leaf("renewed", "renewed.localhost", "DNS:localhost,IP:127.0.0.1"));
  fs::copy_file(certs_.path("renewed.pem"), certs_.path("live.pem"), fs::copy_options::overwrite_existing);
  fs::copy_file(certs_.path("renewed.key"), certs_.path("live.key"), fs::copy_options::overwrite_existing);
  ASSERT_EQ(::kill(b.pid(), SIGHUP), 0);
  EXPECT_TRUE(eventually([&] { return served_cn(b.port()) == "renewed.localhost"; })) << b.log();
  // The admin port serves the renewed certificate too (curl verifies it with the same CA).
  const auto subject = shell("curl -sS -v --cacert " + certs_.path("ca.pem") + " https://localhost:" +
                             std::to_string(b.http_port()) + "/healthz");
  EXPECT_NE(subject.find("renewed.localhost"), std::string::npos) << subject;
  EXPECT_EQ(txmq_tls(b, {"topic", "list"}).status, 0);

  // A broken file: the reload fails, says so, and the renewed certificate is still served.
  std::ofstream(certs_.path("live.pem")) << "not a certificate\n";
  ASSERT_EQ(::kill(b.pid(), SIGHUP), 0);
  EXPECT_TRUE(eventually([&] { return b.log().find("TLS reload failed") != std::string::npos; })) << b.log();
  EXPECT_EQ(served_cn(b.port()), "renewed.localhost");
  EXPECT_TRUE(b.running());
  EXPECT_EQ(b.stop(), 0);
}

TEST_F(tls_test, the_data_directory_is_created_private_and_a_shared_one_is_warned_about) {
  broker_process b(serving("server"));
  b.start();
  const auto perms = fs::status(b.data_dir()).permissions();
  EXPECT_EQ(perms & fs::perms::all, fs::perms::owner_all);
  b.stop();
  fs::permissions(b.data_dir(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                    fs::perms::others_read | fs::perms::others_exec);
  b.start();
  EXPECT_NE(b.log().find("is open to other users (mode 755)"), std::string::npos) << b.log();
}

TEST_F(tls_test, non_loopback_listening_needs_auth_and_tls_or_insecure) {
  // 0.0.0.0 with TLS but no auth: refused with the reason.
  std::vector<std::string> argv = {binary_path("txmq-broker"), "--data-dir", certs_.path("data"), "--listen",
                                   "0.0.0.0:" + std::to_string(free_port()), "--http",
                                   "127.0.0.1:" + std::to_string(free_port())};
  for (auto& a : serving("server")) argv.push_back(a);
  std::string cmd;
  for (auto& a : argv) cmd += "'" + a + "' ";
  const auto refused = shell(cmd);
  EXPECT_NE(refused.find("auth is off and TLS is on"), std::string::npos) << refused;
  EXPECT_NE(refused.find("--insecure"), std::string::npos) << refused;

  // insecure = true starts, and warns.
  argv.push_back("--insecure");
  const fs::path log = certs_.dir / "insecure.log";
  child_process broker(argv, log);
  const auto text = [&] {
    std::ifstream in(log);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_TRUE(eventually([&] { return text().find("insecure = true: serving") != std::string::npos; })) << text();
  EXPECT_TRUE(broker.running());
  EXPECT_EQ(broker.stop(), 0);
}

// With auth on and mTLS, a client certificate whose CN names a principal authenticates as that
// principal when no token is sent (DESIGN §7), on the wire port and on the admin HTTP; a CN
// that names no principal is refused as unauthenticated.
TEST_F(tls_test, with_auth_the_client_certificate_cn_is_the_principal) {
  ASSERT_NO_FATAL_FAILURE(certs_.leaf("bob", "bob", "DNS:bob"));
  const std::string admin_token = "txmq_" + std::string(48, 'a');
  { std::ofstream(certs_.path("admin.token")) << admin_token << "\n"; }
  broker_process b(serving("server", {"--tls-client-ca-file", certs_.path("ca.pem"), "--auth", "--admin-token-file",
                                      certs_.path("admin.token")}));
  b.start();
  const std::vector<std::string> alice = {"--tls-cert", certs_.path("client.pem"), "--tls-key", certs_.path("client.key")};
  auto as_alice = [&](std::vector<std::string> args) {
    args.insert(args.begin(), alice.begin(), alice.end());
    return txmq_tls(b, args);
  };
  auto as_admin = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--token", admin_token});
    args.insert(args.begin(), alice.begin(), alice.end());  // a sent token wins over the certificate
    return txmq_tls(b, args);
  };
  ASSERT_EQ(as_admin({"topic", "create", "orders"}).status, 0);
  // Before the principal exists, the certificate names nobody.
  auto nobody = as_alice({"produce", "orders", "early"});
  EXPECT_EQ(nobody.status, 1) << nobody;
  ASSERT_EQ(as_admin({"principal", "create", "alice"}).status, 0);
  ASSERT_EQ(as_admin({"acl", "grant", "alice", "produce", "topic:orders"}).status, 0);

  auto produced = as_alice({"produce", "orders", "from-alice"});
  EXPECT_EQ(produced.status, 0) << produced;
  auto listed = as_alice({"topic", "list"});  // admin on cluster: alice lacks it
  EXPECT_EQ(listed.status, 1) << listed;
  EXPECT_NE(listed.err.find("admin"), std::string::npos) << listed;

  auto bob = txmq_tls(b, {"--tls-cert", certs_.path("bob.pem"), "--tls-key", certs_.path("bob.key"), "produce", "orders",
                          "from-bob"});
  EXPECT_EQ(bob.status, 1) << bob;

  // The admin HTTP: alice's certificate authenticates her there too (403 for /metrics, which
  // needs admin; 200 for a produce she holds), bob's names nobody (401).
  const std::string base = "https://127.0.0.1:" + std::to_string(b.http_port());
  auto curl_status = [&](const std::string& cert, const std::string& extra, const std::string& path) {
    return shell("curl -s -o /dev/null -w '%{http_code}' --cacert " + certs_.path("ca.pem") + " --cert " +
                 certs_.path(cert + ".pem") + " --key " + certs_.path(cert + ".key") + " " + extra + " " + base + path);
  };
  EXPECT_EQ(curl_status("client", "", "/metrics"), "403");
  EXPECT_EQ(curl_status("client", "-H 'content-type: application/json' -d '{\"messages\":[{\"body\":\"over-http\"}]}'",
                        "/v1/topics/orders/messages"),
            "200");
  EXPECT_EQ(curl_status("bob", "", "/metrics"), "401");
}

}  // namespace
}  // namespace txmq::test
