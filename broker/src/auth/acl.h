#pragma once

// The ACL model of DESIGN §7 (Authorization), without storage or network: permissions
// (produce, consume, transact, admin), resources (topic:NAME, group:NAME, producer-group:NAME,
// cluster; a NAME ending in '*' is a prefix), and the table that answers "may principal P do
// permission X on resource R". Pure values; not thread-safe (the broker uses it on its io thread).

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "txmq/protocol/result.h"
#include "txmq/storage/store.h"

namespace txmq::broker::auth {

// `replicate` (ReplicaFetch) is held only by the cluster's inter-broker principal
// (k_cluster_principal, access_control.h): it cannot be granted, and admin does not hold it.
enum class permission { produce, consume, transact, admin, replicate };

[[nodiscard]] std::string_view to_string(permission p) noexcept;
// The grantable permissions only (not replicate).
[[nodiscard]] std::optional<permission> parse_permission(std::string_view text) noexcept;

// What one request needs: `perm` on a concrete resource ("topic:orders", "cluster").
struct need {
  permission perm;
  std::string resource;
  bool operator==(const need&) const = default;
};

// Concrete resources.
[[nodiscard]] inline std::string topic_resource(std::string_view name) { return "topic:" + std::string(name); }
[[nodiscard]] inline std::string group_resource(std::string_view name) { return "group:" + std::string(name); }
[[nodiscard]] inline std::string producer_group_resource(std::string_view name) {
  return "producer-group:" + std::string(name);
}
inline constexpr std::string_view k_cluster = "cluster";

// Checks a grant's resource as `txmq acl grant` takes it: "cluster", or a kind, ':' and a
// non-empty name without spaces or control characters (a trailing '*' makes it a prefix; "topic:*"
// is every topic). The error (invalid_argument) says what is accepted.
[[nodiscard]] result<void> check_resource(std::string_view resource);
// Checks a principal name: 1..100 of [A-Za-z0-9._@-].
[[nodiscard]] result<void> check_principal_name(std::string_view name);

// Whether a grant on `granted` covers the concrete resource `wanted`.
[[nodiscard]] bool covers(std::string_view granted, std::string_view wanted) noexcept;

// Every principal's grants.
class acl_table {
 public:
  void assign(const std::vector<storage::acl_entry>& entries);
  // Answers false when it was already there / not there.
  bool add(const storage::acl_entry& e);
  bool remove(const storage::acl_entry& e);
  void remove_principal(const std::string& principal);

  // Whether a grant covers `p` on `resource`. `admin` on `cluster` covers everything: such a
  // principal could grant itself anything anyway.
  [[nodiscard]] bool allows(const std::string& principal, permission p, std::string_view resource) const;
  // Grants naming the principal.
  [[nodiscard]] std::size_t count(const std::string& principal) const;
  // By principal, permission, resource; only `principal`'s when given.
  [[nodiscard]] std::vector<storage::acl_entry> entries(const std::optional<std::string>& principal) const;

 private:
  struct grant {
    permission perm;
    std::string resource;
    auto operator<=>(const grant&) const = default;
  };
  std::map<std::string, std::vector<grant>> by_principal_;
};

}  // namespace txmq::broker::auth
