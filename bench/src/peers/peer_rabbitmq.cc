// RabbitMQ through librabbitmq (AMQP 0-9-1): a durable queue (quorum or classic), persistent
// messages (delivery_mode 2) published in confirm mode, and a consumer with manual acks and a
// prefetch of 1,000. Confirms arrive after the queue has written (quorum: fsynced to its Raft
// log; classic durable: to the message store, fsynced in batches) the message.

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <sys/time.h>

#include <deque>
#include <stdexcept>

#include "peers/system_under_test.h"
#include "txmq/common/address.h"

namespace txmq::bench::detail {
namespace {

constexpr amqp_channel_t k_channel = 1;
// Acks are sent as one basic.ack(multiple) per this many deliveries (or when the socket runs
// dry), as RabbitMQ's own client guides recommend for throughput.
constexpr std::size_t k_ack_every = 100;
constexpr std::uint16_t k_prefetch = 1000;

std::string reply_text(const amqp_rpc_reply_t& r) {
  switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL:
      return "ok";
    case AMQP_RESPONSE_NONE:
      return "no reply";
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
      return amqp_error_string2(r.library_error);
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD || r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        // Both close methods start with reply_code and reply_text.
        const auto* m = static_cast<amqp_channel_close_t*>(r.reply.decoded);
        return std::string(static_cast<const char*>(m->reply_text.bytes), m->reply_text.len);
      }
      return "server exception";
  }
  return "unknown reply";
}

void check(amqp_connection_state_t c, const std::string& what) {
  const auto r = amqp_get_rpc_reply(c);
  if (r.reply_type != AMQP_RESPONSE_NORMAL) throw std::runtime_error("rabbitmq: " + what + ": " + reply_text(r));
}

timeval to_timeval(std::chrono::nanoseconds d) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
  return {static_cast<time_t>(us / 1'000'000), static_cast<suseconds_t>(us % 1'000'000)};
}

// One AMQP connection with channel 1 open; closed by the destructor.
class amqp_link {
 public:
  explicit amqp_link(const std::string& address) : c_(amqp_new_connection()) {
    const auto where = common::parse_host_port(address);
    if (!where) {
      amqp_destroy_connection(c_);
      throw std::invalid_argument("rabbitmq: " + where.error().message);
    }
    auto* socket = amqp_tcp_socket_new(c_);
    if (!socket || amqp_socket_open(socket, where.value().host.c_str(), where.value().port) != AMQP_STATUS_OK) {
      amqp_destroy_connection(c_);
      throw std::runtime_error("rabbitmq: cannot connect to " + address + " (is rabbitmq-server running there?)");
    }
    const auto login = amqp_login(c_, "/", 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, "guest", "guest");
    if (login.reply_type != AMQP_RESPONSE_NORMAL) {
      amqp_destroy_connection(c_);
      throw std::runtime_error("rabbitmq: login as guest on " + address + ": " + reply_text(login));
    }
    amqp_channel_open(c_, k_channel);
    check(c_, "channel.open");
  }
  ~amqp_link() {
    amqp_channel_close(c_, k_channel, AMQP_REPLY_SUCCESS);
    amqp_connection_close(c_, AMQP_REPLY_SUCCESS);
    amqp_destroy_connection(c_);
  }
  amqp_link(const amqp_link&) = delete;
  amqp_link& operator=(const amqp_link&) = delete;
  [[nodiscard]] amqp_connection_state_t get() const { return c_; }

 private:
  amqp_connection_state_t c_;
};

class rabbitmq_publisher final : public publisher {
 public:
  rabbitmq_publisher(const std::string& address, std::string queue) : link_(address), queue_(std::move(queue)) {
    amqp_confirm_select(link_.get(), k_channel);
    check(link_.get(), "confirm.select");
  }

  void send(std::vector<std::string> bodies, completion done) override {
    auto b = std::make_shared<message_batch>(message_batch{bodies.size(), true, std::move(done)});
    amqp_basic_properties_t props{};
    props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
    props.delivery_mode = 2;  // persistent
    for (const auto& body : bodies) {
      const int rc = amqp_basic_publish(link_.get(), k_channel, amqp_empty_bytes, amqp_cstring_bytes(queue_.c_str()), 0, 0,
                                        &props, amqp_bytes_t{body.size(), const_cast<char*>(body.data())});
      if (rc != AMQP_STATUS_OK) throw std::runtime_error(std::string("rabbitmq: basic.publish: ") + amqp_error_string2(rc));
      tags_.push_back({b, false});
    }
    ++outstanding_;
  }

  void poll(std::chrono::nanoseconds max_wait) override {
    auto tv = to_timeval(max_wait);
    std::vector<std::shared_ptr<message_batch>> finished;
    for (;;) {
      amqp_frame_t frame;
      const int rc = amqp_simple_wait_frame_noblock(link_.get(), &frame, &tv);
      if (rc == AMQP_STATUS_TIMEOUT) break;
      if (rc != AMQP_STATUS_OK) throw std::runtime_error(std::string("rabbitmq: waiting for confirms: ") + amqp_error_string2(rc));
      if (frame.frame_type == AMQP_FRAME_METHOD && frame.payload.method.id == AMQP_BASIC_ACK_METHOD) {
        const auto* a = static_cast<amqp_basic_ack_t*>(frame.payload.method.decoded);
        settle(a->delivery_tag, a->multiple != 0, true, finished);
      } else if (frame.frame_type == AMQP_FRAME_METHOD && frame.payload.method.id == AMQP_BASIC_NACK_METHOD) {
        const auto* n = static_cast<amqp_basic_nack_t*>(frame.payload.method.decoded);
        settle(n->delivery_tag, n->multiple != 0, false, finished);
      } else if (frame.frame_type == AMQP_FRAME_METHOD && frame.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD) {
        throw std::runtime_error("rabbitmq: the broker closed the channel while publishing");
      }
      tv = timeval{0, 0};  // after the first frame, take only what is already there
    }
    amqp_maybe_release_buffers(link_.get());
    run_completions(finished, outstanding_);
  }

