// A client notices a link that went silent right after an answer (client/, dead_link_timeout):
// a sent request times out while the broker was heard less than dead_link_timeout ago, and
// nothing comes after. The first check (silence >= dead_link_timeout when a request times out)
// says "not yet"; the client looks again when the silence reaches dead_link_timeout and ends
// the session then. Before that second look the session stayed up until another request timed
// out, and with no such request, for good.
//
// Deterministic: request A, a long poll of 2 s, is sent first; request B, a long poll of
// 500 ms, after it; once B is answered the proxy drops everything the broker sends. A times out
// (2.2 s) ~1.7 s after B's answer, less than dead_link_timeout (2 s), so only the second look
// can end the session.

#include <atomic>
#include <future>

#include <gtest/gtest.h>

#include "broker_process.h"
#include "eventually.h"
#include "tcp_proxy.h"
#include "txmq/client/connection.h"
#include "txmq/producer/producer.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;

v1::Frame fetch(std::chrono::milliseconds wait) {
  v1::Frame f;
  auto* r = f.mutable_fetch();
  r->set_group("g");
  r->add_topics("t");
  r->set_max_messages(10);
  r->set_max_wait_ms(static_cast<std::uint32_t>(wait.count()));
  return f;
}

TEST(client_dead_link, a_link_silent_after_a_late_answer_is_ended_once_the_silence_reaches_dead_link_timeout) {
  broker_process broker;
  broker.start();
  {
    producer::producer_options po;
    po.connection.address = broker.address();
    producer::producer p(po);
    ASSERT_TRUE(p.send({"t", std::nullopt, {}, "one", std::nullopt, std::nullopt}));
  }
  tcp_proxy proxy("127.0.0.1", broker.port());
  client::connection_options o;
  o.address = proxy.address();
  o.dead_link_timeout = 2s;
  o.request_timeout = 2s;
  auto conn = client::connection::connect(o);
  ASSERT_TRUE(conn) << conn.error().to_string();
  auto& c = *conn.value();
  // The group's one message goes out now, so that the next fetch finds nothing and waits.
  ASSERT_TRUE(c.request(fetch(0ms)));

  // The times leave a loaded machine room: the link must be cut after B's answer and before A's
  // (1.5 s), and A's timeout (2.2 s) comes 0.3 s before the silence reaches dead_link_timeout.
  std::promise<client::result<v1::Frame>> a;
  std::atomic<std::uint64_t> connects_at_a_timeout{0};
  c.async_request(fetch(2000ms), [&](client::result<v1::Frame> r) {
    connects_at_a_timeout = c.connects();  // on the connection's thread, before any later timer of it
    a.set_value(std::move(r));
  }, 2200ms);
  // B waits 500 ms for nothing and is answered empty: the broker is heard ~500 ms after A left.
  auto b = c.request(fetch(500ms));
  ASSERT_TRUE(b) << b.error().to_string();
  ASSERT_GT(proxy.half_open(tcp_proxy::direction::to_client), 0u);  // A's answer is dropped

  auto r = a.get_future().get();
  ASSERT_FALSE(r);
  EXPECT_TRUE(r.error().is(client::errc::timeout)) << r.error().to_string();
  EXPECT_EQ(connects_at_a_timeout.load(), 1u) << "A timed out less than dead_link_timeout after B's answer: not yet a dead link";
  // No other request: only the second look at dead_link_timeout of silence ends the session.
  EXPECT_TRUE(eventually([&] { return c.connects() >= 2; }, 5s)) << "the silent link was never ended";
  EXPECT_TRUE(c.request(fetch(0ms))) << "the new session serves requests";
  EXPECT_EQ(broker.stop(), 0) << broker.log();
}

}  // namespace
}  // namespace txmq::test
