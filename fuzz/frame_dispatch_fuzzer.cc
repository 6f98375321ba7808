// Fuzz target: bytes as a client would send them, through the broker's frame reader and request
// dispatch, on an in-memory store. The broker must answer every request with a reply or a typed
// error (never INTERNAL or STORAGE_ERROR, never silence) and never crash; a stream it cannot
// read ends the connection, as net/connection.cc does.
//
// One input is one client connection. The io_context, the in-memory store and the service are
// kept across inputs and rebuilt every FRAME_DISPATCH_FRESH_EVERY inputs (default 500): opening
// RocksDB (its OPTIONS file is rewritten and re-parsed once per column family) and starting the
// service cost ~200 ms per input under ASan, which held this target at 2-5 executions a second.
// So an input meets the topics, groups and transactions earlier inputs of the same world left
// (which also reaches states no single short input builds). A finding that does not reproduce
// from its input alone depends on that state: FRAME_DISPATCH_FRESH_EVERY=1 gives every input a
// fresh store, as before. To replay one, a run with FRAME_DISPATCH_HISTORY=FILE (scripts/fuzz.sh
// sets it) keeps the current world's inputs in FILE, and FRAME_DISPATCH_REPLAY=FILE runs them again.
//
// What the harness changes in the requests it passes on, so that one input stays quick and
// offline: a Fetch waits at most 2 ms; a webhook URL's host becomes 127.0.0.1 (the egress
// guard then refuses the deliveries; the URL grammar has its own target, webhook_parse).

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
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
  explicit recorder(std::uint64_t id) : id_(id) {}
  void respond(v1::Frame frame) override { answers.push_back(std::move(frame)); }
  void send_request(const v1::Frame&) override {}
  void close() override { open_ = false; }
  [[nodiscard]] std::uint64_t id() const noexcept override { return id_; }
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
  std::uint64_t id_;
  bool open_ = true;
};

[[noreturn]] void finding(const char* what, const v1::Frame& request) {
  std::fprintf(stderr, "frame_dispatch_fuzzer: %s; request: %s\n", what, request.ShortDebugString().c_str());
  std::abort();
}

void make_offline(v1::Frame& f) {
  if (f.has_fetch() && f.fetch().max_wait_ms() > 2) f.mutable_fetch()->set_max_wait_ms(2);
  if (f.has_webhook_create()) {
    auto url = broker::parse_webhook_url(f.webhook_create().webhook().url());
    if (url) f.mutable_webhook_create()->mutable_webhook()->set_url("http://127.0.0.1:9" + url.value().target);
  }
}

// The io_context, store and service that inputs share until the next rebuild.
struct world {
  boost::asio::io_context io;
  std::unique_ptr<storage::store> store;
  std::unique_ptr<broker::service> svc;
  broker::service_settings settings;
  std::size_t inputs = 0;

  world() {
    storage::store_options so;
    so.in_memory = true;
    auto opened = storage::open_store(so);
    if (!opened) {
      std::fprintf(stderr, "cannot open the in-memory store: %s\n", opened.error().message.c_str());
      std::abort();
    }
    store = std::move(opened.value());
    settings.tick = 5ms;
    settings.max_frame_bytes = 1u << 20;
    settings.max_message_bytes = 256u << 10;
    settings.webhooks.max_frame_bytes = settings.max_frame_bytes;
    svc = std::make_unique<broker::service>(io, *store, settings, nullptr);
    if (!svc->start()) std::abort();
  }
  world(const world&) = delete;
  world& operator=(const world&) = delete;
  world(world&&) = delete;
  world& operator=(world&&) = delete;
  // The order of the broker's shutdown (and of the handler tests' TearDown): stop the service,
  // close the store, run what they posted while the service still exists, then destroy.
  ~world() {
    svc->stop();
    store->close();
    io.restart();
    io.poll();
    svc.reset();
    store.reset();
  }
};

std::size_t fresh_every() {
  const char* v = std::getenv("FRAME_DISPATCH_FRESH_EVERY");
  const long n = v ? std::atol(v) : 0;
  return n > 0 ? static_cast<std::size_t>(n) : 500;
}

// FRAME_DISPATCH_TRACE=1 prints each request and its answer (replaying a finding by hand).
bool trace() {
  static const bool on = std::getenv("FRAME_DISPATCH_TRACE") != nullptr;
  return on;
}

