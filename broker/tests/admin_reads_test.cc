// Heavy admin reads run off the io thread (DESIGN.md §7): while a DescribeGroup, ListGroups,
// DlqList, DlqRedrive, WebhookList, WebhookAttempts, WebhookReplay or TxList is inside its store
// scan, the io thread still answers a produce. The store here is the in-memory one behind a gate:
// once armed, the scanning calls (dead_letters, webhook_attempts, read, load_group, list_txs) block until the
// test opens it — unless they come from the io thread, which this test runs itself: such a
// call is recorded (the test then fails) and let through, so old code fails instead of hanging.

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "forwarding_store.h"
#include "handler_test_support.h"

namespace txmq::broker::test {
namespace {

// Forwards everything to `inner`; the scanning reads wait at the gate while it is armed.
class gated_store final : public forwarding_store {
 public:
  using forwarding_store::forwarding_store;

  void arm(std::thread::id io_thread) {
    std::lock_guard lock(mutex_);
    armed_ = true;
    io_thread_ = io_thread;
    entered_ = false;
  }
  void open() {
    std::lock_guard lock(mutex_);
    armed_ = false;
    cv_.notify_all();
  }
  [[nodiscard]] bool entered() const {
    std::lock_guard lock(mutex_);
    return entered_;
  }
  [[nodiscard]] int io_thread_scans() const {
    std::lock_guard lock(mutex_);
    return io_thread_scans_;
  }

  result<storage::read_result> read(const storage::read_request& r) const override {
    gate();
    return forwarding_store::read(r);
  }
  result<std::vector<storage::tx_record>> list_txs(std::optional<storage::tx_state> s, std::size_t limit,
                                                   std::optional<storage::txid> after) const override {
    gate();
    return forwarding_store::list_txs(s, limit, after);
  }
  result<storage::group_state> load_group(std::string_view n) const override {
    gate();
    return forwarding_store::load_group(n);
  }
  result<std::vector<storage::dead_letter>> dead_letters(std::string_view g, std::size_t limit,
                                                         const std::optional<storage::message_ref>& after) const override {
    gate();
    return forwarding_store::dead_letters(g, limit, after);
  }
  result<std::vector<v1::WebhookAttempt>> webhook_attempts(const storage::webhook_attempts_query& q) const override {
    gate();
    return forwarding_store::webhook_attempts(q);
  }

 private:
  void gate() const {
    std::unique_lock lock(mutex_);
    if (!armed_) return;
    if (std::this_thread::get_id() == io_thread_) {
      ++io_thread_scans_;  // the io thread would wait on itself: let it through, and fail
      return;
    }
    entered_ = true;
    // Bounded: a test that never opens the gate fails on its own deadlines, then ends.
    cv_.wait_for(lock, 20s, [&] { return !armed_; });
  }

  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  bool armed_ = false;
  std::thread::id io_thread_;
  mutable bool entered_ = false;
  mutable int io_thread_scans_ = 0;
};

struct admin_case {
  const char* name;
  std::function<v1::Frame(const std::string& webhook_id)> frame;
  std::function<bool(const v1::Frame&)> answered_well;
};

void PrintTo(const admin_case& c, std::ostream* os) { *os << c.name; }

class admin_reads_test : public handler_test, public testing::WithParamInterface<admin_case> {
 protected:
  admin_reads_test() {
    settings.webhooks.guard.allow_private = true;
    settings.delivery.max_attempts = 1;  // one nack: a dead letter
  }

  void start_gated() {
    storage::store_options o = store_options;
    o.in_memory = true;
    auto s = storage::open_store(o);
    ASSERT_TRUE(s) << s.error().message;
    auto gated = std::make_unique<gated_store>(std::move(s.value()));
    gate_ = gated.get();
    store_ = std::move(gated);
    svc_ = std::make_unique<service>(io_, *store_, settings, nullptr);
    auto started = svc_->start();
    ASSERT_TRUE(started) << started.error().message;
  }

