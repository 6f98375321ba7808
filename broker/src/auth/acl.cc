#include "auth/acl.h"

#include <algorithm>

namespace txmq::broker::auth {

namespace {
constexpr std::size_t k_max_principal_name = 100;
constexpr std::size_t k_max_resource = 256;
constexpr std::string_view k_resource_kinds[] = {"topic:", "group:", "producer-group:"};

}  // namespace

std::string_view to_string(permission p) noexcept {
  switch (p) {
    case permission::produce: return "produce";
    case permission::consume: return "consume";
    case permission::transact: return "transact";
    case permission::admin: return "admin";
    case permission::replicate: return "replicate";
  }
  return "?";
}

std::optional<permission> parse_permission(std::string_view text) noexcept {
  for (auto p : {permission::produce, permission::consume, permission::transact, permission::admin}) {
    if (text == to_string(p)) return p;
  }
  return std::nullopt;
}

result<void> check_resource(std::string_view resource) {
  if (resource == k_cluster) return outcome::success();
  for (auto kind : k_resource_kinds) {
    if (!resource.starts_with(kind)) continue;
    const auto name = resource.substr(kind.size());
    if (name.empty()) {
      return invalid("resource '" + std::string(resource) + "' has no name: write " + std::string(kind) +
                     "NAME, or " + std::string(kind) + "* for all of them");
    }
    if (resource.size() > k_max_resource) {
      return invalid("resource is " + std::to_string(resource.size()) + " bytes; at most " +
                     std::to_string(k_max_resource) + " are allowed");
    }
    for (unsigned char ch : name) {
      if (ch <= 0x20 || ch == 0x7f) {
        return invalid("resource '" + std::string(resource) + "' contains a space or control character");
      }
    }
    return outcome::success();
  }
  return invalid("unknown resource '" + std::string(resource) +
                 "': expected topic:NAME, group:NAME, producer-group:NAME or cluster (a NAME ending in '*' is a "
                 "prefix)");
}

result<void> check_principal_name(std::string_view name) {
  if (name.empty() || name.size() > k_max_principal_name) {
    return invalid("a principal name has 1 to " + std::to_string(k_max_principal_name) + " characters");
  }
  for (char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                    ch == '_' || ch == '-' || ch == '@';
    if (!ok) {
      return invalid("principal name '" + std::string(name) + "' may hold only letters, digits and . _ - @");
    }
  }
  return outcome::success();
}

bool covers(std::string_view granted, std::string_view wanted) noexcept {
  if (granted.ends_with('*') && granted != "*") {
    granted.remove_suffix(1);
    // The kind is part of the prefix ("topic:*" → "topic:"), so a prefix never crosses kinds.
    return wanted.starts_with(granted) && granted.find(':') != std::string_view::npos;
  }
  return granted == wanted;
}

void acl_table::assign(const std::vector<storage::acl_entry>& entries) {
  by_principal_.clear();
  for (auto& e : entries) add(e);
}

bool acl_table::add(const storage::acl_entry& e) {
  auto p = parse_permission(e.permission);
  if (!p) return false;  // the broker stores only checked entries; an unknown one grants nothing
  auto& grants = by_principal_[e.principal];
  grant g{*p, e.resource};
  auto it = std::lower_bound(grants.begin(), grants.end(), g);
  if (it != grants.end() && *it == g) return false;
  grants.insert(it, std::move(g));
  return true;
}

bool acl_table::remove(const storage::acl_entry& e) {
  auto p = parse_permission(e.permission);
  auto found = by_principal_.find(e.principal);
  if (!p || found == by_principal_.end()) return false;
  auto& grants = found->second;
  auto it = std::find(grants.begin(), grants.end(), grant{*p, e.resource});
  if (it == grants.end()) return false;
  grants.erase(it);
  if (grants.empty()) by_principal_.erase(found);
  return true;
}

void acl_table::remove_principal(const std::string& principal) { by_principal_.erase(principal); }

bool acl_table::allows(const std::string& principal, permission p, std::string_view resource) const {
  auto found = by_principal_.find(principal);
  if (found == by_principal_.end()) return false;
  for (auto& g : found->second) {
    // `admin` on cluster is the operator's grant: it holds every permission, as the admin principal does.
    if (g.perm == permission::admin && g.resource == k_cluster) return true;
    if (g.perm == p && covers(g.resource, resource)) return true;
  }
  return false;
}

std::size_t acl_table::count(const std::string& principal) const {
  auto found = by_principal_.find(principal);
  return found == by_principal_.end() ? 0 : found->second.size();
}

std::vector<storage::acl_entry> acl_table::entries(const std::optional<std::string>& principal) const {
  std::vector<storage::acl_entry> out;
  for (auto& [name, grants] : by_principal_) {
    if (principal && name != *principal) continue;
    for (auto& g : grants) out.push_back({name, std::string(to_string(g.perm)), g.resource});
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace txmq::broker::auth