// FRAME_DISPATCH_HISTORY=FILE: each input is appended to FILE (its length as 8 bytes, little
// endian, then its bytes) before it runs, and FILE starts over with each new world. After a
// finding, FILE therefore holds the inputs that built the state the finding met, the finding's
// own last: libFuzzer's artifact alone cannot carry that state. Written with write(2), so a
// crash of this process (abort, a sanitizer's report, libFuzzer's timeout) leaves it complete.
class input_history {
 public:
  input_history() {
    const char* path = std::getenv("FRAME_DISPATCH_HISTORY");
    // A replay does not record (it may be reading the very file).
    if (!path || !*path || std::getenv("FRAME_DISPATCH_REPLAY")) return;
    fd_ = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) std::fprintf(stderr, "frame_dispatch_fuzzer: FRAME_DISPATCH_HISTORY %s: %s\n", path, std::strerror(errno));
  }
  input_history(const input_history&) = delete;
  input_history& operator=(const input_history&) = delete;

  void new_world() {
    if (fd_ >= 0 && (::ftruncate(fd_, 0) != 0 || ::lseek(fd_, 0, SEEK_SET) != 0)) stop("truncating");
  }

  void add(const std::uint8_t* data, std::size_t size) {
    if (fd_ < 0) return;
    std::uint8_t length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<std::uint8_t>(static_cast<std::uint64_t>(size) >> (8 * i));
    if (!write_all(length, sizeof length) || !write_all(data, size)) stop("writing");
  }

 private:
  bool write_all(const std::uint8_t* p, std::size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return false;
      p += w;
      n -= static_cast<std::size_t>(w);
    }
    return true;
  }
  // A history that cannot be kept must not stop the fuzzing: say so once and go on without it.
  void stop(const char* doing) {
    std::fprintf(stderr, "frame_dispatch_fuzzer: %s FRAME_DISPATCH_HISTORY failed (%s); no history kept\n", doing,
                 std::strerror(errno));
    ::close(fd_);
    fd_ = -1;
  }
  int fd_ = -1;
};

input_history& history() {
  static input_history h;
  return h;
}

// The inputs of a FRAME_DISPATCH_HISTORY file, in order. Exits on a file that is not one.
std::vector<std::string> read_history(const char* path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) {
    std::fprintf(stderr, "frame_dispatch_fuzzer: cannot read %s\n", path);
    std::exit(2);
  }
  std::vector<std::string> inputs;
  std::size_t at = 0;
  while (at < bytes.size()) {
    if (bytes.size() - at < 8) break;
    std::uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(bytes[at + i])) << (8 * i);
    at += 8;
    if (n > bytes.size() - at) break;
    inputs.emplace_back(bytes, at, n);
    at += n;
  }
  if (at != bytes.size()) {
    std::fprintf(stderr, "frame_dispatch_fuzzer: %s is not a FRAME_DISPATCH_HISTORY file (cut at byte %zu of %zu)\n", path,
                 at, bytes.size());
    std::exit(2);
  }
  return inputs;
}

// Never destroyed at exit: RocksDB's own statics may already be gone by then (closing a store
// from a static destructor aborted in PeriodicTaskScheduler). Reachable, so not a leak to LSan.
world* current = nullptr;
std::uint64_t next_connection_id = 1;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The handlers log refusals; a fuzz run would print millions of them.
  common::log::set_level(common::log::level::error);
  // FRAME_DISPATCH_REPLAY=FILE: the inputs a FRAME_DISPATCH_HISTORY file kept, in order, in one
  // fresh world, as the run that wrote it met them; then exit. A finding crashes as it did
  // (timing-dependent state, such as a deadline passing between two inputs, may differ).
  if (const char* path = std::getenv("FRAME_DISPATCH_REPLAY"); path && *path) {
    const auto inputs = read_history(path);
    for (const auto& input : inputs) {
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
    }
    std::fprintf(stderr, "frame_dispatch_fuzzer: replayed %zu inputs of %s, no finding\n", inputs.size(), path);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::size_t every = fresh_every();
  if (current && current->inputs >= every) {
    delete current;
    current = nullptr;
  }
  if (!current) {
    current = new world();
    history().new_world();
  }
  ++current->inputs;
  history().add(data, size);
  auto& io = current->io;
  auto& svc = current->svc;
  auto client = std::make_shared<recorder>(next_connection_id++);

  protocol::frame_reader reader(current->settings.max_frame_bytes);
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
    if (trace()) std::fprintf(stderr, "> %s\n< %s\n", request.ShortDebugString().c_str(), answer.ShortDebugString().c_str());
    if (answer.correlation_id() != request.correlation_id()) finding("answer to another correlation id", request);
    // INTERNAL is a bug by definition. The in-memory store has no disk to fail, so a storage
    // error means the broker stored bytes it cannot read back (a message with an unknown group
    // field once made a partition unreadable).
    if (answer.has_error() && (answer.error().code() == v1::INTERNAL || answer.error().code() == v1::STORAGE_ERROR)) {
      std::fprintf(stderr, "%s: %s\n", v1::ErrorCode_Name(answer.error().code()).c_str(), answer.error().message().c_str());
      finding("INTERNAL or STORAGE_ERROR for a request", request);
    }
  }
  // The connection ends with the input, as a client that hangs up; what it left parked (a long
  // poll, a check-back) is released now, and handlers already due run before the next input.
  client->close();
  if (opened_connection) svc->connection_closed(*client);
  io.restart();
  io.poll();
  return 0;
}