  gated_store* gate_ = nullptr;
};

TEST_P(admin_reads_test, the_io_thread_answers_a_produce_while_the_admin_read_scans) {
  ASSERT_NO_FATAL_FAILURE(start_gated());
  auto admin = client();
  auto producer = client();
  ASSERT_TRUE(request(admin, create_topic_frame("t", 2)).has_topic_info());
  ASSERT_TRUE(request(admin, create_topic_frame("other", 1)).has_topic_info());
  std::vector<v1::Message> batch;
  for (int i = 0; i < 20; ++i) batch.push_back(message("m" + std::to_string(i)));
  ASSERT_TRUE(request(producer, produce_frame("t", std::move(batch))).has_produce_response());
  // Dead letters in group g: each delivery nacked once with max_attempts 1.
  auto fetched = request(admin, fetch_frame("g", "t"));
  ASSERT_GT(fetched.fetch_response().deliveries_size(), 0);
  for (auto& d : fetched.fetch_response().deliveries()) {
    ASSERT_TRUE(request(admin, nack_frame("g", d.message(), 0)).has_delivery_results());
  }
  // A webhook from the latest message (so it reads nothing of the topic on its own while the
  // gate is armed; a replay does), to a port nobody listens on.
  v1::Frame create;
  create.mutable_webhook_create()->mutable_webhook()->set_topic("t");
  create.mutable_webhook_create()->mutable_webhook()->set_url("http://127.0.0.1:1/hook");
  auto created = request(admin, std::move(create));
  ASSERT_TRUE(created.has_webhook()) << created.ShortDebugString();
  const std::string webhook_id = created.webhook().id();
  // A prepared transaction (its first check an hour away) for TxList.
  ASSERT_TRUE(request(client("pg"), prepare_frame(protocol::uuid::make_v7(), "pg", {message("half", std::nullopt, "t")},
                                              3'600'000))
                  .has_prepare_response());

  // The admin request waits inside its scan; a produce is answered meanwhile.
  gate_->arm(std::this_thread::get_id());
  const std::uint64_t corr = ++next_corr_;
  auto f = GetParam().frame(webhook_id);
  f.set_correlation_id(corr);
  svc_->handle(admin, std::move(f));
  ASSERT_TRUE(run_until([&] { return gate_->entered() || gate_->io_thread_scans() > 0; }, 10s))
      << "the admin request never read the store";
  EXPECT_EQ(gate_->io_thread_scans(), 0) << GetParam().name << " scanned the store on the io thread";
  auto produced = request(producer, produce_frame("other", {message("while scanning")}), 5s);
  EXPECT_TRUE(produced.has_produce_response()) << produced.ShortDebugString();
  EXPECT_FALSE(admin->answer(corr).has_value()) << "answered before its scan ended";

  gate_->open();
  ASSERT_TRUE(run_until([&] { return admin->answer(corr).has_value(); }, 10s));
  EXPECT_TRUE(GetParam().answered_well(*admin->answer(corr))) << admin->answer(corr)->ShortDebugString();
}

v1::Frame describe_group(const std::string&) {
  v1::Frame f;
  f.mutable_describe_group()->set_group("g");
  return f;
}

INSTANTIATE_TEST_SUITE_P(
    requests, admin_reads_test,
    testing::Values(
        admin_case{"describe_group", describe_group,
                   [](const v1::Frame& a) { return a.has_group_info() && a.group_info().dead_letters() > 0; }},
        admin_case{"list_groups",
                   [](const std::string&) {
                     v1::Frame f;
                     f.mutable_list_groups();
                     return f;
                   },
                   [](const v1::Frame& a) { return a.list_groups_response().groups_size() == 1; }},
        admin_case{"dlq_list",
                   [](const std::string&) {
                     v1::Frame f;
                     f.mutable_dlq_list()->set_group("g");
                     return f;
                   },
                   [](const v1::Frame& a) { return a.dlq_list_response().dead_letters_size() > 0; }},
        admin_case{"dlq_redrive",
                   [](const std::string&) {
                     v1::Frame f;
                     f.mutable_dlq_redrive()->set_group("g");
                     return f;
                   },
                   [](const v1::Frame& a) { return a.has_dlq_redrive_response() && a.dlq_redrive_response().redriven() > 0; }},
        admin_case{"webhook_list",
                   [](const std::string&) {
                     v1::Frame f;
                     f.mutable_webhook_list();
                     return f;
                   },
                   [](const v1::Frame& a) { return a.webhook_list_response().webhooks_size() == 1; }},
        admin_case{"webhook_attempts",
                   [](const std::string& id) {
                     v1::Frame f;
                     f.mutable_webhook_attempts()->set_id(id);
                     return f;
                   },
                   [](const v1::Frame& a) { return a.has_webhook_attempts_response(); }},
        admin_case{"tx_list",
                   [](const std::string&) {
                     v1::Frame f;
                     f.mutable_tx_list();
                     return f;
                   },
                   [](const v1::Frame& a) { return a.tx_list_response().txs_size() == 1; }},
        admin_case{"webhook_replay",
                   [](const std::string& id) {
                     v1::Frame f;
                     f.mutable_webhook_replay()->set_id(id);
                     return f;
                   },
                   [](const v1::Frame& a) { return a.has_webhook_replay_response() && a.webhook_replay_response().queued() == 20; }}),
    [](const testing::TestParamInfo<admin_case>& info) { return std::string(info.param.name); });

// WebhookAttempts is paged like DlqList: limit + a cursor (next_after), over the whole log and
// over one message's attempts, every attempt once and in order; a bad cursor is refused.
class webhook_attempts_paging_test : public handler_test {
 protected:
  webhook_attempts_paging_test() { settings.webhooks.guard.allow_private = true; }
};

TEST_F(webhook_attempts_paging_test, pages_follow_next_after_to_the_end) {
  ASSERT_NO_FATAL_FAILURE(start());
  auto admin = client();
  ASSERT_TRUE(request(admin, create_topic_frame("t", 1)).has_topic_info());
  v1::Frame create;
  create.mutable_webhook_create()->mutable_webhook()->set_topic("t");
  create.mutable_webhook_create()->mutable_webhook()->set_url("http://127.0.0.1:1/hook");
  auto created = request(admin, std::move(create));
  ASSERT_TRUE(created.has_webhook()) << created.ShortDebugString();
  const std::string id = created.webhook().id();

  // 2,500 attempts, of 5 messages, logged straight into the store (10 ms apart), ending an
  // hour ago: inside webhook_attempt_retention (7 days), whose first expiry pass runs on the
  // notifier's first tick and once deleted attempts dated 2023 in the middle of this test.
  const std::int64_t first_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count() -
      3'600'000 - 2500 * 10;
  std::vector<std::string> messages;
  for (int i = 0; i < 5; ++i) messages.push_back(std::string(protocol::uuid::make_v7().raw()));
  std::vector<v1::WebhookAttempt> log;
  for (int i = 0; i < 2500; ++i) {
    v1::WebhookAttempt a;
    a.set_webhook_id(id);
    a.set_message_id(messages[static_cast<std::size_t>(i) % messages.size()]);
    a.set_topic("t");
    a.set_attempt(static_cast<std::uint32_t>(i / 5 + 1));
    a.set_time_ms(first_ms + i * 10);
    a.set_outcome(v1::WEBHOOK_FAILED);
    log.push_back(a);
  }
  auto written = storage::call_sync<void>([&](auto done) { store_->record_webhook_attempts(log, done); });
  ASSERT_TRUE(written) << written.error().message;

  const auto read_all = [&](const std::string& message, std::uint32_t limit, std::vector<int>& page_sizes,
                            bool newest_first = false) {
    std::vector<v1::WebhookAttempt> all;
    std::string after;
    for (int pages = 0; pages < 100; ++pages) {
      v1::Frame f;
      f.mutable_webhook_attempts()->set_id(id);
      f.mutable_webhook_attempts()->set_limit(limit);
      f.mutable_webhook_attempts()->set_message_id(message);
      // Newest first: the cursor says so, "-" alone from the newest.
      f.mutable_webhook_attempts()->set_after(after.empty() && newest_first ? "-" : after);
      auto r = request(admin, std::move(f));
      EXPECT_TRUE(r.has_webhook_attempts_response()) << r.ShortDebugString();
      page_sizes.push_back(r.webhook_attempts_response().attempts_size());
      for (auto& a : r.webhook_attempts_response().attempts()) all.push_back(a);
      after = r.webhook_attempts_response().next_after();
      if (after.empty()) break;
    }
    return all;
  };

  std::vector<int> sizes;
  auto all = read_all("", 1000, sizes);
  EXPECT_EQ(sizes, (std::vector<int>{1000, 1000, 500}));
  ASSERT_EQ(all.size(), log.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].time_ms(), log[i].time_ms()) << "attempt " << i << " out of order or repeated";
  }

