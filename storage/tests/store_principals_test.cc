// Store unit tests: principals (token hash only, create-once, across reopen) and ACL entries
// (idempotent grant and revoke, listed in order, removed with their principal in one write).

#include <future>

#include "store_test_fixture.h"

namespace txmq::storage::test {
namespace {

class store_principal_test : public store_test {
 protected:
  bool create(const std::string& name, char fill = 'h') {
    principal_record r{name, std::string(32, fill), now()};
    return value_of(call_sync<bool>([&](auto done) { store_->create_principal(r, done); }), "create_principal");
  }
  bool remove(const std::string& name) {
    return value_of(call_sync<bool>([&](auto done) { store_->delete_principal(name, done); }), "delete_principal");
  }
  bool grant(const acl_entry& e) {
    return value_of(call_sync<bool>([&](auto done) { store_->put_acl(e, done); }), "put_acl");
  }
  bool revoke(const acl_entry& e) {
    return value_of(call_sync<bool>([&](auto done) { store_->delete_acl(e, done); }), "delete_acl");
  }
};

TEST_F(store_principal_test, principals_are_created_once_survive_reopen_and_are_deleted) {
  EXPECT_TRUE(create("svc", 'a'));
  EXPECT_TRUE(create("ops", 'b'));
  EXPECT_FALSE(create("svc", 'c'));  // exists: the first token hash stays
  reopen();
  auto all = value_of(store_->principals(), "principals");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "ops");
  EXPECT_EQ(all[1].name, "svc");
  EXPECT_EQ(all[1].token_sha256, std::string(32, 'a'));
  EXPECT_EQ(all[1].created_ms, now());
  EXPECT_TRUE(remove("svc"));
  EXPECT_FALSE(remove("svc"));
  reopen();
  ASSERT_EQ(value_of(store_->principals(), "principals").size(), 1u);
  // A hash that is not 32 bytes and an empty name are refused.
  EXPECT_FALSE(call_sync<bool>([&](auto done) { store_->create_principal({"x", "short", 0}, done); }));
  EXPECT_FALSE(call_sync<bool>([&](auto done) { store_->create_principal({"", std::string(32, 'a'), 0}, done); }));
}

TEST_F(store_principal_test, grants_are_idempotent_ordered_and_go_with_their_principal) {
  ASSERT_TRUE(create("svc"));
  ASSERT_TRUE(create("svc2"));
  EXPECT_TRUE(grant({"svc", "produce", "topic:orders"}));
  EXPECT_FALSE(grant({"svc", "produce", "topic:orders"}));
  EXPECT_TRUE(grant({"svc", "consume", "group:g*"}));
  EXPECT_TRUE(grant({"svc2", "transact", "producer-group:a"}));
  reopen();
  auto all = value_of(store_->acls(), "acls");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0], (acl_entry{"svc", "consume", "group:g*"}));
  EXPECT_EQ(all[1], (acl_entry{"svc", "produce", "topic:orders"}));
  // "svc2" sorts after every entry of "svc": a principal's prefix ends with NUL.
  EXPECT_EQ(all[2], (acl_entry{"svc2", "transact", "producer-group:a"}));
  EXPECT_TRUE(revoke({"svc", "consume", "group:g*"}));
  EXPECT_FALSE(revoke({"svc", "consume", "group:g*"}));

  // Deleting the principal removes its grants, also one written in the same commit group.
  std::promise<void> both;
  int left = 2;
  std::mutex mu;
  auto one_done = [&] {
    std::lock_guard lk(mu);
    if (--left == 0) both.set_value();
  };
  store_->put_acl({"svc", "admin", "cluster"}, [&](result<bool>) { one_done(); });
  store_->delete_principal("svc", [&](result<bool>) { one_done(); });
  both.get_future().wait();
  reopen();
  all = value_of(store_->acls(), "acls");
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].principal, "svc2");
  EXPECT_FALSE(call_sync<bool>([&](auto done) { store_->put_acl({"a", "b", std::string("c\0d", 3)}, done); }));
}

}  // namespace
}  // namespace txmq::storage::test
