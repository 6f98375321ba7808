// Principals and grants (and webhook subscriptions: webhooks/webhook_cluster.cc) in cluster mode (docs/cluster.md "Principals and ACLs"): kept in etcd
// under the cluster's prefix instead of each broker's store, so a principal or grant made
// through any broker is enforced by every broker. Writes go through the cluster thread's etcd
// client (cluster_node); every node takes the whole set from each cluster state it reads (the
// control plane re-reads the state on every change under the prefix, through its watch, and at
// least every reconcile_interval), on its next service tick. A principal that is gone has its
// open connections closed here, as on the broker that deleted it.

#include <boost/asio/post.hpp>

#include "cluster_mode/cluster_node.h"
#include "service/service.h"
#include "txmq/cluster/errc.h"
#include "txmq/common/log.h"
#include "txmq/storage/errc.h"
#include "webhooks/webhook_notifier.h"

namespace txmq::broker {

namespace asio = boost::asio;

namespace {

class etcd_records final : public auth::record_backend {
 public:
  etcd_records(asio::io_context& io, cluster_mode::cluster_node& node) : io_(io), node_(node) {}

  void create_principal(const storage::principal_record& p, done_fn done) override {
    node_.put_principal({p.name, p.token_sha256, p.created_ms}, on_io(std::move(done)));
  }
  void delete_principal(const std::string& name, done_fn done) override {
    node_.delete_principal(name, on_io(std::move(done)));
  }
  void put_acl(const storage::acl_entry& e, done_fn done) override {
    node_.put_acl({e.principal, e.permission, e.resource}, on_io(std::move(done)));
  }
  void delete_acl(const storage::acl_entry& e, done_fn done) override {
    node_.delete_acl({e.principal, e.permission, e.resource}, on_io(std::move(done)));
  }

 private:
  // From the cluster thread to the io thread; etcd's errors as the wire answers them: a
  // refused argument INVALID_ARGUMENT, etcd away STORE_UNAVAILABLE (as for topics).
  cluster_mode::cluster_node::record_done on_io(done_fn done) {
    return [&io = io_, done = std::move(done)](result<cluster::record_change> r) {
      asio::post(io, [done, r = std::move(r)]() mutable {
        if (r) return done(auth::record_change{r.value().changed, r.value().revision});
        if (r.error().code == cluster::errc::invalid_argument) {
          return done(error(std::make_error_code(std::errc::invalid_argument), r.error().message));
        }
        done(error(storage::errc::store_failed, "etcd: " + r.error().message));
      });
    };
  }
  asio::io_context& io_;
  cluster_mode::cluster_node& node_;
};

}  // namespace

void service::set_cluster(cluster_mode::cluster_node* node) {
  cluster_ = node;
  if (node == nullptr) return;
  records_ = std::make_unique<etcd_records>(io_, *node);
  access_->set_backend(records_.get());
  // What the store held before this broker joined a cluster is not the cluster's: the records
  // come from etcd from the first state read on.
  (void)access_->replace_all({}, {}, 0);
  // Webhook subscriptions too (docs/cluster.md "Webhooks").
  auto to_io = [&io = io_](webhook_notifier::revision_done done) {
    return [&io, done = std::move(done)](result<cluster::record_change> r) {
      asio::post(io, [done, r = std::move(r)]() mutable {
        if (!r) return done(r.error());
        done(std::make_pair(r.value().changed, r.value().revision));
      });
    };
  };
  webhook_notifier::cluster_hooks hooks;
  hooks.put = [node, to_io](std::string id, std::string record, bool create, webhook_notifier::revision_done done) {
    node->put_webhook(std::move(id), std::move(record), create, to_io(std::move(done)));
  };
  hooks.remove = [node, to_io](std::string id, webhook_notifier::revision_done done) {
    node->delete_webhook(std::move(id), to_io(std::move(done)));
  };
  hooks.disable = [node, to_io](std::string id, std::string reason, std::int64_t disabled_ms,
                                webhook_notifier::revision_done done) {
    node->disable_webhook(std::move(id), std::move(reason), disabled_ms, to_io(std::move(done)));
  };
  hooks.update = [node, to_io](std::string id, std::function<std::optional<std::string>(std::string_view)> change,
                               webhook_notifier::revision_done done) {
    node->update_webhook(std::move(id), std::move(change), to_io(std::move(done)));
  };
  webhooks_->set_cluster(std::move(hooks));
}

void service::sync_access() {
  auto state = cluster_->snapshot();
  if (!state || state == synced_access_) return;
  synced_access_ = state;
  std::vector<storage::principal_record> principals;
  principals.reserve(state->principals.size());
  for (const auto& p : state->principals) principals.push_back({p.name, p.token_sha256, p.created_ms});
  std::vector<storage::acl_entry> grants;
  grants.reserve(state->acls.size());
  for (const auto& a : state->acls) grants.push_back({a.principal, a.permission, a.resource});
  webhooks_->sync_cluster(state->webhooks, state->revision);
  for (const auto& name : access_->replace_all(principals, grants, state->revision)) {
    const auto closed = close_connections_of(name, "principal '" + name + "' was deleted; this connection is closed");
    common::log::info("principal '", name, "' deleted in the cluster; ", closed, " of its connections closed here");
  }
}

}  // namespace txmq::broker
