#pragma once

// Driving the broker's request handlers without a socket: a responder that records what the
// handlers send, and a fixture holding an io_context, an in-memory store and a started service.
//
// The test thread runs the io_context itself (run_until), as the broker's io thread would:
// storage completions are posted to it, timers (the 20 ms tick, the check-back scan, webhook
// attempts) fire on it. Waiting is always for a condition, with a deadline.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio.hpp>
#include <gtest/gtest.h>

#include "broker_metrics.h"
#include "net/responder.h"
#include "service/service.h"
#include "txmq/protocol/message_id.h"
#include "txmq/storage/store.h"

namespace txmq::broker::test {

using namespace std::chrono_literals;

// A client as the handlers see it: answers and the broker's own requests are recorded.
class recording_responder final : public responder {
 public:
  explicit recording_responder(std::uint64_t id, std::string producer_group = {})
      : id_(id), client_id_("client-" + std::to_string(id)), producer_group_(std::move(producer_group)) {}

  void respond(v1::Frame frame) override { answers.push_back(std::move(frame)); }
  void send_request(const v1::Frame& frame) override { requests.push_back(frame); }
  void close() override { open_ = false; }
  [[nodiscard]] std::uint64_t id() const noexcept override { return id_; }
  [[nodiscard]] bool is_open() const noexcept override { return open_; }
  [[nodiscard]] const std::string& client_id() const noexcept override { return client_id_; }
  [[nodiscard]] const std::string& producer_group() const noexcept override { return producer_group_; }
  [[nodiscard]] const std::string& peer() const noexcept override { return peer_; }
  [[nodiscard]] const std::string& principal() const noexcept override { return principal_; }
  std::string principal_ = "admin";

  // The answer to request `corr`, once it came.
  [[nodiscard]] std::optional<v1::Frame> answer(std::uint64_t corr) const {
    for (auto& f : answers) {
      if (f.correlation_id() == corr) return f;
    }
    return std::nullopt;
  }

  std::vector<v1::Frame> answers;
  std::vector<v1::Frame> requests;  // CheckTx sent by the broker

 private:
  std::uint64_t id_;
  std::string client_id_;
  std::string producer_group_;
  std::string peer_ = "test";
  bool open_ = true;
};

// An io_context, an in-memory store and a service on them, started; stopped in the order the
// broker stops (service, then store) so that no completion reaches a destroyed object.
class handler_test : public ::testing::Test {
 protected:
  handler_test() { settings.tick = 5ms; }

  // Tests change settings (and the store's options: a fake disk, say) before start().
  service_settings settings;
  storage::store_options store_options;
  // The service's metrics, when a test reads them (null: none).
  broker_metrics* metrics = nullptr;

  void start() {
    storage::store_options o = store_options;
    o.in_memory = true;
    auto s = storage::open_store(o);
    ASSERT_TRUE(s) << s.error().message;
    store_ = std::move(s.value());
    svc_ = std::make_unique<service>(io_, *store_, settings, metrics);
    auto started = svc_->start();
    ASSERT_TRUE(started) << started.error().message;
  }

  void TearDown() override {
    if (svc_) svc_->stop();
    if (store_) store_->close();
    // Completions of the store's last writes were posted to the io thread: run them.
    if (io_.stopped()) io_.restart();
    io_.poll();
  }

  // Runs the io_context until `done` holds or `deadline` passes; returns whether it held.
  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds deadline = 10s) {
    const auto until = std::chrono::steady_clock::now() + deadline;
    while (!done()) {
      if (std::chrono::steady_clock::now() >= until) return false;
      if (io_.stopped()) io_.restart();
      io_.run_one_for(10ms);
    }
    return true;
  }

  std::shared_ptr<recording_responder> client(std::string producer_group = {}) {
    auto c = std::make_shared<recording_responder>(++next_client_, std::move(producer_group));
    svc_->connection_opened(c);
    return c;
  }

