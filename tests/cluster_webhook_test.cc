// Webhooks in a cluster (docs/cluster.md "Webhooks"): etcd, three brokers, a replicas-3 topic,
// a local HTTP receiver, a subscription made through node 1 (listed by every node), a keyed
// produce stream, and node 1 — a partition leader and the node the subscription was made on —
// SIGKILLed mid-stream. Every acknowledged message is delivered at least once, signed with the
// subscription's secret; followers deliver nothing (few duplicates, only around the kill: a
// follower delivering would send nearly every message two or three times).
//
// On main the subscription exists on node 1 only (its record is per broker): the other nodes
// list nothing, and after node 1's kill nothing more is delivered.

#include <signal.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <iostream>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "cluster_brokers.h"
#include "eventually.h"
#include "txmq/client/cluster_admin.h"
#include "txmq/common/base64.h"
#include "txmq/protocol/message_id.h"
#include "txmq/producer/producer.h"
#include "webhook_receiver.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;
using std::chrono::milliseconds;

const std::string k_topic = "events";

std::string hmac_b64(const std::string& key, const std::string& content) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(content.data()),
       content.size(), out, &len);
  return common::base64_encode(std::string_view(reinterpret_cast<const char*>(out), len));
}

// The exhausted (given-up) count a node lists for webhook `id`; -1 when it cannot say.
long exhausted_on(const std::string& address, const std::string& id) {
  auto c = connect_to(address, 5s);
  if (!c) return -1;
  v1::Frame f;
  f.mutable_webhook_list();
  auto r = c->request(std::move(f), 5000ms);
  if (!r) return -1;
  for (const auto& w : r.value().webhook_list_response().webhooks()) {
    if (w.id() == id) return static_cast<long>(w.exhausted());
  }
  return -1;
}

// The webhooks a node lists (ids).
std::set<std::string> listed(const std::string& address) {
  std::set<std::string> out;
  auto c = connect_to(address, 5s);
  if (!c) return out;
  v1::Frame f;
  f.mutable_webhook_list();
  auto r = c->request(std::move(f), 5000ms);
  if (!r) return out;
  for (const auto& w : r.value().webhook_list_response().webhooks()) out.insert(w.id());
  return out;
}

