// txmq::cluster::etcd_client against a real etcd 3.4 (Debian's etcd-server, started here):
// range, put, delete, txn compares, leases, a watch that resumes from a revision, endpoint
// failover. Label `cluster`.

#include <gtest/gtest.h>

#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "broker_process.h"
#include "cluster_support.h"
#include "etcd_process.h"
#include "txmq/cluster/errc.h"
#include "txmq/cluster/etcd_client.h"

namespace txmq::cluster {
namespace {
namespace asio = boost::asio;
using test::run;

class etcd_client_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
    etcd_.start();
    client_ = std::make_unique<etcd_client>(io_.get_executor(), options());
  }
  etcd_options options() const {
    return etcd_options{{common::host_port{"127.0.0.1", etcd_.client_port()}}, std::chrono::milliseconds(2000)};
  }
  test::etcd_process etcd_;
  asio::io_context io_;
  std::unique_ptr<etcd_client> client_;
};

TEST_F(etcd_client_test, put_range_and_delete_round_trip_bytes) {
  const std::string binary_key("/t/k\0\xff", 6);
  auto& c = *client_;
  const auto rev1 = run(io_, c.put(binary_key, std::string("v\0a", 3)));
  ASSERT_TRUE(rev1) << rev1.error();
  ASSERT_TRUE(run(io_, c.put("/t/b", "2")));
  ASSERT_TRUE(run(io_, c.put("/u/x", "3")));
  const auto one = run(io_, c.range(binary_key));
  ASSERT_TRUE(one) << one.error();
  ASSERT_EQ(one.value().kvs.size(), 1u);
  EXPECT_EQ(one.value().kvs[0].key, binary_key);
  EXPECT_EQ(one.value().kvs[0].value, std::string("v\0a", 3));
  EXPECT_EQ(one.value().kvs[0].create_revision, rev1.value());
  EXPECT_EQ(one.value().kvs[0].version, 1);
  const auto prefix = run(io_, c.range("/t/", prefix_end("/t/")));
  ASSERT_TRUE(prefix);
  ASSERT_EQ(prefix.value().kvs.size(), 2u);
  EXPECT_EQ(prefix.value().kvs[0].key, "/t/b");  // sorted by key
  const auto deleted = run(io_, c.remove("/t/", prefix_end("/t/")));
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted.value(), 2);
  EXPECT_TRUE(run(io_, c.range("/t/", prefix_end("/t/"))).value().kvs.empty());
  EXPECT_EQ(run(io_, c.range("/u/x")).value().kvs.size(), 1u);
}

TEST_F(etcd_client_test, txn_compares_decide_the_branch) {
  auto& c = *client_;
  txn_request create;
  create.compares.push_back({"/k", compare_target::create_revision, compare_result::equal, 0, {}});
  create.success.push_back(op_put{"/k", "first", 0});
  create.failure.push_back(op_range{"/k", {}});
  const auto first = run(io_, c.txn(create));
  ASSERT_TRUE(first) << first.error();
  EXPECT_TRUE(first.value().succeeded);
  create.success = {op_put{"/k", "second", 0}};
  const auto second = run(io_, c.txn(create));
  ASSERT_TRUE(second);
  EXPECT_FALSE(second.value().succeeded);
  ASSERT_EQ(second.value().ranges.size(), 1u);
  EXPECT_EQ(second.value().ranges[0].kvs.at(0).value, "first");
  const auto mod = second.value().ranges[0].kvs[0].mod_revision;

  // mod_revision: a write based on what was read goes through once; the stale one fails.
  txn_request cas;
  cas.compares.push_back({"/k", compare_target::mod_revision, compare_result::equal, mod, {}});
  cas.success.push_back(op_put{"/k", "cas-1", 0});
  ASSERT_TRUE(run(io_, c.txn(cas)).value().succeeded);
  cas.success = {op_put{"/k", "cas-2", 0}};
  EXPECT_FALSE(run(io_, c.txn(cas)).value().succeeded);
  // version and value.
  txn_request ver;
  ver.compares.push_back({"/k", compare_target::version, compare_result::equal, 2, {}});
  ver.compares.push_back({"/k", compare_target::value, compare_result::equal, 0, "cas-1"});
  ver.success.push_back(op_delete{"/k", {}});
  ASSERT_TRUE(run(io_, c.txn(ver)).value().succeeded);
  EXPECT_TRUE(run(io_, c.range("/k")).value().kvs.empty());
}