  // One message's attempts (500 of them), 200 a page.
  sizes.clear();
  auto one = read_all(messages[2], 200, sizes);
  EXPECT_EQ(sizes, (std::vector<int>{200, 200, 100}));
  ASSERT_EQ(one.size(), 500u);
  for (std::size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].message_id(), messages[2]);
    if (i > 0) {
      EXPECT_LT(one[i - 1].time_ms(), one[i].time_ms());
    }
  }

  // An exact multiple of the limit ends with no cursor rather than an empty page.
  sizes.clear();
  EXPECT_EQ(read_all(messages[0], 500, sizes).size(), 500u);
  EXPECT_EQ(sizes, (std::vector<int>{500}));

  // Newest first (what the console shows): the same attempts in reverse, the first page the
  // latest 1,000, each once.
  sizes.clear();
  auto newest = read_all("", 1000, sizes, true);
  EXPECT_EQ(sizes, (std::vector<int>{1000, 1000, 500}));
  ASSERT_EQ(newest.size(), log.size());
  for (std::size_t i = 0; i < newest.size(); ++i) {
    EXPECT_EQ(newest[i].time_ms(), log[log.size() - 1 - i].time_ms()) << "attempt " << i << " out of order or repeated";
  }
  sizes.clear();
  auto one_newest = read_all(messages[2], 200, sizes, true);
  EXPECT_EQ(sizes, (std::vector<int>{200, 200, 100}));
  ASSERT_EQ(one_newest.size(), 500u);
  for (std::size_t i = 0; i < one_newest.size(); ++i) {
    EXPECT_EQ(one_newest[i].message_id(), messages[2]);
    if (i > 0) {
      EXPECT_GT(one_newest[i - 1].time_ms(), one_newest[i].time_ms());
    }
  }

  v1::Frame bad;
  bad.mutable_webhook_attempts()->set_id(id);
  bad.mutable_webhook_attempts()->set_after("zz");
  EXPECT_EQ(request(admin, bad).error().code(), v1::INVALID_ARGUMENT);
  bad.mutable_webhook_attempts()->set_after("00ff");
  EXPECT_EQ(request(admin, bad).error().code(), v1::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace txmq::broker::test
