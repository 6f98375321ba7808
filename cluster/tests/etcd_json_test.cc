// The gateway's JSON both ways, against answers captured from etcd 3.4.23 (Debian's
// etcd-server): 64-bit numbers as strings, zero fields left out, base64 keys and values.

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include "etcd_json.h"
#include "txmq/cluster/errc.h"

namespace txmq::cluster {
namespace {
using namespace detail;
namespace json = boost::json;

json::object obj(std::string_view text) { return parse_object(text).value(); }

TEST(etcd_json, prefix_end_is_the_next_key_after_every_key_with_the_prefix) {
  EXPECT_EQ(prefix_end("/txmq/"), "/txmq0");
  EXPECT_EQ(prefix_end("a\xff"), "b");
  EXPECT_EQ(prefix_end(std::string("\xff\xff")), std::string(1, '\0'));
}

TEST(etcd_json, put_and_range_bodies_carry_base64_keys_and_string_numbers) {
  const auto put = json::parse(encode_put("a", "b", 42)).as_object();
  EXPECT_EQ(put.at("key").as_string(), "YQ==");
  EXPECT_EQ(put.at("value").as_string(), "Yg==");
  EXPECT_EQ(put.at("lease").as_string(), "42");
  const auto range = json::parse(encode_range("/t/", prefix_end("/t/"))).as_object();
  EXPECT_EQ(range.at("key").as_string(), "L3Qv");
  EXPECT_EQ(range.at("range_end").as_string(), "L3Qw");  // "/t0"
  EXPECT_FALSE(json::parse(encode_range("k", "")).as_object().contains("range_end"));
}

TEST(etcd_json, txn_body_names_targets_and_results_as_etcd_does) {
  txn_request req;
  req.compares.push_back({"k", compare_target::create_revision, compare_result::equal, 0, {}});
  req.compares.push_back({"k", compare_target::mod_revision, compare_result::less, 7, {}});
  req.compares.push_back({"k", compare_target::value, compare_result::not_equal, 0, "v"});
  req.success.push_back(op_put{"k", "v", 3});
  req.failure.push_back(op_range{"k", {}});
  req.failure.push_back(op_delete{"k", "l"});
  const auto o = json::parse(encode_txn(req)).as_object();
  const auto& c = o.at("compare").as_array();
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].at("target").as_string(), "CREATE");
  EXPECT_EQ(c[0].at("create_revision").as_string(), "0");
  EXPECT_EQ(c[1].at("target").as_string(), "MOD");
  EXPECT_EQ(c[1].at("result").as_string(), "LESS");
  EXPECT_EQ(c[1].at("mod_revision").as_string(), "7");
  EXPECT_EQ(c[2].at("target").as_string(), "VALUE");
  EXPECT_EQ(c[2].at("value").as_string(), "dg==");
  EXPECT_TRUE(o.at("success").as_array()[0].as_object().contains("request_put"));
  EXPECT_TRUE(o.at("failure").as_array()[0].as_object().contains("request_range"));
  EXPECT_TRUE(o.at("failure").as_array()[1].as_object().contains("request_delete_range"));
}

TEST(etcd_json, decodes_a_range_answer) {
  const auto r = decode_range(obj(
      R"({"header":{"cluster_id":"1","member_id":"2","revision":"9","raft_term":"2"},)"
      R"("kvs":[{"key":"YQ==","create_revision":"2","mod_revision":"5","version":"3","value":"Yg==","lease":"77"},)"
      R"({"key":"Yw==","create_revision":"4","mod_revision":"4","version":"1"}],"count":"2"})"));
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r.value().revision, 9);
  ASSERT_EQ(r.value().kvs.size(), 2u);
  EXPECT_EQ(r.value().kvs[0].key, "a");
  EXPECT_EQ(r.value().kvs[0].value, "b");
  EXPECT_EQ(r.value().kvs[0].create_revision, 2);
  EXPECT_EQ(r.value().kvs[0].mod_revision, 5);
  EXPECT_EQ(r.value().kvs[0].version, 3);
  EXPECT_EQ(r.value().kvs[0].lease, 77);
  EXPECT_EQ(r.value().kvs[1].value, "");  // an empty value is left out
  EXPECT_EQ(r.value().kvs[1].lease, 0);
}