  // Hands `frame` to the service as a request of `c` and runs until it is answered.
  v1::Frame request(const std::shared_ptr<recording_responder>& c, v1::Frame frame,
                    std::chrono::milliseconds deadline = 10s) {
    const std::uint64_t corr = ++next_corr_;
    frame.set_correlation_id(corr);
    svc_->handle(c, std::move(frame));
    const bool answered = run_until([&] { return c->answer(corr).has_value(); }, deadline);
    EXPECT_TRUE(answered) << "no answer to request " << corr;
    return answered ? *c->answer(corr) : v1::Frame{};
  }

  boost::asio::io_context io_;
  std::unique_ptr<storage::store> store_;
  std::unique_ptr<service> svc_;
  std::uint64_t next_client_ = 0;
  std::uint64_t next_corr_ = 0;
};

// ---- frames ---------------------------------------------------------------------------------

inline v1::Message message(std::string body, std::optional<std::string> key = std::nullopt,
                           std::string topic = {}) {
  v1::Message m;
  m.set_id(std::string(protocol::uuid::make_v7().raw()));
  m.set_body(std::move(body));
  if (key) m.set_key(*key);
  if (!topic.empty()) m.set_topic(std::move(topic));
  return m;
}

inline v1::Frame produce_frame(const std::string& topic, std::vector<v1::Message> messages) {
  v1::Frame f;
  f.mutable_produce()->set_topic(topic);
  for (auto& m : messages) *f.mutable_produce()->add_messages() = std::move(m);
  return f;
}

inline v1::Frame create_topic_frame(const std::string& name, std::uint32_t partitions) {
  v1::Frame f;
  f.mutable_create_topic()->set_name(name);
  f.mutable_create_topic()->set_partitions(partitions);
  return f;
}

inline v1::Frame fetch_frame(const std::string& group, const std::string& topic, std::uint32_t max_wait_ms = 0) {
  v1::Frame f;
  f.mutable_fetch()->set_group(group);
  f.mutable_fetch()->add_topics(topic);
  f.mutable_fetch()->set_max_wait_ms(max_wait_ms);
  return f;
}

inline v1::DeliveryRef ref_of(const v1::Message& m) {
  v1::DeliveryRef r;
  r.set_topic(m.topic());
  r.set_partition(m.partition());
  r.set_offset(m.offset());
  r.set_attempt(m.attempt());
  return r;
}

inline v1::Frame ack_frame(const std::string& group, const v1::Message& m) {
  v1::Frame f;
  f.mutable_ack()->set_group(group);
  *f.mutable_ack()->add_refs() = ref_of(m);
  return f;
}

inline v1::Frame nack_frame(const std::string& group, const v1::Message& m, std::uint32_t delay_ms) {
  v1::Frame f;
  f.mutable_nack()->set_group(group);
  *f.mutable_nack()->add_refs() = ref_of(m);
  f.mutable_nack()->set_delay_ms(delay_ms);
  return f;
}

inline v1::Frame prepare_frame(const protocol::txid& id, const std::string& producer_group,
                               std::vector<v1::Message> messages, std::uint32_t tx_timeout_ms = 0) {
  v1::Frame f;
  auto* p = f.mutable_prepare();
  p->set_txid(std::string(id.raw()));
  p->set_producer_group(producer_group);
  for (auto& m : messages) *p->add_messages() = std::move(m);
  p->set_tx_timeout_ms(tx_timeout_ms);
  return f;
}

inline v1::Frame end_tx_frame(const protocol::txid& id, v1::TxOutcome outcome) {
  v1::Frame f;
  f.mutable_end_tx()->set_txid(std::string(id.raw()));
  f.mutable_end_tx()->set_outcome(outcome);
  return f;
}

inline v1::Frame tx_show_frame(const protocol::txid& id) {
  v1::Frame f;
  f.mutable_tx_show()->set_txid(std::string(id.raw()));
  return f;
}

}  // namespace txmq::broker::test
