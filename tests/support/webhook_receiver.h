#pragma once

// The webhook tests' HTTP receiver: a small HTTP/1.1 (or HTTPS) server in the test process on a
// free loopback port, recording every request and answering as the test decides.
//
// Compiled once in txmq_test_support (webhook_receiver.cc): Beast, TLS and coroutines
// instantiated in each of the three webhook test files made them the slowest files of the
// build (about 3 minutes each on a loaded 2-core machine).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace txmq::test {

// One request the receiver got.
struct seen {
  std::chrono::steady_clock::time_point at;
  std::string id, timestamp, signature, attempt, body;
};

struct reply {
  unsigned status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  bool hang = false;  // never answer (the connection stays open until the receiver stops)
};

// The certificate chain and key of an HTTPS receiver (PEM files).
struct receiver_tls {
  std::filesystem::path certificate_chain, private_key;
};

// A small HTTP/1.1 server (Beast, one io thread, a coroutine per connection) whose answers
// `decide` picks per request; records every request.
class receiver {
 public:
  using decide_fn = std::function<reply(const seen&, std::size_t index)>;

  // With `tls`, the receiver speaks HTTPS with that certificate. It listens on a free port of
  // `host` (127.0.0.1, or ::1 for IPv6 tests).
  explicit receiver(decide_fn decide, std::optional<receiver_tls> tls = std::nullopt,
                    const std::string& host = "127.0.0.1");
  ~receiver();
  receiver(const receiver&) = delete;
  receiver& operator=(const receiver&) = delete;

  [[nodiscard]] std::uint16_t port() const;
  [[nodiscard]] std::string url() const;

  // Waits until `n` requests arrived; false at the deadline.
  bool wait_for(std::size_t n, std::chrono::milliseconds deadline);
  [[nodiscard]] std::vector<seen> requests() const;
  // Waits until a TLS handshake failed; false at the deadline.
  bool wait_for_failed_handshake(std::chrono::milliseconds deadline);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace txmq::test