  [[nodiscard]] std::size_t outstanding() const override { return outstanding_; }

 private:
  // Delivery tags count from 1 on the channel; tags_[0] is tag base_.
  void settle(std::uint64_t tag, bool multiple, bool ok, std::vector<std::shared_ptr<message_batch>>& finished) {
    const std::uint64_t first = multiple ? base_ : tag;
    for (std::uint64_t t = first; t <= tag && t - base_ < tags_.size(); ++t) {
      auto& [b, settled] = tags_[t - base_];
      if (settled) continue;
      settled = true;
      if (b->settle(ok)) finished.push_back(b);
    }
    while (!tags_.empty() && tags_.front().second) {
      tags_.pop_front();
      ++base_;
    }
  }

  amqp_link link_;
  std::string queue_;
  std::deque<std::pair<std::shared_ptr<message_batch>, bool>> tags_;
  std::uint64_t base_ = 1;
  std::size_t outstanding_ = 0;
};

class rabbitmq_consumer final : public consumer {
 public:
  rabbitmq_consumer(const std::string& address, const std::string& queue) : link_(address) {
    amqp_basic_qos(link_.get(), k_channel, 0, k_prefetch, 0);
    check(link_.get(), "basic.qos");
    amqp_basic_consume(link_.get(), k_channel, amqp_cstring_bytes(queue.c_str()), amqp_empty_bytes, 0, 0, 0, amqp_empty_table);
    check(link_.get(), "basic.consume " + queue);
  }

  std::size_t poll(std::chrono::nanoseconds max_wait, const delivery& on_message) override {
    std::size_t n = 0;
    auto tv = to_timeval(max_wait);
    while (n < k_prefetch) {
      amqp_maybe_release_buffers(link_.get());
      amqp_envelope_t e;
      const auto r = amqp_consume_message(link_.get(), &e, &tv, 0);
      if (r.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && r.library_error == AMQP_STATUS_TIMEOUT) break;
      if (r.reply_type != AMQP_RESPONSE_NORMAL) throw std::runtime_error("rabbitmq: consume: " + reply_text(r));
      on_message(std::string_view(static_cast<const char*>(e.message.body.bytes), e.message.body.len));
      last_tag_ = e.delivery_tag;
      amqp_destroy_envelope(&e);
      ++n;
      if (++unacked_ >= k_ack_every) ack();
      tv = timeval{0, 0};
    }
    if (unacked_ > 0) ack();
    return n;
  }

 private:
  void ack() {
    if (amqp_basic_ack(link_.get(), k_channel, last_tag_, 1) != AMQP_STATUS_OK) throw std::runtime_error("rabbitmq: basic.ack failed");
    unacked_ = 0;
  }

  amqp_link link_;
  std::uint64_t last_tag_ = 0;
  std::size_t unacked_ = 0;
};

class rabbitmq_system final : public system_under_test {
 public:
  rabbitmq_system(const system_options& o, bool quorum) : address_(o.address), queue_(o.name), quorum_(quorum) {
    amqp_link admin(address_);
    amqp_table_entry_t type;
    type.key = amqp_cstring_bytes("x-queue-type");
    type.value.kind = AMQP_FIELD_KIND_UTF8;
    type.value.value.bytes = amqp_cstring_bytes(quorum ? "quorum" : "classic");
    const amqp_table_t args{1, &type};
    amqp_queue_declare(admin.get(), k_channel, amqp_cstring_bytes(queue_.c_str()), 0, 1, 0, 0, args);
    check(admin.get(), "declare durable queue " + queue_);
  }

  ~rabbitmq_system() override {
    // Best effort: a queue left behind only costs disk in the benchmark's temporary directory.
    try {
      amqp_link admin(address_);
      amqp_queue_delete(admin.get(), k_channel, amqp_cstring_bytes(queue_.c_str()), 0, 0);
    } catch (const std::exception&) {
    }
  }

  std::unique_ptr<publisher> make_publisher(std::size_t) override {
    return std::make_unique<rabbitmq_publisher>(address_, queue_);
  }
  std::unique_ptr<consumer> make_consumer() override { return std::make_unique<rabbitmq_consumer>(address_, queue_); }
  std::string durability() const override {
    return quorum_ ? "persistent, publisher confirm after the quorum queue's fsync"
                   : "persistent, publisher confirm after the classic queue's message store write (fsync batched)";
  }

 private:
  std::string address_, queue_;
  bool quorum_;
};

}  // namespace

std::unique_ptr<system_under_test> open_rabbitmq(const system_options& options, bool quorum) {
  return std::make_unique<rabbitmq_system>(options, quorum);
}

}  // namespace txmq::bench::detail
