#pragma once

// The fixture of the store unit tests: a RocksDB store in a fresh temporary directory with a
// fake clock the test moves, reopened on demand (as RocksDB's DBTestBase::Reopen), and helpers
// that wait for the asynchronous calls.

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "txmq/protocol/message_id.h"
#include "txmq/storage/store.h"

namespace txmq::protocol {
inline void PrintTo(const uuid& id, std::ostream* os) { *os << id.to_string(); }
}  // namespace txmq::protocol

namespace txmq::storage {

// Readable failure output for the types the tests compare.
inline void PrintTo(const position& p, std::ostream* os) {
  *os << "{p" << p.partition << " @" << p.offset << (p.duplicate ? " dup}" : "}");
}
inline void PrintTo(const group_cursor& c, std::ostream* os) {
  *os << "{" << c.topic << "/" << c.partition << " floor " << c.ack_floor << " next " << c.next_offset << "}";
}
inline void PrintTo(const delivery_record& d, std::ostream* os) {
  *os << "{" << d.topic << "/" << d.partition << " @" << d.offset << " attempt " << d.attempt << " visible "
      << d.visible_at_ms << " status " << static_cast<int>(d.status) << "}";
}

namespace test {

namespace fs = std::filesystem;

// Matchers for result<T>.
MATCHER(is_ok, "succeeds") {
  if (arg) return true;
  *result_listener << "fails with " << arg.error().message;
  return false;
}

MATCHER_P(fails_with, code, "fails with " + make_error_code(code).message()) {
  if (arg) {
    *result_listener << "succeeds";
    return false;
  }
  *result_listener << "fails with " << arg.error().message;
  return arg.error() == make_error_code(code);
}

// The value of a result; an error throws, which fails the running test with the error's text.
template <class T>
T value_of(result<T> r, const char* what) {
  if (!r) throw std::runtime_error(std::string(what) + " failed: " + r.error().message);
  return std::move(r).value();
}

inline void check_ok(result<void> r, const char* what) {
  if (!r) throw std::runtime_error(std::string(what) + " failed: " + r.error().message);
}

inline std::string new_id() { return std::string(protocol::uuid::make_v7().raw()); }

inline v1::Message make_message(std::string body, std::optional<std::string> key = std::nullopt,
                                std::string topic = {}) {
  v1::Message m;
  m.set_id(new_id());
  m.set_body(std::move(body));
  if (key) m.set_key(*key);
  if (!topic.empty()) m.set_topic(std::move(topic));
  return m;
}

// Counts completions down to zero; waits with a deadline instead of sleeping.
class countdown {
 public:
  explicit countdown(std::size_t n) : left_(n) {}
  void done() {
    std::lock_guard lk(mu_);
    if (--left_ == 0) cv_.notify_all();
  }
  [[nodiscard]] bool wait_for(std::chrono::milliseconds deadline) {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, deadline, [&] { return left_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::size_t left_;
};

class store_test : public ::testing::Test {
 protected:
  static constexpr std::int64_t k_start_ms = 1'700'000'000'000;
  static constexpr std::chrono::milliseconds k_dedupe_window{1000};

  void SetUp() override {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("txmq-store-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(counter.fetch_add(1)) + "-" + info->name());
    fs::remove_all(dir_);
    open();
  }

  void TearDown() override {
    if (store_) store_->close();
    store_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  store_options options() {
    store_options o;
    o.dir = dir_;
    o.dedupe_window = k_dedupe_window;
    o.block_cache_bytes = 8u << 20;
    o.write_buffer_bytes = 4u << 20;
    o.clock = [this] { return now_.load(); };
    if (tweak_options) tweak_options(o);
    return o;
  }
  // Changes the options of the next open() (a test's own settings).
  std::function<void(store_options&)> tweak_options;

  void open() {
    auto r = open_store(options());
    if (!r) throw std::runtime_error("open_store failed: " + r.error().to_string());
    store_ = std::move(r).value();
  }

  // Closes the store and opens it again on the same directory.
  void reopen() {
    store_->close();
    store_.reset();
    open();
  }

  void advance(std::int64_t ms) { now_ += ms; }
  std::int64_t now() const { return now_.load(); }

  // ---- topics and messages

  result<topic_info> try_create_topic(topic_config config) {
    return call_sync<topic_info>([&](auto done) { store_->create_topic(config, done); });
  }

  topic_info create_topic(const std::string& name, std::uint32_t partitions = 1, std::int64_t retention_ms = 0,
                          std::uint64_t retention_bytes = 0) {
    return value_of(try_create_topic({name, partitions, retention_ms, retention_bytes}), "create_topic");
  }

  result<append_result> try_append(append_request req) {
    return call_sync<append_result>([&](auto done) { store_->append(req, done); });
  }

  append_result append(const std::string& topic, std::vector<v1::Message> messages) {
    append_request req;
    req.topic = topic;
    req.messages = std::move(messages);
    return value_of(try_append(std::move(req)), "append");
  }

  read_result read(const std::string& topic, std::uint32_t partition, std::uint64_t from = 0,
                   std::size_t max_messages = 500, std::size_t max_bytes = 1u << 20) {
    read_request req;
    req.topic = topic;
    req.partition = partition;
    req.from_offset = from;
    req.max_messages = max_messages;
    req.max_bytes = max_bytes;
    return value_of(store_->read(req), "read");
  }

  // Every stored message of a partition, read in small steps.
  std::vector<v1::Message> read_all(const std::string& topic, std::uint32_t partition) {
    std::vector<v1::Message> out;
    std::uint64_t from = 0;
    for (;;) {
      auto r = read(topic, partition, from, 7);
      if (r.messages.empty()) return out;
      for (auto& m : r.messages) out.push_back(std::move(m));
      from = r.next_offset;
    }
  }

  partition_info partition_of(const std::string& topic, std::uint32_t partition) {
    auto t = store_->topic(topic);
    if (!t || partition >= t->partitions.size()) throw std::runtime_error("no partition " + topic);
    return t->partitions[partition];
  }

  std::uint64_t total_messages(const std::string& topic) {
    auto t = store_->topic(topic);
    if (!t) throw std::runtime_error("no topic " + topic);
    std::uint64_t n = 0;
    for (auto& p : t->partitions) n += p.next_offset - p.start_offset;
    return n;
  }

  // ---- transactions

  result<prepare_result> try_prepare(prepare_request req) {
    return call_sync<prepare_result>([&](auto done) { store_->prepare(req, done); });
  }

  prepare_result prepare(const txid& id, std::vector<v1::Message> messages, std::int64_t first_check_ms,
                         std::vector<ack_ref> acks = {}) {
    prepare_request req;
    req.id = id;
    req.producer_group = "producers";
    req.messages = std::move(messages);
    req.acks = std::move(acks);
    req.first_check_ms = first_check_ms;
    return value_of(try_prepare(std::move(req)), "prepare");
  }

  result<resolve_result> try_resolve(const txid& id, tx_outcome outcome, resolver by = resolver::producer) {
    resolve_request req;
    req.id = id;
    req.outcome = outcome;
    req.by = by;
    return call_sync<resolve_result>([&](auto done) { store_->resolve(req, done); });
  }

  resolve_result resolve(const txid& id, tx_outcome outcome, resolver by = resolver::producer) {
    return value_of(try_resolve(id, outcome, by), "resolve");
  }

  void record_checks(std::vector<check_update> updates) {
    check_ok(call_sync<void>([&](auto done) { store_->record_checks(updates, done); }), "record_checks");
  }

  std::optional<tx_record> find_tx(const txid& id) { return value_of(store_->find_tx(id), "find_tx"); }

  std::vector<txid> due_check_ids(std::int64_t until_ms, std::size_t limit = 100) {
    std::vector<txid> out;
    for (auto& t : value_of(store_->due_checks(until_ms, limit), "due_checks")) out.push_back(t.id);
    return out;
  }

  std::vector<txid> list_tx_ids(std::optional<tx_state> state, std::size_t limit = 100,
                                std::optional<txid> after = std::nullopt) {
    std::vector<txid> out;
    for (auto& t : value_of(store_->list_txs(state, limit, after), "list_txs")) out.push_back(t.id);
    return out;
  }

  // ---- groups

  result<group_state> try_ensure_group(const std::string& name, std::vector<std::string> topics, group_start start) {
    group_info info;
    info.name = name;
    info.topics = std::move(topics);
    return call_sync<group_state>([&](auto done) { store_->ensure_group(info, start, done); });
  }

  group_state ensure_group(const std::string& name, std::vector<std::string> topics,
                           group_start start = group_start::earliest) {
    return value_of(try_ensure_group(name, std::move(topics), start), "ensure_group");
  }

  result<group_update_result> try_update_group(group_update u) {
    return call_sync<group_update_result>([&](auto done) { store_->update_group(u, done); });
  }

  group_update_result update_group(group_update u) { return value_of(try_update_group(std::move(u)), "update_group"); }

  group_state load_group(const std::string& name) { return value_of(store_->load_group(name), "load_group"); }

  std::vector<due_delivery> due_deliveries(std::int64_t until_ms, std::size_t limit = 100) {
    return value_of(store_->due_deliveries(until_ms, limit), "due_deliveries");
  }

  retention_result enforce_retention() {
    return value_of(call_sync<retention_result>([&](auto done) { store_->enforce_retention(done); }),
                    "enforce_retention");
  }

  fs::path dir_;
  std::atomic<std::int64_t> now_{k_start_ms};
  std::unique_ptr<store> store_;
};

// Offsets of a list of delivery records, for short assertions.
inline std::vector<std::uint64_t> offsets_of(const std::vector<delivery_record>& ds) {
  std::vector<std::uint64_t> out;
  for (auto& d : ds) out.push_back(d.offset);
  return out;
}

inline std::vector<std::uint64_t> offsets_of(const std::vector<v1::Message>& ms) {
  std::vector<std::uint64_t> out;
  for (auto& m : ms) out.push_back(m.offset());
  return out;
}

}  // namespace test
}  // namespace txmq::storage
