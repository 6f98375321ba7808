#pragma once

// A blocking wire-protocol client for tests: it sends exactly the bytes a test wants (garbage
// included) and reads frames back with a deadline.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "txmq/v1/frame.pb.h"

namespace txmq::test {

class raw_client {
 public:
  // Connects to 127.0.0.1:port; throws std::runtime_error when it cannot.
  explicit raw_client(std::uint16_t port);
  ~raw_client();
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  // Sends Hello (with `auth_token` for a broker with auth) and expects HelloOk.
  void hello(const std::string& client_id = "test", const std::string& producer_group = "",
             const std::string& auth_token = "");
  void send_bytes(const std::string& bytes);
  // Assigns a correlation id when the frame has none; returns it.
  std::uint64_t send(v1::Frame frame);
  // The next frame, or nullopt when the broker closed the connection or nothing came in time.
  std::optional<v1::Frame> receive(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // send + receive of the answer with the same correlation id (other frames are discarded).
  v1::Frame request(v1::Frame frame, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // True when bytes (or EOF) are there to read within the timeout; receive() then does not wait
  // for the start of a frame.
  bool readable(std::chrono::milliseconds timeout);
  // True when the broker closed the connection (reads EOF within the timeout).
  bool closed_by_peer(std::chrono::milliseconds timeout = std::chrono::seconds(5));

 private:
  bool read_exact(char* p, std::size_t n, std::chrono::steady_clock::time_point deadline);
  int fd_ = -1;
  std::uint64_t next_id_ = 1;
};

// A plain HTTP/1.0 GET on 127.0.0.1:port; returns status line, headers and body as received.
// `authorization`, when given, is sent as the Authorization header ("Bearer TOKEN").
std::string http_get(std::uint16_t port, const std::string& path, const std::string& authorization = "");

// The value of an unlabelled metric line "name value" in a /metrics text; -1 when absent.
inline double metric(const std::string& text, const std::string& name) {
  const auto at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
}

// Builders for common requests.
v1::Message make_message(const std::string& body, std::optional<std::string> key = std::nullopt);
v1::Frame produce_frame(const std::string& topic, std::vector<v1::Message> messages);
v1::Frame fetch_frame(const std::string& group, const std::string& topic, std::uint32_t max,
                      std::uint32_t wait_ms, std::uint32_t ack_deadline_ms = 0);
v1::Frame ack_frame(const std::string& group, const v1::Message& delivered);

}  // namespace txmq::test
