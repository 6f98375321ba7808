// Authentication and authorization end to end (issue #12, DESIGN §7): the real txmq-broker with
// auth = true on loopback sockets.
//
// The matrix: every field of txmq.v1.Frame's `body` oneof, enumerated through the protobuf
// descriptor, must have an entry in k_frames below (a new request type without one fails
// `every_frame_type_has_a_matrix_entry`); each request is sent as {no token, wrong token,
// principal without grants, principal holding exactly the entry's grants, admin} and must be
// refused (NOT_AUTHENTICATED at Hello, NOT_AUTHORIZED naming the permission and resource) or let
// through accordingly. The admin HTTP routes get the same five identities from k_routes.
//
// Then: CheckTx routing across producer groups a/b with two principals, a revoked grant and a
// deleted principal on open connections, the CLI's principal/acl round trips, and tokens kept
// out of the broker's log and of `principal list`. The file is one piece: every test shares the
// auth_broker fixture and the matrix tables, and they read best beside each other.

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>

#include <boost/json.hpp>
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include "cli_runner.h"
#include "fault_support.h"
#include "eventually.h"
#include "raw_client.h"
#include "tx_requests.h"

namespace txmq::test {
namespace {

using namespace std::chrono_literals;

const std::string k_admin_token = "txmq_admin0123456789abcdef0123456789abcdef";

// A broker with auth on; admin.token in its directory.
class auth_broker {
 public:
  explicit auth_broker(std::vector<std::string> extra = {}) : token_file_(write_token()), broker_(args(extra)) {
    broker_.start();
  }
  ~auth_broker() {
    std::error_code ec;
    std::filesystem::remove(token_file_, ec);
  }
  broker_process& process() { return broker_; }
  std::uint16_t port() const { return broker_.port(); }

  // A connection as `token` (empty: none); throws when the Hello is refused.
  std::unique_ptr<raw_client> connect(const std::string& token, const std::string& producer_group = "") {
    auto c = std::make_unique<raw_client>(broker_.port());
    c->hello("auth-test", producer_group, token);
    return c;
  }
  // The answer to a Hello as `token` (HelloOk, or the Error before the close).
  v1::Frame hello(const std::string& token, const std::string& producer_group = "") {
    raw_client c(broker_.port());
    v1::Frame f;
    f.mutable_hello()->set_protocol_version(1);
    f.mutable_hello()->set_client_id("auth-test");
    f.mutable_hello()->set_producer_group(producer_group);
    f.mutable_hello()->set_auth_token(token);
    auto answer = c.request(f);
    if (answer.has_error()) {
      EXPECT_TRUE(c.closed_by_peer()) << "a refused Hello closes the connection";
    }
    return answer;
  }
  raw_client& admin() {
    if (!admin_) admin_ = connect(k_admin_token);
    return *admin_;
  }
  std::string create_principal(const std::string& name) {
    v1::Frame f;
    f.mutable_principal_create()->set_name(name);
    auto r = admin().request(f);
    EXPECT_TRUE(r.has_principal_create_response()) << r.ShortDebugString();
    return r.principal_create_response().token();
  }
  void change(bool grant, const std::string& principal, const std::string& permission, const std::string& resource) {
    v1::Frame f;
    auto* e = grant ? f.mutable_acl_grant()->mutable_entry() : f.mutable_acl_revoke()->mutable_entry();
    e->set_principal(principal);
    e->set_permission(permission);
    e->set_resource(resource);
    auto r = admin().request(f);
    EXPECT_TRUE(r.has_acl_change_response()) << r.ShortDebugString();
  }

