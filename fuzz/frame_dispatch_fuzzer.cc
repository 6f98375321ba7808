// Fuzz target: bytes as a client would send them, through the broker's frame reader and request
// dispatch, on a fresh in-memory store per input. The broker must answer every request with a
// reply or a typed error (never INTERNAL, never silence) and never crash; a stream it cannot
// read ends the connection, as net/connection.cc does.
//
// What the harness changes in the requests it passes on, so that one input stays quick and
// offline: a Fetch waits at most 20 ms; a webhook URL's host becomes 127.0.0.1 (the egress
// guard then refuses the deliveries; the URL grammar has its own target, webhook_parse).

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <boost/asio.hpp>

#include "net/responder.h"
#include "service/service.h"
#include "txmq/common/log.h"
#include "txmq/protocol/frame_codec.h"
#include "txmq/storage/store.h"
#include "webhooks/webhook_signer.h"

namespace {

using namespace std::chrono_literals;
using namespace txmq;

class recorder final : public broker::responder {
 public:
  void respond(v1::Frame frame) override { answers.push_back(std::move(frame)); }
  void send_request(const v1::Frame&) override {}
  void close() override { open_ = false; }
  [[nodiscard]] std::uint64_t id() const noexcept override { return 1; }
  [[nodiscard]] bool is_open() const noexcept override { return open_; }
  [[nodiscard]] const std::string& client_id() const noexcept override { return client_id_; }
  [[nodiscard]] const std::string& producer_group() const noexcept override { return producer_group_; }
  [[nodiscard]] const std::string& peer() const noexcept override { return peer_; }
  // Auth is off in the fuzzed service: no principal.
  [[nodiscard]] const std::string& principal() const noexcept override { return principal_; }

  std::vector<v1::Frame> answers;
  std::string producer_group_;

 private:
  std::string client_id_ = "fuzz";
  std::string peer_ = "fuzz";
  std::string principal_;
  bool open_ = true;
};

[[noreturn]] void finding(const char* what, const v1::Frame& request) {
  std::fprintf(stderr, "frame_dispatch_fuzzer: %s; request: %s\n", what, request.ShortDebugString().c_str());
  std::abort();
}

void make_offline(v1::Frame& f) {
  if (f.has_fetch() && f.fetch().max_wait_ms() > 20) f.mutable_fetch()->set_max_wait_ms(20);
  if (f.has_webhook_create()) {
    auto url = broker::parse_webhook_url(f.webhook_create().webhook().url());
    if (url) f.mutable_webhook_create()->mutable_webhook()->set_url("http://127.0.0.1:9" + url.value().target);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The handlers log refusals; a fuzz run would print millions of them.
  common::log::set_level(common::log::level::error);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  boost::asio::io_context io;
  storage::store_options so;
  so.in_memory = true;
  auto opened = storage::open_store(so);
  if (!opened) {
    std::fprintf(stderr, "cannot open the in-memory store: %s\n", opened.error().message.c_str());
    std::abort();
  }
  auto store = std::move(opened.value());
  broker::service_settings settings;
  settings.tick = 5ms;
  settings.max_frame_bytes = 1u << 20;
  settings.max_message_bytes = 256u << 10;
  settings.webhooks.max_frame_bytes = settings.max_frame_bytes;
  auto svc = std::make_unique<broker::service>(io, *store, settings, nullptr);
  if (!svc->start()) std::abort();
  auto client = std::make_shared<recorder>();

  protocol::frame_reader reader(settings.max_frame_bytes);
  reader.feed(std::as_bytes(std::span(data, size)));
  bool hello_done = false;
  bool opened_connection = false;
  for (;;) {
    auto next = reader.next();
    if (!next || !next.value()) break;  // the connection would answer FRAME_* and close
    v1::Frame f = std::move(*next.value());
    if (!hello_done) {
      // As net/connection.cc: the first frame must be a Hello of version 1.
      if (!f.has_hello() || f.hello().protocol_version() != 1) break;
      hello_done = true;
      client->producer_group_ = f.hello().producer_group();
      svc->connection_opened(client);
      opened_connection = true;
      continue;
    }
    if (f.has_check_tx_result() || f.has_error()) {
      svc->handle_answer(client, std::move(f));
      continue;
    }
    if (f.correlation_id() == 0) break;
    make_offline(f);
    const v1::Frame request = f;
    const std::size_t before = client->answers.size();
    svc->handle(client, std::move(f));
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (client->answers.size() == before) {
      if (std::chrono::steady_clock::now() > until) finding("no answer within 10 s", request);
      if (io.stopped()) io.restart();
      io.run_one_for(10ms);
    }
    if (client->answers.size() != before + 1) finding("more than one answer", request);
    const v1::Frame& answer = client->answers.back();
    if (answer.correlation_id() != request.correlation_id()) finding("answer to another correlation id", request);
    if (answer.has_error() && answer.error().code() == v1::INTERNAL) {
      std::fprintf(stderr, "INTERNAL: %s\n", answer.error().message().c_str());
      finding("INTERNAL error for a request", request);
    }
  }
  // The order of the broker's shutdown (and of the handler tests' TearDown): stop the service,
  // close the store, run what they posted while the service still exists, then destroy.
  svc->stop();
  if (opened_connection) svc->connection_closed(*client);
  store->close();
  io.restart();
  io.poll();
  svc.reset();
  return 0;
}
