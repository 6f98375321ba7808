#include "raw_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "txmq/protocol/frame_codec.h"
#include "txmq/protocol/message_id.h"

namespace txmq::test {

raw_client::raw_client(std::uint16_t port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd_);
    throw std::runtime_error("cannot connect to 127.0.0.1:" + std::to_string(port));
  }
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

raw_client::~raw_client() {
  if (fd_ >= 0) ::close(fd_);
}

void raw_client::hello(const std::string& client_id, const std::string& producer_group,
                       const std::string& auth_token) {
  v1::Frame f;
  f.mutable_hello()->set_protocol_version(1);
  f.mutable_hello()->set_client_id(client_id);
  f.mutable_hello()->set_producer_group(producer_group);
  f.mutable_hello()->set_auth_token(auth_token);
  auto r = request(f);
  if (!r.has_hello_ok()) throw std::runtime_error("no HelloOk: " + r.ShortDebugString());
}

void raw_client::send_bytes(const std::string& bytes) {
  std::size_t off = 0;
  while (off < bytes.size()) {
    auto n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;  // the broker may have closed already; the test checks that
    off += static_cast<std::size_t>(n);
  }
}

std::uint64_t raw_client::send(v1::Frame frame) {
  if (frame.correlation_id() == 0) frame.set_correlation_id(next_id_++);
  std::string bytes;
  auto r = protocol::encode_frame(frame, bytes, 64u << 20);
  if (!r) throw std::runtime_error("cannot encode frame");
  send_bytes(bytes);
  return frame.correlation_id();
}

bool raw_client::read_exact(char* p, std::size_t n, std::chrono::steady_clock::time_point deadline) {
  while (n > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) return false;
    auto got = ::recv(fd_, p, n, 0);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

std::optional<v1::Frame> raw_client::receive(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char header[4];
  if (!read_exact(header, 4, deadline)) return std::nullopt;
  const std::uint32_t len = (static_cast<std::uint32_t>(static_cast<unsigned char>(header[0])) << 24) |
                            (static_cast<std::uint32_t>(static_cast<unsigned char>(header[1])) << 16) |
                            (static_cast<std::uint32_t>(static_cast<unsigned char>(header[2])) << 8) |
                            static_cast<std::uint32_t>(static_cast<unsigned char>(header[3]));
  std::string body(len, '\0');
  if (!read_exact(body.data(), len, deadline)) return std::nullopt;
  v1::Frame f;
  if (!f.ParseFromString(body)) throw std::runtime_error("broker sent a frame that does not parse");
  return f;
}

v1::Frame raw_client::request(v1::Frame frame, std::chrono::milliseconds timeout) {
  const auto id = send(std::move(frame));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    auto f = receive(left);
    if (!f) throw std::runtime_error("no answer to request " + std::to_string(id));
    if (f->correlation_id() == id) return *f;
  }
}

bool raw_client::readable(std::chrono::milliseconds timeout) {
  pollfd pfd{fd_, POLLIN, 0};
  return ::poll(&pfd, 1, static_cast<int>(timeout.count())) > 0;
}

bool raw_client::closed_by_peer(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd pfd{fd_, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (::poll(&pfd, 1, static_cast<int>(std::max<long>(left.count(), 1))) <= 0) return false;
    auto n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return true;  // EOF or reset
  }
  return false;
}

std::string http_get(std::uint16_t port, const std::string& path, const std::string& authorization) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int why = errno;  // refused, timed out and no free local port call for different fixes
    ::close(fd);
    throw std::runtime_error("cannot connect to HTTP port " + std::to_string(port) + ": " + std::strerror(why));
  }
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n" +
                          (authorization.empty() ? std::string() : "Authorization: " + authorization + "\r\n") + "\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[8192];
  for (;;) {
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, 10'000) <= 0) break;
    auto n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

v1::Message make_message(const std::string& body, std::optional<std::string> key) {
  v1::Message m;
  m.set_id(std::string(protocol::uuid::make_v7().raw()));
  m.set_body(body);
  if (key) m.set_key(*key);
  return m;
}

v1::Frame produce_frame(const std::string& topic, std::vector<v1::Message> messages) {
  v1::Frame f;
  f.mutable_produce()->set_topic(topic);
  for (auto& m : messages) *f.mutable_produce()->add_messages() = std::move(m);
  return f;
}

v1::Frame fetch_frame(const std::string& group, const std::string& topic, std::uint32_t max, std::uint32_t wait_ms,
                      std::uint32_t ack_deadline_ms) {
  v1::Frame f;
  auto* r = f.mutable_fetch();
  r->set_group(group);
  r->add_topics(topic);
  r->set_max_messages(max);
  r->set_max_wait_ms(wait_ms);
  r->set_ack_deadline_ms(ack_deadline_ms);
  return f;
}

v1::Frame ack_frame(const std::string& group, const v1::Message& delivered) {
  v1::Frame f;
  f.mutable_ack()->set_group(group);
  auto* ref = f.mutable_ack()->add_refs();
  ref->set_topic(delivered.topic());
  ref->set_partition(delivered.partition());
  ref->set_offset(delivered.offset());
  ref->set_attempt(delivered.attempt());
  return f;
}

}  // namespace txmq::test