 private:
  static std::filesystem::path write_token() {
    static int counter = 0;
    auto path = std::filesystem::temp_directory_path() /
                ("txmq-admin-token-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::ofstream(path) << "  " << k_admin_token << "\n";
    return path;
  }
  std::vector<std::string> args(std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--auth", "--admin-token-file", token_file_.string()});
    return extra;
  }
  std::filesystem::path token_file_;
  broker_process broker_;
  std::unique_ptr<raw_client> admin_;
};

// ---- the matrix table ---------------------------------------------------------------------

struct matrix_context {
  std::string txid_pg;  // a prepared transaction of producer group "pg"
  std::string webhook_id;
};

struct frame_entry {
  std::string field;  // Frame body field name
  bool request = true;
  // The request, and the grants (permission, resource) that let a principal send it.
  std::function<v1::Frame(const matrix_context&)> build;
  std::vector<std::pair<std::string, std::string>> grants;
};

v1::Frame frame_with(const std::function<void(v1::Frame&)>& fill) {
  v1::Frame f;
  fill(f);
  return f;
}

const std::vector<std::pair<std::string, std::string>> k_admin_grant = {{"admin", "cluster"}};

frame_entry admin_request(std::string field, std::function<void(v1::Frame&)> fill) {
  return {std::move(field), true, [fill](const matrix_context&) { return frame_with(fill); }, k_admin_grant};
}
frame_entry response(std::string field) { return {std::move(field), false, nullptr, {}}; }

const std::vector<frame_entry>& frames() {
  static const std::vector<frame_entry> k_frames = {
      response("error"),
      response("hello"),  // its own test: hello_with_a_producer_group_needs_transact
      response("hello_ok"),
      {"produce", true,
       [](const matrix_context&) { return produce_frame("t", {make_message("x")}); },
       {{"produce", "topic:t"}}},
      response("produce_response"),
      {"fetch", true, [](const matrix_context&) { return fetch_frame("g", "t", 1, 0); },
       {{"consume", "group:g"}, {"consume", "topic:t"}}},
      response("fetch_response"),
      {"ack", true,
       [](const matrix_context&) {
         return frame_with([](v1::Frame& f) {
           f.mutable_ack()->set_group("g");
           f.mutable_ack()->add_refs()->set_topic("t");
         });
       },
       {{"consume", "group:g"}, {"consume", "topic:t"}}},
      {"nack", true,
       [](const matrix_context&) {
         return frame_with([](v1::Frame& f) {
           f.mutable_nack()->set_group("g");
           f.mutable_nack()->add_refs()->set_topic("t");
         });
       },
       {{"consume", "group:g*"}, {"consume", "topic:*"}}},
      {"extend", true,
       [](const matrix_context&) {
         return frame_with([](v1::Frame& f) {
           f.mutable_extend()->set_group("g");
           f.mutable_extend()->add_refs()->set_topic("t");
         });
       },
       {{"consume", "group:g"}, {"consume", "topic:t"}}},
      response("delivery_results"),
      admin_request("create_topic", [](v1::Frame& f) { f.mutable_create_topic()->set_name("t"); }),
      response("topic_info"),
      admin_request("list_topics", [](v1::Frame& f) { f.mutable_list_topics(); }),
      response("list_topics_response"),
      admin_request("describe_topic", [](v1::Frame& f) { f.mutable_describe_topic()->set_name("t"); }),
      admin_request("create_group",
                    [](v1::Frame& f) {
                      f.mutable_create_group()->set_group("g");
                      f.mutable_create_group()->set_topic("t");
                    }),
      response("group_info"),
      admin_request("list_groups", [](v1::Frame& f) { f.mutable_list_groups(); }),
      response("list_groups_response"),
      admin_request("describe_group", [](v1::Frame& f) { f.mutable_describe_group()->set_group("g"); }),
      admin_request("dlq_list", [](v1::Frame& f) { f.mutable_dlq_list()->set_group("g"); }),
      response("dlq_list_response"),
      admin_request("dlq_redrive", [](v1::Frame& f) { f.mutable_dlq_redrive()->set_group("g"); }),
      response("dlq_redrive_response"),
      admin_request("alter_topic",
                    [](v1::Frame& f) {
                      f.mutable_alter_topic()->set_name("t");
                      f.mutable_alter_topic()->set_retention_bytes(1 << 20);
                    }),
      {"prepare", true,
       [](const matrix_context&) {
         auto m = make_message("x");
         m.set_topic("t");
         return prepare_frame(new_txid(), "pg", {m});
       },
       {{"transact", "producer-group:pg"}, {"produce", "topic:t"}}},
      response("prepare_response"),
      {"end_tx", true, [](const matrix_context& c) { return end_tx_frame(c.txid_pg, v1::ROLLBACK); },
       {{"transact", "producer-group:p*"}}},
      response("end_tx_response"),
      response("check_tx"),
      response("check_tx_result"),  // its own test: check_tx_goes_only_to_principals_holding_transact
      admin_request("tx_list", [](v1::Frame& f) { f.mutable_tx_list(); }),
      response("tx_list_response"),
      {"tx_show", true,
       [](const matrix_context& c) { return frame_with([&](v1::Frame& f) { f.mutable_tx_show()->set_txid(c.txid_pg); }); },
       k_admin_grant},
      response("tx_info"),
      {"tx_resolve", true, [](const matrix_context& c) { return resolve_frame(c.txid_pg, v1::ROLLBACK); }, k_admin_grant},
      admin_request("webhook_create",
                    [](v1::Frame& f) {
                      f.mutable_webhook_create()->mutable_webhook()->set_topic("t");
                      f.mutable_webhook_create()->mutable_webhook()->set_url("http://127.0.0.1:9/hook");
                    }),
      response("webhook"),
      admin_request("webhook_list", [](v1::Frame& f) { f.mutable_webhook_list(); }),
      response("webhook_list_response"),
      admin_request("webhook_delete", [](v1::Frame& f) { f.mutable_webhook_delete()->set_id("wh_none"); }),
      response("webhook_delete_response"),
      admin_request("webhook_attempts", [](v1::Frame& f) { f.mutable_webhook_attempts()->set_id("wh_none"); }),
      response("webhook_attempts_response"),
      admin_request("webhook_replay", [](v1::Frame& f) { f.mutable_webhook_replay()->set_id("wh_none"); }),
      response("webhook_replay_response"),
      admin_request("webhook_rotate_secret", [](v1::Frame& f) { f.mutable_webhook_rotate_secret()->set_id("wh_none"); }),
      admin_request("connection_list", [](v1::Frame& f) { f.mutable_connection_list(); }),
      response("connection_list_response"),
      // Cluster metadata: any authenticated principal (no grants: it names no data).
      {"metadata", true, [](const matrix_context&) { return frame_with([](v1::Frame& f) { f.mutable_metadata(); }); },
       {}},
      response("metadata_response"),
      // Replication between brokers: only the brokers' own principal (cluster_token_file), which
      // no grant gives and admin does not hold: its own branch in the test below, and
      // cluster_security_test for the brokers themselves.
      admin_request("replica_fetch", [](v1::Frame& f) { f.mutable_replica_fetch()->set_topic("t"); }),
      response("replica_fetch_response"),
      admin_request("principal_create", [](v1::Frame& f) { f.mutable_principal_create()->set_name("made-by-matrix"); }),
      response("principal_create_response"),
      admin_request("principal_list", [](v1::Frame& f) { f.mutable_principal_list(); }),
      response("principal_list_response"),
      admin_request("principal_delete", [](v1::Frame& f) { f.mutable_principal_delete()->set_name("nobody"); }),
      response("principal_delete_response"),
      admin_request("acl_grant",
                    [](v1::Frame& f) {
                      auto* e = f.mutable_acl_grant()->mutable_entry();
                      e->set_principal("nobody");
                      e->set_permission("produce");
                      e->set_resource("topic:t");
                    }),
      admin_request("acl_revoke",
                    [](v1::Frame& f) {
                      auto* e = f.mutable_acl_revoke()->mutable_entry();
                      e->set_principal("nobody");
                      e->set_permission("produce");
                      e->set_resource("topic:t");
                    }),
      response("acl_change_response"),
      admin_request("acl_list", [](v1::Frame& f) { f.mutable_acl_list(); }),
      response("acl_list_response"),
  };
  return k_frames;
}

const frame_entry* entry_for(const std::string& field) {
  for (auto& e : frames()) {
    if (e.field == field) return &e;
  }
  return nullptr;
}

std::vector<const google::protobuf::FieldDescriptor*> oneof_fields() {
  const auto* oneof = v1::Frame::descriptor()->FindOneofByName("body");
  std::vector<const google::protobuf::FieldDescriptor*> out;
  for (int i = 0; i < oneof->field_count(); ++i) out.push_back(oneof->field(i));
  return out;
}

TEST(auth_matrix, every_frame_type_has_a_matrix_entry) {
  std::set<std::string> names;
  for (const auto* f : oneof_fields()) {
    names.insert(f->name());
    EXPECT_NE(entry_for(f->name()), nullptr)
        << "Frame." << f->name() << " has no entry in tests/auth_test.cc frames(): add the request with the grants "
        << "it needs (and its ACL rule in broker/src/auth/request_access.cc)";
  }
  for (auto& e : frames()) EXPECT_TRUE(names.count(e.field)) << e.field << " is not a field of Frame.body";
}

class auth_test : public ::testing::Test {
 protected:
  auth_broker broker_{{"--tx-timeout", "1h"}};
};

TEST_F(auth_test, every_request_type_by_five_identities) {
  matrix_context ctx;
  ctx.txid_pg = new_txid();
  {
    auto m = make_message("x");
    m.set_topic("t");
    prepare(broker_.admin(), ctx.txid_pg, "pg", {m});
  }
  const std::string bare = broker_.create_principal("bare");
  int checked = 0;
  for (const auto* field : oneof_fields()) {
    const auto* e = entry_for(field->name());
    ASSERT_NE(e, nullptr) << field->name();
    if (!e->request) continue;
    SCOPED_TRACE(field->name());
    const v1::Frame request = e->build(ctx);
    ASSERT_EQ(v1::Frame::descriptor()->FindFieldByNumber(static_cast<int>(request.body_case())), field)
        << "the entry builds another request type";
    // No token and a wrong token: refused at Hello, connection closed.
    for (const std::string& token : {std::string(), std::string("txmq_wrong0123456789abcdef0123456789abcd")}) {
      auto hello = broker_.hello(token);
      ASSERT_TRUE(hello.has_error()) << hello.ShortDebugString();
      EXPECT_EQ(hello.error().code(), v1::NOT_AUTHENTICATED);
    }
    if (field->name() == "replica_fetch") {
      // No client may fetch replicas: not one without grants, not one with admin on the
      // cluster, not admin itself (a client posing as a follower would read every message).
      const std::string holder = broker_.create_principal("p-replica_fetch");
      broker_.change(true, "p-replica_fetch", "admin", "cluster");
      for (const std::string* token : {&bare, &holder, &k_admin_token}) {
        auto c = broker_.connect(*token);
        auto answer = c->request(request);
        ASSERT_TRUE(answer.has_error()) << answer.ShortDebugString();
        EXPECT_EQ(answer.error().code(), v1::NOT_AUTHORIZED) << answer.ShortDebugString();
        EXPECT_NE(answer.error().message().find("may not fetch replicas"), std::string::npos)
            << answer.error().message();
      }
      checked++;
      continue;
    }
    if (e->grants.empty()) {
      // Open to every authenticated principal: the one without grants is answered.
      auto c = broker_.connect(bare);
      auto answer = c->request(request);
      EXPECT_FALSE(answer.has_error()) << answer.ShortDebugString();
      checked++;
      continue;
    }
    // A principal without grants: NOT_AUTHORIZED, naming a permission and a resource it lacks.
    {
      auto c = broker_.connect(bare);
      auto answer = c->request(request);
      ASSERT_TRUE(answer.has_error()) << answer.ShortDebugString();
      EXPECT_EQ(answer.error().code(), v1::NOT_AUTHORIZED) << answer.error().message();
      const auto& [perm, resource] = e->grants.front();
      const std::string& text = answer.error().message();
      EXPECT_NE(text.find(" lacks "), std::string::npos) << text;
      bool names_one = false;
      for (auto& [p, r] : e->grants) {
        const std::string concrete = r.ends_with("*") ? r.substr(0, r.find(':') + 1) : r;
        names_one = names_one || (text.find(p + " on " + concrete) != std::string::npos);
      }
      EXPECT_TRUE(names_one) << text << " (expected one of the grants, e.g. " << perm << " on " << resource << ")";
      // Still open: a denial is no protocol violation.
      EXPECT_FALSE(c->closed_by_peer(100ms));
    }
    // A principal holding exactly the entry's grants, then the admin: let through (the handler
    // may still answer UNKNOWN_GROUP and the like).
    const std::string name = "p-" + field->name();
    const std::string granted = broker_.create_principal(name);
    for (auto& [perm, resource] : e->grants) broker_.change(true, name, perm, resource);
    for (const std::string* token : {&granted, &k_admin_token}) {
      auto c = broker_.connect(*token);
      auto answer = c->request(request);
      EXPECT_FALSE(answer.has_error() && (answer.error().code() == v1::NOT_AUTHORIZED ||
                                          answer.error().code() == v1::NOT_AUTHENTICATED))
          << (token == &granted ? name : std::string("admin")) << ": " << answer.ShortDebugString();
    }
    checked++;
  }
  EXPECT_GE(checked, 30);
}


// ---- admin HTTP ---------------------------------------------------------------------------

// The status of GET path with `authorization` (empty: no header).
unsigned http_status(std::uint16_t port, const std::string& path, const std::string& authorization) {
  const std::string answer = http_get(port, path, authorization);
  return answer.size() > 12 ? static_cast<unsigned>(std::stoi(answer.substr(9, 3))) : 0;
}

struct route_entry {
  std::string path;
  // Expected status for: no token, wrong token, principal without grants, the credential that
  // the route accepts (a principal holding `grants`, or for the reconciliation API the
  // subscription's own token), admin.
  std::array<unsigned, 5> expected;
  std::vector<std::pair<std::string, std::string>> grants;  // empty: the webhook's token
};

TEST_F(auth_test, every_admin_http_route_by_five_identities) {
  // A subscription whose token opens the reconciliation API of its topic.
  v1::Frame topic;
  topic.mutable_create_topic()->set_name("t");
  ASSERT_TRUE(broker_.admin().request(topic).has_topic_info());
  v1::Frame create;
  create.mutable_webhook_create()->mutable_webhook()->set_topic("t");
  create.mutable_webhook_create()->mutable_webhook()->set_url("http://127.0.0.1:9/hook");
  auto created = broker_.admin().request(create);
  ASSERT_TRUE(created.has_webhook()) << created.ShortDebugString();
  const std::string webhook_token = created.webhook().token();
  const std::string bare = broker_.create_principal("bare");
  const std::string ops = broker_.create_principal("ops");
  broker_.change(true, "ops", "admin", "cluster");
  const std::vector<route_entry> routes = {
      {"/healthz", {200, 200, 200, 200, 200}, {{"admin", "cluster"}}},
      {"/metrics", {401, 401, 403, 200, 200}, {{"admin", "cluster"}}},
      // The HTTP/JSON API: each route's permission and resource from its route table.
      {"/v1/openapi.json", {200, 200, 200, 200, 200}, {{"admin", "cluster"}}},
      {"/v1/topics", {401, 401, 403, 200, 200}, {{"admin", "cluster"}}},
      {"/v1/transactions", {401, 401, 403, 200, 200}, {{"admin", "cluster"}}},
      // The reconciliation API authenticates by the subscription's token (a capability for
      // one topic), not by principals.
      {"/v1/topics/t/messages", {401, 401, 401, 200, 401}, {}},
      {"/v1/messages/00000000-0000-7000-8000-000000000000", {401, 401, 401, 404, 401}, {}},
  };
  for (auto& r : routes) {
    SCOPED_TRACE(r.path);
    const std::string credential = r.grants.empty() ? webhook_token : ops;
    const std::array<std::string, 5> who = {"", "Bearer txmq_wrong0123456789abcdef0123456789abcd", "Bearer " + bare,
                                            "Bearer " + credential, "Bearer " + k_admin_token};
    for (std::size_t i = 0; i < who.size(); ++i) {
      EXPECT_EQ(http_status(broker_.process().http_port(), r.path, who[i]), r.expected[i])
          << "identity " << i;
    }
  }
  const std::string refused = http_get(broker_.process().http_port(), "/metrics", "");
  EXPECT_NE(refused.find("WWW-Authenticate: Bearer"), std::string::npos) << refused;
  const std::string forbidden = http_get(broker_.process().http_port(), "/metrics", "Bearer " + bare);
  EXPECT_NE(forbidden.find("lacks admin on cluster"), std::string::npos) << forbidden;
  // Denials are counted by permission: the 403s of /metrics, /v1/topics and /v1/transactions above.
  const std::string metrics = http_get(broker_.process().http_port(), "/metrics", "Bearer " + k_admin_token);
  EXPECT_NE(metrics.find("txmq_auth_denials_total{permission=\"admin\"} 4"), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find(bare), std::string::npos);
  EXPECT_EQ(metrics.find(k_admin_token), std::string::npos);
}

// Every operation the broker's own /v1/openapi.json describes (a unit test keeps it equal to the
// API's route table, so a new route is in it) × {no token, wrong token, a principal without
// grants, admin}: nothing but the open document is served without a principal, a principal
// without grants is refused everywhere a principal is checked, and admin is never refused.
TEST_F(auth_test, every_http_api_operation_of_the_openapi_document_is_checked) {
  const auto port = broker_.process().http_port();
  const std::string doc = http_get(port, "/v1/openapi.json", "");
  const auto body = doc.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos) << doc;
  const auto api = boost::json::parse(doc.substr(body + 4)).as_object();
  const std::string bare = broker_.create_principal("bare-http");
  const std::string wrong = "txmq_wrong0123456789abcdef0123456789abcd";
  auto status = [&](const std::string& method, const std::string& path, const std::string& token) {
    std::string cmd = "curl -s -o /dev/null -w '%{http_code}' -X " + method +
                      " -H 'content-type: application/json' --data '{}' ";
    if (method == "GET" || method == "DELETE") {
      cmd = "curl -s -o /dev/null -w '%{http_code}' -X " + method + " ";
    }
    if (!token.empty()) cmd += "-H 'Authorization: Bearer " + token + "' ";
    cmd += "'http://127.0.0.1:" + std::to_string(port) + path + "'";
    return shell_stdout(cmd);
  };
  std::size_t operations = 0;
  for (const auto& [templ, item] : api.at("paths").as_object()) {
    // Path parameters get values that name nothing: the check comes before the lookup.
    std::string path(templ);
    for (std::size_t open; (open = path.find('{')) != std::string::npos;) {
      const auto close = path.find('}', open);
      const std::string name = path.substr(open + 1, close - open - 1);
      path.replace(open, close - open + 1,
                   name == "id" && path.starts_with("/v1/messages") ? "00000000-0000-7000-8000-000000000000"
                   : name == "txid"                                 ? "00000000000000000000000000000001"
                                                                    : "matrix-" + name);
    }
    for (const auto& [verb, op] : item.as_object()) {
      if (verb != "get" && verb != "post" && verb != "delete") continue;
      ++operations;
      std::string method(verb);
      std::transform(method.begin(), method.end(), method.begin(), ::toupper);
      SCOPED_TRACE(method + " " + path);
      const auto* security = op.as_object().if_contains("security");
      const bool open = security != nullptr && security->as_array().empty();
      // The reconciliation API authenticates by a subscription's own token (a capability),
      // so principals' tokens are refused there (401), as no token is.
      const bool webhook_token = method == "GET" && (templ == "/v1/topics/{topic}/messages" || templ == "/v1/messages/{id}");
      if (open) {
        EXPECT_NE(status(method, path, ""), "401");
        continue;
      }
      EXPECT_EQ(status(method, path, ""), "401");
      EXPECT_EQ(status(method, path, wrong), "401");
      EXPECT_EQ(status(method, path, bare), webhook_token ? "401" : "403");
      const std::string admin = status(method, path, k_admin_token);
      if (!webhook_token) {
        EXPECT_NE(admin, "401");
        EXPECT_NE(admin, "403");
      }
    }
  }
  EXPECT_GE(operations, 25u);
}

// ---- Hello, CheckTx routing ----------------------------------------------------------------

TEST_F(auth_test, hello_with_a_producer_group_needs_transact_on_it) {
  const std::string pa = broker_.create_principal("pa");
  broker_.change(true, "pa", "transact", "producer-group:a");
  EXPECT_TRUE(broker_.hello(pa, "a").has_hello_ok());
  auto refused = broker_.hello(pa, "b");
  ASSERT_TRUE(refused.has_error());
  EXPECT_EQ(refused.error().code(), v1::NOT_AUTHORIZED);
  EXPECT_NE(refused.error().message().find("transact on producer-group:b"), std::string::npos)
      << refused.error().message();
}

class auth_tx_test : public ::testing::Test {
 protected:
  // Checks come quickly: a transaction's first check after its tx_timeout_ms, then every 200 ms.
  auth_broker broker_{{"--tx-check-schedule", "200ms", "--tx-check-answer-timeout", "500ms"}};

