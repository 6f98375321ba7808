#include "service/service.h"

#include "broker_metrics.h"
#include "cluster_mode/replication.h"
#include "cluster_mode/peer_pool.h"
#include "txmq/common/log.h"

namespace txmq::broker {

namespace asio = boost::asio;

service::service(asio::io_context& io, storage::store& store, service_settings settings, broker_metrics* metrics)
    : io_(io), store_(store), settings_(std::move(settings)), metrics_(metrics), reads_(io), tick_(io), stall_probe_(io) {
  consumer_group_settings gs;
  gs.delivery = settings_.delivery;
  gs.max_frame_bytes = settings_.max_frame_bytes;
  gs.max_groups = settings_.max_groups;
  gs.default_fetch_messages = settings_.default_fetch_messages;
  gs.max_fetch_messages = settings_.max_fetch_messages;
  groups_ = std::make_unique<consumer_groups>(io_, store_, reads_, std::move(gs), metrics_);
  tx_settings ts = settings_.tx;
  ts.max_message_bytes = settings_.max_message_bytes;
  ts.auto_create_topics = settings_.auto_create_topics;
  ts.default_partitions = settings_.default_partitions;
  ts.max_topics = settings_.max_topics;
  ts.sync = settings_.sync;
  ts.max_frame_bytes = settings_.max_frame_bytes;
  tx_coordinator::group_access access;
  access.find_group = [this](const std::string& name) { return groups_->find(name); };
  access.wake = [this](const std::vector<std::string>& topics, const std::vector<std::string>& groups) {
    wake(topics, groups);
  };
  tx_ = std::make_unique<tx_coordinator>(io_, store_, reads_, std::move(ts), metrics_, std::move(access));
  webhook_settings ws = settings_.webhooks;
  ws.max_frame_bytes = settings_.max_frame_bytes;
  webhooks_ = std::make_unique<webhook_notifier>(io_, store_, reads_, std::move(ws), metrics_);
  access_ = std::make_unique<auth::access_control>(io_, store_, settings_.auth, settings_.admin_token_sha256,
                                                   metrics_ ? &metrics_->registry : nullptr);
  access_->set_cluster_token_sha256(settings_.cluster_token_sha256);
  lookups_.tx_producer_group = [this](const std::string& txid) -> std::optional<std::string> {
    auto id = protocol::uuid::from_bytes(txid);
    if (!id) return std::nullopt;
    auto rec = store_.find_tx(id.value());
    if (!rec || !rec.value()) return std::nullopt;
    return rec.value()->producer_group;
  };
  lookups_.group_topics = [this](const std::string& group) {
    std::vector<std::string> topics;
    if (auto* g = groups_->find(group)) topics = g->topics();
    return topics;
  };
  // A check-back goes only to connections whose principal holds transact on the group.
  tx_->set_check_filter([this](const responder& c, const std::string& group) {
    return access_->allows(c.principal(), auth::permission::transact, auth::producer_group_resource(group));
  });
}

service::~service() = default;

result<void> service::start() {
  TXMQ_TRY(access_->load());
  TXMQ_TRY(groups_->load());
  TXMQ_TRY(tx_->start());
  TXMQ_TRY(webhooks_->start());
  tick_.expires_after(settings_.tick);
  tick_.async_wait([this](boost::system::error_code ec) {
    if (!ec) on_tick();
  });
  if (metrics_ != nullptr) {
    stall_probe_.expires_after(std::chrono::milliseconds(10));
    probe_stall();
  }
  return outcome::success();
}

void service::probe_stall() {
  stall_probe_.async_wait([this](boost::system::error_code ec) {
    if (ec || stopped_) return;
    const auto late = std::chrono::duration<double>(std::chrono::steady_clock::now() - stall_probe_.expiry()).count();
    metrics_->io_loop_stall.observe(late);
    if (late > metrics_->io_loop_stall_max.value()) metrics_->io_loop_stall_max.set(late);
    stall_probe_.expires_after(std::chrono::milliseconds(10));
    probe_stall();
  });
}

void service::stop() {
  stopped_ = true;
  // A read in progress finishes (the store outlives it); queued ones and their answers are dropped.
  reads_.stop();
  tick_.cancel();
  stall_probe_.cancel();
  tx_->stop();
  webhooks_->stop();
  groups_->stop();
  if (replication_) replication_->stop();
  if (peers_) peers_->close();
}

void service::close_all() {
  auto all = connections_;
  for (auto& [id, weak] : all) {
    if (auto c = weak.lock()) c->close();
  }
}

std::variant<std::string, hello_refusal> service::admit(const v1::Hello& hello,
                                                       const std::optional<std::string>& cert_principal) {
  auto principal = access_->authenticate(hello.auth_token(), cert_principal);
  if (!principal) {
    // The text never repeats the token.
    return hello_refusal{v1::NOT_AUTHENTICATED,
                         hello.auth_token().empty()
                             ? "this broker requires a token (auth = true): pass --token TOKEN, TXMQ_TOKEN or "
                               "--token-file FILE (the library's auth_token option)"
                             : "the token names no principal (wrong, or its principal was deleted)"};
  }
  if (!hello.producer_group().empty()) {
    if (auto why = access_->deny(*principal, {{auth::permission::transact,
                                               auth::producer_group_resource(hello.producer_group())}})) {
      return hello_refusal{v1::NOT_AUTHORIZED, "cannot declare producer group '" + hello.producer_group() + "': " + *why};
    }
  }
  return std::move(*principal);
}

bool service::authorized(const std::shared_ptr<responder>& c, const v1::Frame& frame) {
  if (!access_->enabled()) return true;
  const auto* rule = auth::rule_for(static_cast<int>(frame.body_case()));
  // Hello again, a response type or a type without a rule: the dispatch answers
  // INVALID_ARGUMENT / UNKNOWN_REQUEST and does nothing.
  if (!rule || rule->role != auth::frame_role::request || !rule->needs) return true;
  auto why = access_->deny(c->principal(), rule->needs(frame, lookups_));
  if (!why) return true;
  common::log::info("connection ", c->id(), " (", c->peer(), ", principal '", c->principal(), "'): ", rule->name,
                    " refused: ", *why);
  c->respond_error(frame.correlation_id(), v1::NOT_AUTHORIZED, std::move(*why));
  return false;
}

void service::connection_opened(const std::shared_ptr<responder>& c) {
  connections_[c->id()] = c;
  tx_->connection_opened(c);
}
void service::connection_closed(responder& c) {
  connections_.erase(c.id());
  tx_->connection_closed(c);
  groups_->connection_closed(c);
}

void service::handle(const std::shared_ptr<responder>& c, v1::Frame&& frame) {
  using settle_kind = consumer_groups::settle_kind;
  const std::uint64_t corr = frame.correlation_id();
  if (stopped_) return c->respond_error(corr, v1::SHUTTING_DOWN, "broker is shutting down");
  if (!authorized(c, frame)) return;
  switch (frame.body_case()) {
    case v1::Frame::kProduce: return produce(c, corr, *frame.mutable_produce());
    case v1::Frame::kFetch:
      if (cluster_ != nullptr) return fetch_in_cluster(c, corr, frame.fetch());
      return groups_->fetch(c, corr, frame.fetch());
    case v1::Frame::kAck:
      if (!frame.ack().tx().empty()) {
        return settle_for_tx(c, corr, settle_kind::ack, frame.ack().group(), frame.ack().refs(), 0, frame.ack().tx());
      }
      return groups_->settle(c, corr, settle_kind::ack, frame.ack().group(), frame.ack().refs(), 0);
    case v1::Frame::kNack:
      if (!frame.nack().tx().empty()) {
        return settle_for_tx(c, corr, settle_kind::nack, frame.nack().group(), frame.nack().refs(),
                             frame.nack().delay_ms(), frame.nack().tx());
      }
      return groups_->settle(c, corr, settle_kind::nack, frame.nack().group(), frame.nack().refs(),
                             frame.nack().delay_ms());
    case v1::Frame::kExtend:
      if (!frame.extend().tx().empty()) {
        return settle_for_tx(c, corr, settle_kind::extend, frame.extend().group(), frame.extend().refs(),
                             frame.extend().extend_ms(), frame.extend().tx());
      }
      return groups_->settle(c, corr, settle_kind::extend, frame.extend().group(), frame.extend().refs(),
                             frame.extend().extend_ms());
    case v1::Frame::kCreateTopic: return create_topic(c, corr, frame.create_topic());
    case v1::Frame::kAlterTopic: return alter_topic(c, corr, frame.alter_topic());
    case v1::Frame::kListTopics: return list_topics(c, corr);
    case v1::Frame::kDescribeTopic: return describe_topic(c, corr, frame.describe_topic().name());
    case v1::Frame::kCreateGroup: return groups_->create_group(c, corr, frame.create_group());
    case v1::Frame::kListGroups: return groups_->list_groups(c, corr);
    case v1::Frame::kDescribeGroup: return groups_->describe_group(c, corr, frame.describe_group().group());
    case v1::Frame::kDlqList: return groups_->dlq_list(c, corr, frame.dlq_list());
    case v1::Frame::kDlqRedrive: return groups_->dlq_redrive(c, corr, frame.dlq_redrive().group());
    case v1::Frame::kPrepare:
      return tx_->prepare(c, corr, *frame.mutable_prepare());
    case v1::Frame::kEndTx: return tx_->end_tx(c, corr, frame.end_tx());
    case v1::Frame::kTxList: return tx_->list(c, corr, frame.tx_list());
    case v1::Frame::kTxShow: return tx_->show(c, corr, frame.tx_show());
    case v1::Frame::kTxResolve: return tx_->operator_resolve(c, corr, frame.tx_resolve());
    case v1::Frame::kWebhookCreate:
    case v1::Frame::kWebhookList:
    case v1::Frame::kWebhookDelete:
    case v1::Frame::kWebhookAttempts:
    case v1::Frame::kWebhookReplay:
    case v1::Frame::kWebhookRotateSecret: return webhooks_->handle(c, frame);
    case v1::Frame::kConnectionList: return list_connections(c, corr);
    case v1::Frame::kPrincipalCreate: return principal_create(c, corr, frame.principal_create());
    case v1::Frame::kPrincipalList: return principal_list(c, corr);
    case v1::Frame::kPrincipalDelete: return principal_delete(c, corr, frame.principal_delete());
    case v1::Frame::kAclGrant: return acl_change(c, corr, frame.acl_grant().entry(), true);
    case v1::Frame::kAclRevoke: return acl_change(c, corr, frame.acl_revoke().entry(), false);
    case v1::Frame::kAclList: return acl_list(c, corr, frame.acl_list());
    case v1::Frame::kMetadata: return metadata(c, corr, frame.metadata());
    case v1::Frame::kReplicaFetch:
      if (!replication_) return c->respond_error(corr, v1::NOT_LEADER, "this broker is not a node of a cluster");
      return replication_->replica_fetch(c, corr, frame.replica_fetch());
    case v1::Frame::kHello:
      return c->respond_error(corr, v1::INVALID_ARGUMENT, "Hello was already received on this connection");
    default:
      return c->respond_error(corr, v1::UNKNOWN_REQUEST,
                              "request type " + std::to_string(static_cast<int>(frame.body_case())) +
                                  " is not one this broker serves");
  }
}

void service::list_connections(const std::shared_ptr<responder>& c, std::uint64_t corr) {
  v1::Frame out;
  out.set_correlation_id(corr);
  auto* list = out.mutable_connection_list_response();
  for (auto& [id, weak] : connections_) {
    auto conn = weak.lock();
    if (!conn || !conn->is_open()) continue;
    auto* info = list->add_connections();
    info->set_id(id);
    info->set_client_id(conn->client_id());
    info->set_producer_group(conn->producer_group());
    info->set_peer(conn->peer());
  }
  c->respond(std::move(out));
}

void service::handle_answer(const std::shared_ptr<responder>& c, v1::Frame&& frame) {
  tx_->handle_answer(c, std::move(frame));
}

void service::wake(const std::vector<std::string>& topics, const std::vector<std::string>& groups) {
  for (auto& t : topics) webhooks_->wake(t);
  groups_->wake(topics, groups);
}

void service::on_tick() {
  if (stopped_) return;
  if (cluster_ != nullptr) {
    sync_local_topics();
    sync_access();
  }
  if (replication_) replication_->tick();
  groups_->tick();
  tick_.expires_after(settings_.tick);
  tick_.async_wait([this](boost::system::error_code ec) {
    if (!ec) on_tick();
  });
}

}  // namespace txmq::broker
