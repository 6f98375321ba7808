// Store unit tests: webhook subscriptions (durable, replaced, deleted) and the attempt log
// (by subscription, by message, expiry by time), across reopen.

#include "store_test_fixture.h"

namespace txmq::storage::test {
namespace {

v1::Webhook make_webhook(const std::string& id, const std::string& secret) {
  v1::Webhook w;
  w.set_id(id);
  w.set_topic("t");
  w.set_url("http://127.0.0.1:1/hook");
  w.add_secrets()->set_secret(secret);
  w.set_token("whtok_" + id);
  w.add_schedule_ms(1000);
  return w;
}

v1::WebhookAttempt make_attempt(const std::string& webhook, const std::string& message, std::uint32_t attempt,
                                std::int64_t time_ms) {
  v1::WebhookAttempt a;
  a.set_webhook_id(webhook);
  a.set_message_id(message);
  a.set_attempt(attempt);
  a.set_time_ms(time_ms);
  a.set_status(500);
  a.set_outcome(v1::WEBHOOK_FAILED);
  return a;
}

class store_webhook_test : public store_test {
 protected:
  void put(const v1::Webhook& w) {
    check_ok(call_sync<void>([&](auto done) { store_->put_webhook(w, done); }), "put_webhook");
  }
  void log(std::vector<v1::WebhookAttempt> attempts) {
    check_ok(call_sync<void>([&](auto done) { store_->record_webhook_attempts(attempts, done); }), "record");
  }
  std::vector<v1::WebhookAttempt> attempts(const std::string& webhook, std::optional<protocol::uuid> message = {}) {
    webhook_attempts_query q;
    q.webhook_id = webhook;
    q.message = message;
    return value_of(store_->webhook_attempts(q), "webhook_attempts");
  }
};

TEST_F(store_webhook_test, subscriptions_survive_reopen_are_replaced_and_deleted) {
  put(make_webhook("wh_b", "whsec_b"));
  put(make_webhook("wh_a", "whsec_a"));
  auto rotated = make_webhook("wh_a", "whsec_new");
  rotated.add_secrets()->set_secret("whsec_a");
  rotated.mutable_secrets(1)->set_expires_ms(now() + 1000);
  put(rotated);
  reopen();
  auto all = value_of(store_->webhooks(), "webhooks");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id(), "wh_a");
  ASSERT_EQ(all[0].secrets_size(), 2);
  EXPECT_EQ(all[0].secrets(0).secret(), "whsec_new");
  EXPECT_EQ(all[0].secrets(1).expires_ms(), now() + 1000);
  EXPECT_EQ(all[1].id(), "wh_b");

  EXPECT_TRUE(value_of(call_sync<bool>([&](auto done) { store_->delete_webhook("wh_b", done); }), "delete"));
  EXPECT_FALSE(value_of(call_sync<bool>([&](auto done) { store_->delete_webhook("wh_b", done); }), "delete again"));
  reopen();
  ASSERT_EQ(value_of(store_->webhooks(), "webhooks").size(), 1u);
  EXPECT_FALSE(call_sync<void>([&](auto done) { store_->put_webhook(v1::Webhook{}, done); }));
}

TEST_F(store_webhook_test, attempt_log_by_subscription_and_message_then_expiry) {
  const auto m1 = protocol::uuid::make_v7();
  const auto m2 = protocol::uuid::make_v7();
  const std::string r1(m1.raw()), r2(m2.raw());
  log({make_attempt("wh_a", r1, 1, 1000), make_attempt("wh_a", r2, 1, 1500), make_attempt("wh_a", r1, 2, 2000),
       make_attempt("wh_b", r1, 1, 1200)});
  reopen();
  auto a = attempts("wh_a");
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].time_ms(), 1000);  // oldest first
  EXPECT_EQ(a[1].time_ms(), 1500);
  EXPECT_EQ(a[2].time_ms(), 2000);
  auto one = attempts("wh_a", m1);
  ASSERT_EQ(one.size(), 2u);
  EXPECT_EQ(one[0].attempt(), 1u);
  EXPECT_EQ(one[1].attempt(), 2u);
  EXPECT_EQ(attempts("wh_b").size(), 1u);
  EXPECT_TRUE(attempts("wh_c").empty());

  // Older than 1600 ms goes, in every subscription; the per-message index goes with it.
  EXPECT_EQ(value_of(call_sync<std::uint64_t>([&](auto done) { store_->expire_webhook_attempts(1600, 100, done); }),
                     "expire"),
            3u);
  ASSERT_EQ(attempts("wh_a").size(), 1u);
  EXPECT_EQ(attempts("wh_a", m1).size(), 1u);
  EXPECT_TRUE(attempts("wh_a", m2).empty());
  EXPECT_TRUE(attempts("wh_b").empty());
  // The limit bounds one pass.
  log({make_attempt("wh_c", r1, 1, 10), make_attempt("wh_c", r1, 2, 20), make_attempt("wh_c", r1, 3, 30)});
  EXPECT_EQ(value_of(call_sync<std::uint64_t>([&](auto done) { store_->expire_webhook_attempts(100, 2, done); }),
                     "expire"),
            2u);
  EXPECT_EQ(attempts("wh_c").size(), 1u);
}

}  // namespace
}  // namespace txmq::storage::test