  std::string prepare_in(const std::string& group) {
    auto m = make_message("x");
    m.set_topic("t");
    auto f = prepare_frame(new_txid(), group, {m});
    f.mutable_prepare()->set_tx_timeout_ms(100);
    auto r = broker_.admin().request(f);
    EXPECT_TRUE(r.has_prepare_response()) << r.ShortDebugString();
    return f.prepare().txid();
  }
};

TEST_F(auth_tx_test, check_tx_goes_only_to_principals_holding_transact_and_end_tx_needs_it) {
  const std::string pa = broker_.create_principal("pa");
  const std::string pb = broker_.create_principal("pb");
  broker_.change(true, "pa", "transact", "producer-group:a");
  broker_.change(true, "pb", "transact", "producer-group:b");
  auto a = broker_.connect(pa, "a");
  auto b = broker_.connect(pb, "b");
  const std::string tx_b = prepare_in("b");
  // pb is asked about its transaction; pa hears nothing of group b.
  auto check = b->receive(10s);
  ASSERT_TRUE(check && check->has_check_tx()) << (check ? check->ShortDebugString() : "nothing");
  EXPECT_EQ(check->check_tx().txid(), tx_b);
  EXPECT_FALSE(a->readable(500ms)) << "a principal of group a received something";
  // pa cannot end b's transaction; pb can.
  auto denied = a->request(end_tx_frame(tx_b, v1::COMMIT));
  ASSERT_TRUE(denied.has_error());
  EXPECT_EQ(denied.error().code(), v1::NOT_AUTHORIZED);
  EXPECT_NE(denied.error().message().find("transact on producer-group:b"), std::string::npos);
  auto ended = b->request(end_tx_frame(tx_b, v1::ROLLBACK));
  EXPECT_TRUE(ended.has_end_tx_response()) << ended.ShortDebugString();
  // And group a's transaction goes to pa.
  const std::string tx_a = prepare_in("a");
  auto check_a = a->receive(10s);
  ASSERT_TRUE(check_a && check_a->has_check_tx());
  EXPECT_EQ(check_a->check_tx().txid(), tx_a);
}

TEST_F(auth_tx_test, a_revoked_transact_stops_the_checks_of_an_open_connection) {
  const std::string pa = broker_.create_principal("pa");
  broker_.change(true, "pa", "transact", "producer-group:a");
  auto a = broker_.connect(pa, "a");
  broker_.change(false, "pa", "transact", "producer-group:a");
  prepare_in("a");
  EXPECT_FALSE(a->readable(1500ms)) << "a check reached a connection whose principal lost transact";
  // The transaction was checked (and found no producer allowed to answer).
  EXPECT_TRUE(eventually([&] {
    const auto metrics = http_get(broker_.process().http_port(), "/metrics", "Bearer " + k_admin_token);
    return metrics.find("txmq_tx_checks_total{result=\"no_producer\"}") != std::string::npos;
  }));
}

// ---- changes on open connections -----------------------------------------------------------

TEST_F(auth_test, a_revoked_grant_applies_to_the_next_request_of_an_open_connection) {
  const std::string svc = broker_.create_principal("svc");
  broker_.change(true, "svc", "produce", "topic:t");
  auto c = broker_.connect(svc);
  EXPECT_TRUE(c->request(produce_frame("t", {make_message("1")})).has_produce_response());
  broker_.change(false, "svc", "produce", "topic:t");
  auto refused = c->request(produce_frame("t", {make_message("2")}));
  ASSERT_TRUE(refused.has_error());
  EXPECT_EQ(refused.error().code(), v1::NOT_AUTHORIZED);
  EXPECT_NE(refused.error().message().find("produce on topic:t"), std::string::npos);
  broker_.change(true, "svc", "produce", "topic:*");
  EXPECT_TRUE(c->request(produce_frame("t", {make_message("3")})).has_produce_response());
}

TEST_F(auth_test, deleting_a_principal_closes_its_connections_and_its_token_stops_working) {
  const std::string svc = broker_.create_principal("svc");
  broker_.change(true, "svc", "produce", "topic:t");
  auto c = broker_.connect(svc);
  auto other = broker_.connect(broker_.create_principal("other"));
  v1::Frame del;
  del.mutable_principal_delete()->set_name("svc");
  auto r = broker_.admin().request(del);
  ASSERT_TRUE(r.has_principal_delete_response()) << r.ShortDebugString();
  EXPECT_EQ(r.principal_delete_response().connections_closed(), 1u);
  // Told why, then closed.
  auto bye = c->receive(5s);
  ASSERT_TRUE(bye && bye->has_error());
  EXPECT_EQ(bye->error().code(), v1::NOT_AUTHENTICATED);
  EXPECT_TRUE(c->closed_by_peer());
  EXPECT_FALSE(other->closed_by_peer(200ms));
  EXPECT_EQ(broker_.hello(svc).error().code(), v1::NOT_AUTHENTICATED);
}

// ---- CLI -------------------------------------------------------------------------------------

TEST_F(auth_test, cli_principal_and_acl_round_trips_and_tokens_stay_out_of_logs_and_listings) {
  auto& b = broker_.process();
  const std::string admin_file = (b.dir() / "admin-cli.token").string();
  std::ofstream(admin_file) << k_admin_token << "\n";
  auto as_admin = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--broker", b.address(), "--token-file", admin_file});
    return run_txmq(args);
  };
  // Without a token the CLI says what to pass.
  auto no_token = txmq(b, {"topic", "list"});
  EXPECT_EQ(no_token.status, 1) << no_token;
  EXPECT_NE(no_token.err.find("NOT_AUTHENTICATED"), std::string::npos) << no_token;
  EXPECT_NE(no_token.err.find("--token"), std::string::npos) << no_token;