TEST(cluster_webhook_test, a_subscription_made_on_one_node_delivers_everything_across_a_leader_kill) {
  if (!etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
  receiver rx([](const seen&, std::size_t) { return reply{}; });
  // A second endpoint that always fails: every message is given up after 2 attempts.
  receiver failing([](const seen&, std::size_t) { return reply{500, {}, false}; });
  cluster_brokers cluster;
  cluster.start({"--node-lease-ttl", "3s", "--replica-lag-max", "4s", "--webhook-allow-private", "--webhook-timeout",
                 "2s"});
  std::string why;
  ASSERT_TRUE(cluster.create_topic(k_topic, 3, 3, why)) << why;
  // Node 1 must lead a partition (it is killed as a leader); the topic spreads leaders.
  bool node1_leads = false;
  for (std::int32_t p = 0; p < 3; ++p) {
    auto v = cluster.view(k_topic, p);
    node1_leads = node1_leads || (v && v->leader == 1);
  }
  ASSERT_TRUE(node1_leads) << "node 1 leads no partition of the topic";

  auto c1 = connect_to(cluster.broker(1).address());
  ASSERT_TRUE(c1);
  v1::Frame create;
  create.mutable_webhook_create()->mutable_webhook()->set_topic(k_topic);
  create.mutable_webhook_create()->mutable_webhook()->set_url(rx.url());
  create.mutable_webhook_create()->set_from_earliest(true);
  // Node 1 knows the topic once it holds its partitions (a follower makes them from its
  // leader's first answer): UNKNOWN_TOPIC until then.
  client::result<v1::Frame> made = client::result<v1::Frame>(v1::Frame{});
  std::string last_error;
  ASSERT_TRUE(eventually([&] {
    made = c1->request(v1::Frame(create), 10000ms);
    if (!made) last_error = made.error().to_string();
    return made.has_value();
  }, 10s)) << last_error;
  const std::string id = made.value().webhook().id();
  const std::string secret = made.value().webhook().secrets(0).secret();
  ASSERT_FALSE(id.empty());
  v1::Frame create_failing;
  create_failing.mutable_webhook_create()->mutable_webhook()->set_topic(k_topic);
  create_failing.mutable_webhook_create()->mutable_webhook()->set_url(failing.url());
  create_failing.mutable_webhook_create()->mutable_webhook()->add_schedule_ms(100);
  create_failing.mutable_webhook_create()->set_from_earliest(true);
  auto made_failing = c1->request(std::move(create_failing), 10000ms);
  ASSERT_TRUE(made_failing) << made_failing.error().to_string();
  const std::string failing_id = made_failing.value().webhook().id();
  for (int n = 1; n <= 3; ++n) {
    ASSERT_TRUE(eventually([&] { return listed(cluster.broker(n).address()).contains(failing_id); }, 5s))
        << "node " << n << " does not list the failing subscription\n" << cluster.logs();
    ASSERT_TRUE(eventually([&] { return listed(cluster.broker(n).address()).contains(id); }, 5s))
        << "node " << n << " does not list the subscription\n" << cluster.logs();
  }

  // A keyed stream over 24 keys; node 1 is SIGKILLed after 150 acknowledgements.
  producer::producer_options o;
  o.connection.address = cluster.bootstrap();
  o.connection.connect_timeout = 2000ms;
  o.delivery_timeout = 40000ms;
  o.linger = 1ms;
  producer::producer prod(o);
  std::mutex mu;
  std::set<std::string> acked;
  std::atomic<int> outcomes{0};
  const int total = 450;
  for (int i = 0; i < total; ++i) {
    producer::outgoing_message m;
    m.topic = k_topic;
    m.key = "k" + std::to_string(i % 24);
    m.body = "m" + std::to_string(i);
    m.id = protocol::uuid::make_v7();
    const std::string body = m.body;
    prod.async_send(std::move(m), [&, body](client::result<producer::send_result> r) {
      if (r) {
        std::lock_guard lk(mu);
        acked.insert(body);
      }
      ++outcomes;
    });
    if (i == 150) {
      ASSERT_TRUE(eventually([&] {
        std::lock_guard lk(mu);
        return acked.size() >= 150;
      }, 30s));
      cluster.broker(1).kill();
    }
    if (i > 150 && i % 50 == 0) std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(eventually([&] { return outcomes.load() == total; }, 60s)) << cluster.logs();
  (void)prod.flush(std::chrono::seconds(10));
  std::set<std::string> want;
  {
    std::lock_guard lk(mu);
    want = acked;
  }
  EXPECT_GE(want.size(), static_cast<std::size_t>(total * 9 / 10)) << cluster.logs();
  // Every acknowledged message delivered (at least once), by the surviving leaders.
  auto delivered = [&] {
    std::set<std::string> got;
    for (const auto& s : rx.requests()) got.insert(s.body);
    return got;
  };
  const bool all = eventually([&] {
    auto got = delivered();
    for (const auto& b : want) {
      if (!got.contains(b)) return false;
    }
    return true;
  }, 60s);
  std::size_t missing = 0;
  {
    auto got = delivered();
    for (const auto& b : want) missing += got.contains(b) ? 0 : 1;
  }
  EXPECT_TRUE(all) << missing << " of " << want.size() << " acknowledged messages never delivered\n" << cluster.logs();
  // Signed with the subscription's secret; few duplicates.
  auto key = common::base64_decode(secret.substr(6));
  ASSERT_TRUE(key);
  std::map<std::string, int> times;
  std::size_t bad_signatures = 0;
  for (const auto& s : rx.requests()) {
    ++times[s.body];
    const std::string expected = "v1," + hmac_b64(key.value(), s.id + "." + s.timestamp + "." + s.body);
    if (s.signature.find(expected) == std::string::npos) ++bad_signatures;
  }
  std::size_t duplicated = 0;
  for (const auto& [b, n] : times) duplicated += n > 1 ? 1 : 0;
  EXPECT_EQ(bad_signatures, 0u);
  // A follower delivering would send almost every message 2-3 times; a failover redelivers
  // only what was in flight on the killed leader.
  EXPECT_LE(duplicated, want.size() / 5) << duplicated << " messages delivered more than once";
  // Given-up records (the delivery group's dead letters, replicated with each partition) are
  // queryable from the surviving nodes: every acknowledged message once (more only if a
  // message was both acknowledged and then produced again: never here).
  for (int n = 2; n <= 3; ++n) {
    long last = -1;
    EXPECT_TRUE(eventually([&] {
      last = exhausted_on(cluster.broker(n).address(), failing_id);
      return last >= static_cast<long>(want.size());
    }, 60s)) << "node " << n << " lists " << last << " given-up messages of " << want.size() << "\n" << cluster.logs();
  }
  // The attempt log after the failover (docs/cluster.md "Webhooks"): each node logged its own
  // attempts, so node 1's (the killed leader's, from before the kill) are on its disk. With
  // node 1 back, the query through node 2 (client::webhook_attempts_all, the CLI's path) merges
  // every node's log: every message the receiver got has an attempt in it, except those whose
  // attempt node 1 had not written yet when it was killed (the log is written after the
  // delivery, batched per io-loop turn: a few at most). Node 2's own log alone lacks node 1's.
  cluster.broker(1).start();
  std::set<std::string> received;
  for (const auto& r : rx.requests()) received.insert(r.id);
  auto ids_of = [](const std::vector<v1::WebhookAttempt>& attempts) {
    std::set<std::string> out;
    for (const auto& a : attempts) out.insert(protocol::uuid::from_bytes(a.message_id()).value().to_string());
    return out;
  };
  std::set<std::string> merged_ids;
  std::size_t not_logged = received.size();
  EXPECT_TRUE(eventually([&] {
    auto log = client::webhook_attempts_all(connect_to(cluster.broker(2).address()), id, "", 100'000);
    if (!log || !log.value().unanswered.empty()) return false;
    merged_ids = ids_of(log.value().attempts);
    not_logged = 0;
    for (const auto& r : received) not_logged += merged_ids.contains(r) ? 0 : 1;
    return not_logged <= 10;
  }, 30s)) << not_logged << " of " << received.size() << " received messages without an attempt in the merged log\n"
           << cluster.logs();
  std::size_t node2_only = 0;
  {
    auto c2 = connect_to(cluster.broker(2).address());
    ASSERT_TRUE(c2);
    v1::Frame f;
    f.mutable_webhook_attempts()->set_id(id);
    std::string after;
    std::vector<v1::WebhookAttempt> own;
    for (;;) {
      f.mutable_webhook_attempts()->set_after(after);
      auto r = c2->request(v1::Frame(f), 5000ms);
      ASSERT_TRUE(r) << r.error().to_string();
      for (const auto& a : r.value().webhook_attempts_response().attempts()) own.push_back(a);
      after = r.value().webhook_attempts_response().next_after();
      if (after.empty() || r.value().webhook_attempts_response().attempts_size() == 0) break;
    }
    node2_only = ids_of(own).size();
  }
  EXPECT_LT(node2_only, merged_ids.size()) << "node 2's own log already held every attempt: the test cannot tell";
  std::cout << "CLUSTER-FIGURES webhooks: " << want.size() << " acknowledged, " << rx.requests().size()
            << " deliveries, " << duplicated << " messages delivered more than once, " << missing << " missing; "
            << "attempt log: " << merged_ids.size() << " messages merged from every node, " << node2_only
            << " in node 2's own, " << not_logged << " received without a logged attempt\n";
}

// The disabled flag and the subscriptions a node lists: id → disabled; absent when not listed.
std::map<std::string, bool> disabled_on(const std::string& address) {
  std::map<std::string, bool> out;
  auto c = connect_to(address, 5s);
  if (!c) return out;
  v1::Frame f;
  f.mutable_webhook_list();
  auto r = c->request(std::move(f), 5000ms);
  if (!r) return out;
  for (const auto& w : r.value().webhook_list_response().webhooks()) out[w.id()] = w.disabled();
  return out;
}

// `webhook rotate-secret ID` through the node at `address`: the answer frame (a Webhook or an
// Error), or the transport's error.
client::result<v1::Frame> rotate_on(const std::string& address, const std::string& id) {
  auto c = connect_to(address, 5s);
  if (!c) return client::error(client::errc::not_connected, "cannot reach " + address);
  v1::Frame f;
  f.mutable_webhook_rotate_secret()->set_id(id);
  return c->request(std::move(f), 15000ms);
}

// A 410's disable made durable (docs/cluster.md "Webhooks"): the endpoint answers 410 while
// etcd is SIGKILLed, so the leader that got it cannot write the disable to etcd. It keeps the
// subscription disabled at once and retries the etcd write until etcd is back: then every node
// lists it disabled, and nothing more is sent to the endpoint — no re-enable by a state read
// before the write landed, no delivery by another node. A second, healthy subscription on the
// same topic shows that delivery went on meanwhile.
// Before (best-effort write): the first state read after etcd's return showed the subscription
// enabled, the leader took that, delivered again and got 410 again.
// rotate-secret (DESIGN §5: a disabled subscription stays disabled until an operator acts; a
// secret's rotation is not that): through a node that has not learned the disable while etcd is
// away, it is refused STORE_UNAVAILABLE (before: answered OK from that node's copy, and its
// blind etcd write — had etcd been there — would have enabled the subscription again on every
// node); once etcd holds the disable, a rotation through any node answers the subscription
// disabled, and every node keeps it so.
TEST(cluster_webhook_test, a_410_while_etcd_is_down_disables_the_subscription_on_every_node_once_etcd_returns) {
  if (!etcd_process::available()) GTEST_SKIP() << "no /usr/bin/etcd (scripts/setup.sh installs etcd-server)";
  std::atomic<bool> gone{false};
  receiver rx([&gone](const seen&, std::size_t) { return gone.load() ? reply{410, {}, false} : reply{}; });
  receiver healthy([](const seen&, std::size_t) { return reply{}; });
  cluster_brokers cluster;
  cluster.start({"--node-lease-ttl", "3s", "--replica-lag-max", "4s", "--webhook-allow-private", "--webhook-timeout",
                 "2s"});
  std::string why;
  // One partition: one leader delivers, so the other two nodes learn the disable only from etcd.
  ASSERT_TRUE(cluster.create_topic("gone", 1, 3, why)) << why;
  const int leader = static_cast<int>(cluster.view("gone", 0)->leader);
  auto subscribe = [&](const std::string& url) {
    v1::Frame create;
    create.mutable_webhook_create()->mutable_webhook()->set_topic("gone");
    create.mutable_webhook_create()->mutable_webhook()->set_url(url);
    create.mutable_webhook_create()->mutable_webhook()->add_schedule_ms(200);
    create.mutable_webhook_create()->mutable_webhook()->add_schedule_ms(200);
    create.mutable_webhook_create()->set_from_earliest(true);
    std::string id;
    EXPECT_TRUE(eventually([&] {
      auto c = connect_to(cluster.broker(leader).address());
      if (!c) return false;
      auto made = c->request(v1::Frame(create), 10000ms);
      if (made && made.value().has_webhook()) id = made.value().webhook().id();
      return !id.empty();
    }, 10s)) << cluster.logs();
    return id;
  };
  const std::string id = subscribe(rx.url());
  const std::string healthy_id = subscribe(healthy.url());
  ASSERT_FALSE(id.empty());
  ASSERT_FALSE(healthy_id.empty());
  for (int n = 1; n <= 3; ++n) {
    ASSERT_TRUE(eventually([&] {
      auto l = disabled_on(cluster.broker(n).address());
      return l.contains(id) && l.contains(healthy_id);
    }, 10s)) << "node " << n << " does not list both subscriptions\n" << cluster.logs();
  }

  producer::producer_options o;
  o.connection.address = cluster.bootstrap();
  o.delivery_timeout = 30000ms;
  o.linger = 1ms;
  producer::producer prod(o);
  auto produce = [&](int from, int count) {
    std::atomic<int> ok{0};
    for (int i = from; i < from + count; ++i) {
      producer::outgoing_message m;
      m.topic = "gone";
      m.key = "k" + std::to_string(i % 4);
      m.body = "m" + std::to_string(i);
      prod.async_send(std::move(m), [&ok](client::result<producer::send_result> r) {
        if (r) ++ok;
      });
    }
    EXPECT_TRUE(prod.flush(30s));
    return ok.load();
  };
  auto received_by = [](const receiver& r) {
    std::set<std::string> got;
    for (const auto& s : r.requests()) got.insert(s.body);
    return got;
  };
  ASSERT_EQ(produce(0, 10), 10) << cluster.logs();
  ASSERT_TRUE(eventually([&] { return received_by(rx).size() == 10 && received_by(healthy).size() == 10; }, 20s))
      << cluster.logs();

  // etcd gone; then the endpoint answers 410 to the next messages (the leader keeps leading and
  // acknowledging while etcd is away: docs/cluster.md "etcd unavailable").
  cluster.etcd().kill();
  gone = true;
  ASSERT_EQ(produce(10, 10), 10) << cluster.logs();
  ASSERT_TRUE(eventually([&] { return disabled_on(cluster.broker(leader).address())[id]; }, 20s))
      << "the leader did not disable the subscription on its 410\n" << cluster.logs();
  // Attempts already under way when the first 410 came back may still arrive: wait until the
  // leader has none in flight (the receiver records a request before it answers).
  ASSERT_TRUE(eventually([&] {
    auto c = connect_to(cluster.broker(leader).address(), 5s);
    if (!c) return false;
    v1::Frame f;
    f.mutable_webhook_list();
    auto r = c->request(std::move(f), 5000ms);
    if (!r) return false;
    for (const auto& w : r.value().webhook_list_response().webhooks()) {
      if (w.id() == id) return w.in_flight() == 0;
    }
    return false;
  }, 20s)) << cluster.logs();
  const std::size_t sent = rx.requests().size();
  // A node other than the leader still holds the enabled copy (etcd is away): a rotation there
  // must not be taken from that copy.
  const int other = leader == 1 ? 2 : 1;
  ASSERT_FALSE(disabled_on(cluster.broker(other).address())[id]) << "node " << other << " learned the disable without etcd";
  {
    // (The client turns an Error answer into an error result.)
    auto r = rotate_on(cluster.broker(other).address(), id);
    EXPECT_TRUE(!r && r.error().code == protocol::errc::store_unavailable)
        << "rotate-secret through node " << other << " while etcd is away: "
        << (r ? r.value().DebugString() : r.error().to_string());
  }

  cluster.etcd().start();
  for (int n = 1; n <= 3; ++n) {
    EXPECT_TRUE(eventually([&] {
      auto l = disabled_on(cluster.broker(n).address());
      return l.contains(id) && l[id];
    }, 30s)) << "node " << n << " does not list " << id << " disabled after etcd's return\n" << cluster.logs();
  }
  // A rotation through every node keeps the subscription disabled (each answer says so).
  for (int n = 1; n <= 3; ++n) {
    client::result<v1::Frame> r = client::error(client::errc::not_connected, "not asked");
    EXPECT_TRUE(eventually([&] {
      r = rotate_on(cluster.broker(n).address(), id);
      return r && r.value().has_webhook();
    }, 20s)) << "rotate-secret through node " << n << ": " << (r ? r.value().DebugString() : r.error().to_string());
    if (r && r.value().has_webhook()) {
      EXPECT_TRUE(r.value().webhook().disabled()) << "rotate-secret through node " << n << " enabled it again";
      EXPECT_GE(r.value().webhook().secrets_size(), 2) << "the new secret and the old one in its grace";
    }
  }
  // Delivery goes on for the healthy subscription, and nothing more reaches the gone endpoint.
  ASSERT_EQ(produce(20, 10), 10) << cluster.logs();
  EXPECT_TRUE(eventually([&] { return received_by(healthy).size() == 30; }, 30s))
      << received_by(healthy).size() << " of 30 at the healthy endpoint\n" << cluster.logs();
  for (int n = 1; n <= 3; ++n) {
    EXPECT_TRUE(disabled_on(cluster.broker(n).address())[id]) << "node " << n << " enabled it again";
  }
  EXPECT_EQ(rx.requests().size(), sent) << "requests reached the endpoint after it was disabled\n" << cluster.logs();
  std::cout << "CLUSTER-FIGURES webhooks 410: " << sent - 10 << " attempts answered 410 before the disable, "
            << rx.requests().size() - sent << " after it; disabled on all 3 nodes after etcd's return\n";
}

}  // namespace
}  // namespace txmq::test
