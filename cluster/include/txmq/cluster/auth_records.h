#pragma once

// Principals and grants in etcd (docs/cluster.md "Principals and ACLs"): cluster-wide records,
// small and rarely changed, read with the rest of the cluster state (every node re-reads it on
// every change under the prefix) and written by whichever broker an admin asked:
//
//   principals/<name>                   {"token_sha256":"<64 hex>","created_ms":T}
//   acls/<principal>/<perm>/<resource>  {"principal":P,"permission":X,"resource":R}
//
// Writes are etcd transactions: a principal is created only if absent; a grant only while its
// principal exists (so a grant never outlives a concurrent delete); a principal's delete takes
// its grants in the same transaction. Each answers whether it changed anything and the etcd
// revision after it, so a broker can tell a state read older than its own write.
//
// Validation of names, permissions and resources is the broker's (auth/acl.h); here only '/'
// in a principal name is refused (it would break the key layout).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/awaitable.hpp>

#include "txmq/cluster/control_plane.h"
#include "txmq/cluster/etcd_client.h"
#include "txmq/protocol/result.h"

namespace txmq::cluster {

struct record_change {
  bool changed = false;        // false: it existed already / did not exist
  std::int64_t revision = 0;   // etcd's revision after the write
};

[[nodiscard]] std::string encode(const principal_record& p);  // without the name (the key)
[[nodiscard]] std::string encode(const acl_record& a);
// Errors: errc::bad_response naming what is wrong.
[[nodiscard]] result<principal_record> decode_principal(std::string_view name, std::string_view json);
[[nodiscard]] result<acl_record> decode_acl(std::string_view json);

// changed = false when a principal of that name exists.
boost::asio::awaitable<result<record_change>> put_principal(etcd_client& etcd, const key_layout& keys,
                                                            const principal_record& p);
// Deletes the principal and every grant of it; changed = false when there was none.
boost::asio::awaitable<result<record_change>> delete_principal(etcd_client& etcd, const key_layout& keys,
                                                               std::string_view name);
// changed = false when the grant exists. Errors: errc::invalid_argument when the principal does
// not exist (now, in etcd).
boost::asio::awaitable<result<record_change>> put_acl(etcd_client& etcd, const key_layout& keys, const acl_record& a);
// changed = false when there was no such grant.
boost::asio::awaitable<result<record_change>> delete_acl(etcd_client& etcd, const key_layout& keys,
                                                         const acl_record& a);

// Webhook subscriptions (docs/cluster.md "Webhooks"): `record` is the broker's serialized
// subscription. `create`: written only if absent (changed = false when the id exists);
// otherwise only if present (a rotation or a disable; changed = false when it was deleted).
boost::asio::awaitable<result<record_change>> put_webhook(etcd_client& etcd, const key_layout& keys,
                                                          std::string_view id, std::string record, bool create);
// A change of a subscription that must not overwrite another writer's (a 410's disable,
// docs/cluster.md "Webhooks"): reads webhooks/<id>, lets `change` make the new record from the
// current one (nullopt: nothing to change), and writes it only if the key is still at the
// mod_revision read; a concurrent change (a rotation) is read again and `change` applied to it,
// up to `attempts` times. changed = false when the key is gone or `change` had nothing to do.
// Errors: compare_failed (still changing after `attempts`), etcd's.
boost::asio::awaitable<result<record_change>> update_webhook(
    etcd_client& etcd, const key_layout& keys, std::string id,
    std::function<std::optional<std::string>(std::string_view current)> change, int attempts = 5);
// changed = false when there was none.
boost::asio::awaitable<result<record_change>> delete_webhook(etcd_client& etcd, const key_layout& keys,
                                                             std::string_view id);

}  // namespace txmq::cluster