  auto created = as_admin({"principal", "create", "orders-svc"});
  ASSERT_EQ(created.status, 0) << created;
  ASSERT_EQ(fields(created.out).size(), 1u) << created;
  const std::string token = fields(created.out).front();
  EXPECT_TRUE(token.starts_with("txmq_")) << created;
  EXPECT_EQ(as_admin({"principal", "create", "orders-svc"}).status, 1);

  ASSERT_EQ(as_admin({"acl", "grant", "orders-svc", "produce", "topic:orders"}).status, 0);
  ASSERT_EQ(as_admin({"acl", "grant", "orders-svc", "transact", "producer-group:orders"}).status, 0);
  auto bad = as_admin({"acl", "grant", "orders-svc", "fly", "topic:orders"});
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.err.find("unknown permission 'fly'"), std::string::npos) << bad;
  auto listed = as_admin({"--json", "acl", "list", "orders-svc"});
  ASSERT_EQ(listed.status, 0) << listed;
  ASSERT_EQ(listed.objects().size(), 2u) << listed;
  EXPECT_EQ(listed.objects()[0].at("resource").as_string(), "topic:orders");

  // The service's token: as --token, as TXMQ_TOKEN.
  auto produced = run_txmq({"--broker", b.address(), "--token", token, "produce", "orders", "hello"});
  EXPECT_EQ(produced.status, 0) << produced;
  ::setenv("TXMQ_TOKEN", token.c_str(), 1);
  auto from_env = run_txmq({"--broker", b.address(), "produce", "orders", "again"});
  auto denied = run_txmq({"--broker", b.address(), "produce", "payments", "x"});
  ::unsetenv("TXMQ_TOKEN");
  EXPECT_EQ(from_env.status, 0) << from_env;
  EXPECT_EQ(denied.status, 1) << denied;
  EXPECT_NE(denied.err.find("NOT_AUTHORIZED"), std::string::npos) << denied;
  EXPECT_NE(denied.err.find("produce on topic:payments"), std::string::npos) << denied;

