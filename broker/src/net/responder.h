#pragma once

// What a request handler sees of the client that sent the request: where to send the answer,
// the broker's own requests (CheckTx), and what the client said in its Hello. `connection`
// implements it over a socket; unit tests implement it with a recorder, so that the handlers
// (service, consumer groups, tx_coordinator, webhook_notifier) run without a socket.
//
// Lifetime: owned by shared_ptr. Handlers keep a weak_ptr across storage completions and drop
// the answer when the client is gone. Not thread-safe: every call on the broker's io thread.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "txmq/v1/frame.pb.h"

namespace txmq::broker {

class responder {
 public:
  virtual ~responder() = default;

  // Answers a request: the frame carries the request's correlation_id. Each request gets
  // exactly one answer; it frees the request's in-flight slot.
  virtual void respond(v1::Frame frame) = 0;
  // The same answer without giving the frame away: a connection encodes it where it stands (the
  // leader answers both followers of a partition with one ReplicaFetch answer, changing only its
  // correlation id and high watermark between them). Others copy it.
  virtual void respond_with(const v1::Frame& frame) { respond(v1::Frame(frame)); }
  // The same answer already encoded: a Frame's bytes (no length prefix) carrying
  // `correlation_id`. A Fetch answer is built from the messages' stored bytes this way
  // (consumer_groups.cc). A connection copies the bytes out; others parse them back.
  virtual void respond_encoded(std::uint64_t correlation_id, std::string_view frame) {
    v1::Frame f;
    if (!f.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) {
      f.Clear();
      f.set_correlation_id(correlation_id);
      f.mutable_error()->set_code(v1::INTERNAL);
      f.mutable_error()->set_message("the broker built an answer it cannot parse back");
    }
    respond(std::move(f));
  }
  // Sends a request of the broker's own (CheckTx). Its answer comes back through
  // service::handle_answer and takes no in-flight slot.
  virtual void send_request(const v1::Frame& frame) = 0;
  // Closes once the answers already queued are written.
  virtual void close() = 0;

  // Unique among the broker's connections; also the member id of consumer-group deliveries.
  [[nodiscard]] virtual std::uint64_t id() const noexcept = 0;
  // False once closed: answers sent after that are dropped.
  [[nodiscard]] virtual bool is_open() const noexcept = 0;
  // From the Hello; producer_group is empty for a client that is no transactional producer.
  [[nodiscard]] virtual const std::string& client_id() const noexcept = 0;
  [[nodiscard]] virtual const std::string& producer_group() const noexcept = 0;
  // The principal the Hello authenticated ("admin" with auth off), for ACL checks and logs.
  [[nodiscard]] virtual const std::string& principal() const noexcept = 0;
  // The client's address, for logs.
  [[nodiscard]] virtual const std::string& peer() const noexcept = 0;

  // Answers a request with an Error frame.
  void respond_error(std::uint64_t correlation_id, v1::ErrorCode code, std::string text) {
    v1::Frame f;
    f.set_correlation_id(correlation_id);
    f.mutable_error()->set_code(code);
    f.mutable_error()->set_message(std::move(text));
    respond(std::move(f));
  }

 protected:
  responder() = default;
  responder(const responder&) = default;
  responder& operator=(const responder&) = default;
};

}  // namespace txmq::broker
