#pragma once

// Who a client is and what it may do (DESIGN §7 Authentication, Authorization): the principals
// with the SHA-256 of their tokens, the admin principal of admin_token_file, and the ACLs,
// loaded from the store at start and kept in memory, so that every request is checked without
// touching the disk; changes are written to the store first and applied here when fsynced.
//
// With auth off (the default) nothing is checked: authenticate() accepts everyone as the
// admin principal and deny() never denies. Principals and grants can still be managed, so that
// they are ready when auth is turned on.
//
// Runs on the broker's io thread (the wire handlers and the admin HTTP server share it); not
// thread-safe. Tokens are never logged, listed or kept: only their hashes.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "auth/acl.h"
#include "txmq/common/metrics.h"
#include "txmq/protocol/result.h"
#include "txmq/storage/store.h"

namespace txmq::broker::auth {

// The principal of admin_token_file; it holds every permission and cannot be created, deleted
// or granted anything.
inline constexpr std::string_view k_admin_principal = "admin";

// The principal of cluster_token_file (docs/cluster.md "Between brokers"): the other brokers of
// the cluster. It holds replicate (ReplicaFetch) and produce (a transaction's home leader
// copies committed messages to other leaders) and nothing else, and nobody else holds
// replicate; it cannot be created, deleted or granted anything.
inline constexpr std::string_view k_cluster_principal = "txmq-cluster";

// "txmq_" + 48 hex digits: 192 random bits from OpenSSL's RAND_bytes.
[[nodiscard]] std::string make_token();
// The raw 32-byte SHA-256 of `text`.
[[nodiscard]] std::string sha256(std::string_view text);
// Reads the admin token from `path` (surrounding white space dropped) and checks it: the file
// must exist, be readable and hold at least k_min_admin_token_chars characters. The error
// names the file and says how to make a token.
inline constexpr std::size_t k_min_admin_token_chars = 32;
[[nodiscard]] result<std::string> read_admin_token(const std::string& path);
// The same checks for another token file; errors name `key` (the config key) and the file.
[[nodiscard]] result<std::string> read_token_file(std::string_view key, const std::string& path);

struct principal_info {
  std::string name;
  std::int64_t created_ms = 0;
  bool admin = false;
};

// Where principals and grants are kept in cluster mode (etcd: docs/cluster.md "Principals and
// ACLs"), instead of this broker's store. Set by the service; each call answers on the io
// thread whether it changed anything and the etcd revision after it.
struct record_change {
  bool changed = false;
  std::int64_t revision = 0;
};
class record_backend {
 public:
  using done_fn = std::function<void(result<record_change>)>;
  virtual ~record_backend() = default;
  virtual void create_principal(const storage::principal_record& p, done_fn done) = 0;
  virtual void delete_principal(const std::string& name, done_fn done) = 0;
  virtual void put_acl(const storage::acl_entry& e, done_fn done) = 0;
  virtual void delete_acl(const storage::acl_entry& e, done_fn done) = 0;
};

class access_control {
 public:
  // `admin_token_sha256`: the admin principal's token hash (empty: no admin principal; with
  // auth on the broker refuses to start without one). `registry` may be null (unit tests).
  access_control(boost::asio::io_context& io, storage::store& store, bool enabled, std::string admin_token_sha256,
                 common::metrics_registry* registry);

  // The SHA-256 of cluster_token_file's token (cluster mode with auth): Hello with it
  // authenticates as k_cluster_principal. Before the broker serves.
  void set_cluster_token_sha256(std::string hash) { cluster_hash_ = std::move(hash); }

  // Cluster mode: changes go to `backend` (which outlives this object) and the records come from
  // replace_all(); the store's own principals and grants are not used.
  void set_backend(record_backend* backend) { backend_ = backend; }
  // Replaces every principal and grant with the cluster's, read at etcd `revision`; a read older
  // than this node's own last write is ignored (it would undo it for a moment). Returns the
  // principals that are gone: their open connections must be closed.
  std::vector<std::string> replace_all(const std::vector<storage::principal_record>& principals,
                                       const std::vector<storage::acl_entry>& grants, std::int64_t revision);

  // Reads the principals and grants from the store. Errors: the store's, named.
  [[nodiscard]] result<void> load();
  [[nodiscard]] bool enabled() const noexcept { return enabled_; }

  // The principal a client authenticates as: the one whose token is `token` when a token is
  // sent (a wrong token is refused even with a certificate); without a token, the principal
  // named by `cert_principal` (the CN of a verified client certificate, mTLS) when it exists.
  // nullopt: NOT_AUTHENTICATED. With auth off: the admin principal, whatever was sent.
  [[nodiscard]] std::optional<std::string> authenticate(std::string_view token,
                                                        const std::optional<std::string>& cert_principal) const;
  // Whether the principal may do `p` on `resource` (always with auth off, and for admin).
  [[nodiscard]] bool allows(const std::string& principal, permission p, std::string_view resource) const;
  // The text of NOT_AUTHORIZED for the first of `needs` not granted ("principal 'svc' lacks
  // produce on topic:orders"), counted in txmq_auth_denials_total{permission}; nullopt when
  // all are granted.
  [[nodiscard]] std::optional<std::string> deny(const std::string& principal, const std::vector<need>& needs);
  // Counts a denial decided elsewhere (the admin HTTP server's 401s are not denials).
  void count_denial(permission p);

  // Whether `name` is a principal now (deleted ones are not).
  [[nodiscard]] bool exists(const std::string& name) const;

  // Changes, written to the store (fsynced) and then applied; `done` runs on the io thread.
  // create_principal answers the new token (shown once); errors: invalid_argument for a bad
  // or reserved name, file_exists when the name is taken.
  void create_principal(std::string name, std::function<void(result<std::string>)> done);
  // Answers false when there was no such principal. Its grants go with it.
  void delete_principal(std::string name, std::function<void(result<bool>)> done);
  // The principal must exist, the permission and resource be valid. Answers whether it changed.
  void grant(storage::acl_entry entry, std::function<void(result<bool>)> done);
  void revoke(storage::acl_entry entry, std::function<void(result<bool>)> done);

  // The admin principal first, then by name. Never tokens.
  [[nodiscard]] std::vector<principal_info> principals() const;
  [[nodiscard]] std::vector<storage::acl_entry> acls(const std::optional<std::string>& principal) const;
  [[nodiscard]] std::size_t grants_of(const std::string& principal) const { return acls_.count(principal); }

 private:
  void forget(const std::string& name);

  boost::asio::io_context& io_;
  storage::store& store_;
  bool enabled_;
  std::string admin_hash_;
  std::string cluster_hash_;
  record_backend* backend_ = nullptr;
  std::int64_t own_revision_ = 0;  // etcd revision of this node's last write (cluster mode)
  common::metrics_registry* registry_;
  // By token hash (a hash lookup leaks nothing about the token), and by name.
  std::map<std::string, std::string> by_hash_;
  std::map<std::string, storage::principal_record> by_name_;
  acl_table acls_;
};

}  // namespace txmq::broker::auth