  // The consumer library through the CLI: consume needs the group and the topic.
  auto no_consume = run_txmq({"--broker", b.address(), "--token", token, "consume", "orders", "--group", "audit",
                              "--max", "2", "--wait", "500"});
  EXPECT_EQ(no_consume.status, 1) << no_consume;
  EXPECT_NE(no_consume.err.find("consume on group:audit"), std::string::npos) << no_consume;
  ASSERT_EQ(as_admin({"acl", "grant", "orders-svc", "consume", "group:audit"}).status, 0);
  ASSERT_EQ(as_admin({"acl", "grant", "orders-svc", "consume", "topic:orders"}).status, 0);
  auto consumed = run_txmq({"--broker", b.address(), "--token", token, "--json", "consume", "orders", "--group",
                            "audit", "--max", "2", "--wait", "2000"});
  EXPECT_EQ(consumed.status, 0) << consumed;
  EXPECT_EQ(consumed.objects().size(), 2u) << consumed;
  ASSERT_EQ(as_admin({"acl", "revoke", "orders-svc", "consume", "group:audit"}).status, 0);
  ASSERT_EQ(as_admin({"acl", "revoke", "orders-svc", "consume", "topic:orders"}).status, 0);

  ASSERT_EQ(as_admin({"acl", "revoke", "orders-svc", "produce", "topic:orders"}).status, 0);
  auto after_revoke = as_admin({"--json", "acl", "list"});
  ASSERT_EQ(after_revoke.objects().size(), 1u) << after_revoke;

