// Unit tests of authentication and authorization on the broker's side: the ACL model (prefix
// resources, admin on cluster), access_control (token hashes, the admin principal, the client
// certificate's CN when no token is sent, grants applied as they are stored), the request table
// (one entry per field of the Frame oneof, enumerated through the protobuf descriptor) and the
// service checking a request before its handler runs.

#include <set>

#include <gtest/gtest.h>

#include "auth/access_control.h"
#include "auth/acl.h"
#include "auth/request_access.h"
#include "handler_test_support.h"

namespace txmq::broker::test {
namespace {

using auth::permission;

TEST(acl, resources_match_exactly_or_by_prefix_within_their_kind) {
  EXPECT_TRUE(auth::covers("topic:orders", "topic:orders"));
  EXPECT_FALSE(auth::covers("topic:orders", "topic:orders2"));
  EXPECT_TRUE(auth::covers("topic:ord*", "topic:orders"));
  EXPECT_TRUE(auth::covers("topic:*", "topic:x"));
  EXPECT_FALSE(auth::covers("topic:*", "group:x"));
  EXPECT_FALSE(auth::covers("*", "topic:x"));
  EXPECT_FALSE(auth::covers("group:*", "producer-group:x"));
  EXPECT_TRUE(auth::covers("cluster", "cluster"));
  EXPECT_TRUE(auth::check_resource("producer-group:a*"));
  EXPECT_TRUE(auth::check_resource("cluster"));
  EXPECT_FALSE(auth::check_resource("topic:"));
  EXPECT_FALSE(auth::check_resource("queue:x"));
  EXPECT_FALSE(auth::check_resource("topic:a b"));
  EXPECT_FALSE(auth::check_principal_name("a b"));
  EXPECT_TRUE(auth::check_principal_name("svc-orders@eu.1"));
}

TEST(acl, the_table_grants_what_was_added_and_admin_on_cluster_holds_everything) {
  auth::acl_table t;
  t.assign({{"svc", "produce", "topic:orders"}, {"svc", "consume", "group:g*"}, {"ops", "admin", "cluster"}});
  EXPECT_TRUE(t.allows("svc", permission::produce, "topic:orders"));
  EXPECT_FALSE(t.allows("svc", permission::consume, "topic:orders"));
  EXPECT_TRUE(t.allows("svc", permission::consume, "group:g1"));
  EXPECT_FALSE(t.allows("other", permission::produce, "topic:orders"));
  EXPECT_TRUE(t.allows("ops", permission::transact, "producer-group:x"));
  EXPECT_FALSE(t.add({"svc", "produce", "topic:orders"}));
  EXPECT_TRUE(t.remove({"svc", "produce", "topic:orders"}));
  EXPECT_FALSE(t.allows("svc", permission::produce, "topic:orders"));
  EXPECT_EQ(t.entries(std::string("svc")).size(), 1u);
}

TEST(request_table, every_field_of_the_frame_oneof_has_exactly_one_entry) {
  const auto* oneof = v1::Frame::descriptor()->FindOneofByName("body");
  ASSERT_NE(oneof, nullptr);
  std::set<int> seen;
  for (int i = 0; i < oneof->field_count(); ++i) {
    const auto* field = oneof->field(i);
    const auto* rule = auth::rule_for(field->number());
    ASSERT_NE(rule, nullptr) << "Frame." << field->name() << " (" << field->number()
                             << ") has no entry in auth/request_access.cc: say what it needs";
    EXPECT_EQ(rule->name, field->name());
    EXPECT_EQ(rule->role == auth::frame_role::request, rule->needs != nullptr) << field->name();
    seen.insert(field->number());
  }
  EXPECT_EQ(seen.size(), auth::request_rules().size()) << "the table names fields the oneof does not have";
}

TEST(request_table, requests_need_what_design_section_7_says) {
  const auth::request_lookups none;
  auto needs = [&](const v1::Frame& f) { return auth::rule_for(static_cast<int>(f.body_case()))->needs(f, none); };
  v1::Frame produce;
  produce.mutable_produce()->set_topic("orders");
  EXPECT_EQ(needs(produce), (std::vector<auth::need>{{permission::produce, "topic:orders"}}));
  v1::Frame ack;
  ack.mutable_ack()->set_group("g");
  ack.mutable_ack()->add_refs()->set_topic("orders");
  EXPECT_EQ(needs(ack), (std::vector<auth::need>{{permission::consume, "group:g"}, {permission::consume, "topic:orders"}}));
  v1::Frame prepare;
  prepare.mutable_prepare()->set_producer_group("pg");
  prepare.mutable_prepare()->add_messages()->set_topic("a");
  EXPECT_EQ(needs(prepare),
            (std::vector<auth::need>{{permission::transact, "producer-group:pg"}, {permission::produce, "topic:a"}}));
  v1::Frame redrive;
  redrive.mutable_dlq_redrive()->set_group("g");
  EXPECT_EQ(needs(redrive), (std::vector<auth::need>{{permission::admin, "cluster"}}));
  auth::request_lookups with_tx;
  with_tx.tx_producer_group = [](const std::string&) { return std::optional<std::string>("b"); };
  v1::Frame end;
  end.mutable_end_tx()->set_txid(std::string(16, 'x'));
  EXPECT_EQ(auth::rule_for(52)->needs(end, with_tx),
            (std::vector<auth::need>{{permission::transact, "producer-group:b"}}));
}

class access_control_test : public handler_test {
 protected:
  void SetUp() override {
    settings.auth = true;
    settings.admin_token_sha256 = auth::sha256(admin_token);
    start();
  }
  auth::access_control& access() { return svc_->access(); }
  std::string create(const std::string& name) {
    std::optional<result<std::string>> got;
    access().create_principal(name, [&](result<std::string> r) { got = std::move(r); });
    EXPECT_TRUE(run_until([&] { return got.has_value(); }));
    EXPECT_TRUE(*got) << got->error().message;
    return *got ? got->value() : std::string();
  }
  void grant(storage::acl_entry e) {
    std::optional<result<bool>> got;
    access().grant(std::move(e), [&](result<bool> r) { got = std::move(r); });
    EXPECT_TRUE(run_until([&] { return got.has_value(); }));
    EXPECT_TRUE(*got && got->value());
  }
  const std::string admin_token = "txmq_0123456789abcdef0123456789abcdef";
};

TEST_F(access_control_test, tokens_are_random_prefixed_and_only_their_hash_is_stored) {
  const std::string token = create("svc");
  EXPECT_TRUE(token.starts_with("txmq_"));
  EXPECT_EQ(token.size(), 5u + 48u);
  EXPECT_NE(create("svc2"), token);
  auto stored = store_->principals();
  ASSERT_TRUE(stored);
  for (auto& p : stored.value()) {
    EXPECT_EQ(p.token_sha256.size(), 32u);
    EXPECT_EQ(p.token_sha256.find(token), std::string::npos);
  }
  EXPECT_EQ(access().authenticate(token, std::nullopt), "svc");
  EXPECT_EQ(access().authenticate(admin_token, std::nullopt), "admin");
  EXPECT_EQ(access().authenticate("txmq_wrong", std::nullopt), std::nullopt);
  EXPECT_EQ(access().authenticate("", std::nullopt), std::nullopt);
}

TEST_F(access_control_test, a_certificate_names_the_principal_only_when_no_token_is_sent) {
  const std::string token = create("svc");
  create("billing");
  // mTLS without a token: the CN names an existing principal.
  EXPECT_EQ(access().authenticate("", std::string("billing")), "billing");
  EXPECT_EQ(access().authenticate("", std::string("nobody")), std::nullopt);
  EXPECT_EQ(access().authenticate("", std::string("")), std::nullopt);
  // A token wins over the certificate, and a wrong token is refused even with a good certificate.
  EXPECT_EQ(access().authenticate(token, std::string("billing")), "svc");
  EXPECT_EQ(access().authenticate("txmq_wrong", std::string("billing")), std::nullopt);
}

TEST_F(access_control_test, grants_apply_at_once_and_a_deleted_principal_can_do_nothing) {
  const std::string token = create("svc");
  EXPECT_FALSE(access().allows("svc", permission::produce, "topic:t"));
  grant({"svc", "produce", "topic:t*"});
  EXPECT_TRUE(access().allows("svc", permission::produce, "topic:t1"));
  EXPECT_TRUE(access().allows("admin", permission::admin, "cluster"));
  auto why = access().deny("svc", {{permission::consume, "group:g"}});
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("consume on group:g"), std::string::npos) << *why;
  std::optional<result<bool>> deleted;
  access().delete_principal("svc", [&](result<bool> r) { deleted = std::move(r); });
  ASSERT_TRUE(run_until([&] { return deleted.has_value(); }));
  EXPECT_FALSE(access().allows("svc", permission::produce, "topic:t1"));
  EXPECT_EQ(access().authenticate(token, std::nullopt), std::nullopt);
  // Made again under the name, it starts without the old grants and with a new token.
  const std::string again = create("svc");
  EXPECT_NE(again, token);
  EXPECT_FALSE(access().allows("svc", permission::produce, "topic:t1"));
}

TEST_F(access_control_test, the_service_refuses_a_request_before_its_handler_runs) {
  create("svc");
  auto c = client();
  c->principal_ = "svc";
  v1::Frame f;
  f.mutable_create_topic()->set_name("t");
  auto answer = request(c, f);
  ASSERT_TRUE(answer.has_error());
  EXPECT_EQ(answer.error().code(), v1::NOT_AUTHORIZED);
  EXPECT_NE(answer.error().message().find("admin on cluster"), std::string::npos);
  EXPECT_FALSE(store_->topic("t"));
}

TEST(admin_token_file, missing_unreadable_or_short_tokens_are_refused_with_the_file_named) {
  auto missing = auth::read_admin_token("/nonexistent/admin.token");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("/nonexistent/admin.token"), std::string::npos);
  const std::string path = ::testing::TempDir() + "/txmq_admin_token_test";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("short\n", f);
    std::fclose(f);
  }
  auto short_token = auth::read_admin_token(path);
  ASSERT_FALSE(short_token);
  EXPECT_NE(short_token.error().message.find("at least 32"), std::string::npos);
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("  txmq_0123456789abcdef0123456789abcdef\n", f);
    std::fclose(f);
  }
  auto good = auth::read_admin_token(path);
  ASSERT_TRUE(good);
  EXPECT_EQ(good.value(), "txmq_0123456789abcdef0123456789abcdef");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace txmq::broker::test