TEST_F(etcd_client_test, a_lease_keeps_its_keys_until_revoked) {
  auto& c = *client_;
  const auto lease = run(io_, c.lease_grant(std::chrono::seconds(30)));
  ASSERT_TRUE(lease) << lease.error();
  EXPECT_EQ(lease.value().ttl, std::chrono::seconds(30));
  ASSERT_TRUE(run(io_, c.put("/leased", "x", lease.value().id)));
  EXPECT_EQ(run(io_, c.range("/leased")).value().kvs.at(0).lease, lease.value().id);
  const auto kept = run(io_, c.lease_keepalive(lease.value().id));
  ASSERT_TRUE(kept) << kept.error();
  EXPECT_EQ(kept.value(), std::chrono::seconds(30));
  ASSERT_TRUE(run(io_, c.lease_revoke(lease.value().id)));
  EXPECT_TRUE(run(io_, c.range("/leased")).value().kvs.empty());
  const auto gone = run(io_, c.lease_keepalive(lease.value().id));
  ASSERT_FALSE(gone);
  EXPECT_TRUE(gone.error().is(errc::lease_not_found)) << gone.error();
  EXPECT_TRUE(run(io_, c.lease_revoke(lease.value().id)));  // revoking a gone lease is fine
  const auto bad_put = run(io_, c.put("/leased", "x", lease.value().id));
  ASSERT_FALSE(bad_put);
  EXPECT_TRUE(bad_put.error().is(errc::lease_not_found)) << bad_put.error();
}

// Watches the prefix until `want` events arrived, writing `writes` meanwhile; returns the
// events and the revision to resume from.
asio::awaitable<std::pair<std::vector<watch_event>, std::int64_t>> watch_for(
    etcd_client& c, std::int64_t from, std::size_t want, std::vector<std::pair<std::string, std::string>> writes) {
  auto ex = co_await asio::this_coro::executor;
  // From the next revision rather than "now": the writes below may reach etcd before the watch
  // is created, and must be seen all the same.
  if (from == 0) from = (co_await c.range("/w/")).value().revision + 1;
  std::vector<watch_event> seen;
  std::int64_t next = 0;
  auto stop = std::make_shared<watch_stop>();
  bool ended = false;
  asio::co_spawn(ex, [&]() -> asio::awaitable<void> {
    (void)co_await c.watch("/w/", prefix_end("/w/"), from,
                           [&](const std::vector<watch_event>& events) { seen.insert(seen.end(), events.begin(), events.end()); },
                           next, stop);
    ended = true;
  }, asio::detached);
  asio::steady_timer t(ex);
  for (const auto& [k, v] : writes) {
    if (v.empty()) (void)co_await c.remove(k);
    else (void)co_await c.put(k, v);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (seen.size() < want && std::chrono::steady_clock::now() < until) {
    t.expires_after(std::chrono::milliseconds(10));
    co_await t.async_wait(asio::use_awaitable);
  }
  stop->stop();
  while (!ended) {
    t.expires_after(std::chrono::milliseconds(10));
    co_await t.async_wait(asio::use_awaitable);
  }
  co_return std::pair{seen, next};
}

TEST_F(etcd_client_test, a_watch_streams_changes_and_resumes_from_a_revision) {
  auto& c = *client_;
  auto [first, next] = run(io_, watch_for(c, 0, 3, {{"/w/a", "1"}, {"/w/b", "2"}, {"/w/a", ""}}));
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].kv.key, "/w/a");
  EXPECT_EQ(first[0].kv.value, "1");
  EXPECT_EQ(first[1].kv.key, "/w/b");
  EXPECT_EQ(first[2].type, watch_event::kind::del);
  EXPECT_EQ(next, first[2].kv.mod_revision + 1);
  // Written while nobody watched: a watch resumed from `next` gets exactly those.
  ASSERT_TRUE(run(io_, c.put("/w/c", "3")));
  ASSERT_TRUE(run(io_, c.put("/other", "x")));
  ASSERT_TRUE(run(io_, c.put("/w/d", "4")));
  auto [resumed, after] = run(io_, watch_for(c, next, 2, {}));
  ASSERT_EQ(resumed.size(), 2u);
  EXPECT_EQ(resumed[0].kv.key, "/w/c");
  EXPECT_EQ(resumed[1].kv.key, "/w/d");
  EXPECT_GT(after, next);
}

TEST_F(etcd_client_test, a_dead_endpoint_is_skipped_and_none_alive_is_etcd_unavailable) {
  auto opts = options();
  const common::host_port dead{"127.0.0.1", test::free_port()};
  opts.endpoints.insert(opts.endpoints.begin(), dead);
  etcd_client two(io_.get_executor(), opts);
  const auto r = run(io_, two.put("/failover", "ok"));
  ASSERT_TRUE(r) << r.error();
  etcd_client none(io_.get_executor(), etcd_options{{dead}, std::chrono::milliseconds(500)});
  const auto t0 = std::chrono::steady_clock::now();
  const auto down = run(io_, none.range("/failover"));
  ASSERT_FALSE(down);
  EXPECT_TRUE(down.error().is(errc::etcd_unavailable)) << down.error();
  EXPECT_TRUE(down.error().retriable());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
}

}  // namespace
}  // namespace txmq::cluster