  auto principals = as_admin({"principal", "list"});
  ASSERT_EQ(principals.status, 0) << principals;
  EXPECT_NE(principals.out.find("orders-svc"), std::string::npos) << principals;
  EXPECT_EQ(principals.out.find("txmq_"), std::string::npos) << "a token in principal list: " << principals;
  auto principals_json = as_admin({"--json", "principal", "list"});
  EXPECT_EQ(principals_json.out.find("txmq_"), std::string::npos) << principals_json;

  auto deleted = as_admin({"principal", "delete", "orders-svc"});
  EXPECT_EQ(deleted.status, 0) << deleted;
  EXPECT_EQ(run_txmq({"--broker", b.address(), "--token", token, "topic", "list"}).status, 1);

  // Neither token ever reached the broker's log.
  const std::string log = b.log();
  EXPECT_NE(log.find("principal 'orders-svc' created"), std::string::npos);
  EXPECT_EQ(log.find(token), std::string::npos);
  EXPECT_EQ(log.find(k_admin_token), std::string::npos);
}

TEST(auth_start, the_broker_refuses_to_start_with_auth_and_no_usable_admin_token) {
  broker_process no_file({"--auth"});
  try {
    no_file.start(10s);
    ADD_FAILURE() << "started with --auth and no admin_token_file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("admin_token_file"), std::string::npos) << e.what();
  }
  const auto short_file = std::filesystem::temp_directory_path() / ("txmq-short-token-" + std::to_string(::getpid()));
  std::ofstream(short_file) << "tiny\n";
  broker_process short_token({"--auth", "--admin-token-file", short_file.string()});
  try {
    short_token.start(10s);
    ADD_FAILURE() << "started with a 4-character admin token";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("at least 32"), std::string::npos) << e.what();
  }
  std::filesystem::remove(short_file);
  broker_process unreadable({"--auth", "--admin-token-file", "/nonexistent/admin.token"});
  try {
    unreadable.start(10s);
    ADD_FAILURE() << "started with a missing admin token file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read admin_token_file /nonexistent/admin.token"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace txmq::test