TEST(etcd_json, decodes_txn_answers_both_ways) {
  const auto ok = decode_txn(obj(R"({"header":{"revision":"2"},"succeeded":true,)"
                                 R"("responses":[{"response_put":{"header":{"revision":"2"}}}]})"));
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok.value().succeeded);
  EXPECT_EQ(ok.value().revision, 2);
  EXPECT_TRUE(ok.value().ranges.empty());
  // A failed compare: "succeeded" is left out.
  const auto failed = decode_txn(obj(
      R"({"header":{"revision":"2"},"responses":[{"response_range":{"header":{"revision":"2"},)"
      R"("kvs":[{"key":"YQ==","create_revision":"2","mod_revision":"2","version":"1","value":"Yg=="}],"count":"1"}}]})"));
  ASSERT_TRUE(failed);
  EXPECT_FALSE(failed.value().succeeded);
  ASSERT_EQ(failed.value().ranges.size(), 1u);
  EXPECT_EQ(failed.value().ranges[0].kvs[0].key, "a");
}

TEST(etcd_json, decodes_leases_and_a_keepalive_on_a_lost_lease) {
  const auto g = decode_lease_grant(obj(R"({"header":{"revision":"1"},"ID":"2324035631367266566","TTL":"5"})"));
  ASSERT_TRUE(g);
  EXPECT_EQ(g.value().id, 2324035631367266566);
  EXPECT_EQ(g.value().ttl, std::chrono::seconds(5));
  const auto alive = decode_keepalive(obj(R"({"result":{"header":{"revision":"1"},"ID":"5","TTL":"5"}})"));
  ASSERT_TRUE(alive);
  EXPECT_EQ(alive.value(), std::chrono::seconds(5));
  // etcd answers a keep-alive of an unknown lease with no TTL.
  const auto gone = decode_keepalive(obj(R"({"result":{"header":{"revision":"1"},"ID":"999"}})"));
  ASSERT_FALSE(gone);
  EXPECT_TRUE(gone.error().is(errc::lease_not_found));
}

TEST(etcd_json, decodes_watch_messages) {
  const auto created = decode_watch_message(obj(R"({"result":{"header":{"revision":"2"},"created":true}})"));
  ASSERT_TRUE(created);
  EXPECT_TRUE(created.value().created);
  EXPECT_EQ(created.value().revision, 2);
  const auto events = decode_watch_message(obj(
      R"({"result":{"header":{"revision":"3"},"events":[{"kv":{"key":"YQ==","create_revision":"2",)"
      R"("mod_revision":"2","version":"1","value":"Yg=="}},{"type":"DELETE","kv":{"key":"YQ==","mod_revision":"3"}}]}})"));
  ASSERT_TRUE(events);
  ASSERT_EQ(events.value().events.size(), 2u);
  EXPECT_EQ(events.value().events[0].type, watch_event::kind::put);
  EXPECT_EQ(events.value().events[0].kv.value, "b");
  EXPECT_EQ(events.value().events[1].type, watch_event::kind::del);
  EXPECT_EQ(events.value().events[1].kv.mod_revision, 3);
  const auto compacted = decode_watch_message(
      obj(R"({"result":{"header":{"revision":"9"},"canceled":true,"compact_revision":"5"}})"));
  ASSERT_TRUE(compacted);
  EXPECT_EQ(compacted.value().compact_revision, 5);
}

TEST(etcd_json, errors_keep_etcds_text_and_classify_lost_leases) {
  const auto lease = decode_error(
      404, R"({"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5})");
  EXPECT_TRUE(lease.is(errc::lease_not_found));
  const auto other = decode_error(400, R"({"error":"x","message":"etcdserver: key is not provided","code":3})");
  EXPECT_TRUE(other.is(errc::etcd_error));
  EXPECT_NE(other.message.find("key is not provided"), std::string::npos);
  const auto unavailable = decode_error(503, R"({"error":"x","message":"etcdserver: no leader","code":14})");
  EXPECT_TRUE(unavailable.retriable());
  EXPECT_TRUE(decode_error(502, "<html>").is(errc::etcd_error));
  EXPECT_FALSE(parse_object("[1]"));
  EXPECT_FALSE(get_int64(obj(R"({"n":"12x"})"), "n"));
}

TEST(etcd_json, endpoints_parse_from_urls_and_refuse_https) {
  const auto eps = parse_etcd_endpoints("http://127.0.0.1:2379, 10.0.0.2:2380/");
  ASSERT_TRUE(eps) << eps.error();
  ASSERT_EQ(eps.value().size(), 2u);
  EXPECT_EQ(eps.value()[1].to_string(), "10.0.0.2:2380");
  EXPECT_FALSE(parse_etcd_endpoints("https://127.0.0.1:2379"));
  EXPECT_FALSE(parse_etcd_endpoints(""));
  EXPECT_FALSE(parse_etcd_endpoints("http://127.0.0.1"));
}

}  // namespace
}  // namespace txmq::cluster
