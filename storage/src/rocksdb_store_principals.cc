// Principals (name and the SHA-256 of their token) and their ACL entries.

#include "rocksdb_store.h"

namespace txmq::storage::detail {

namespace {

// Names become key parts separated by NUL: refuse what would make two keys collide.
bool bad_part(std::string_view s) { return s.empty() || s.size() > k_max_group_name || s.find('\0') != s.npos; }

}  // namespace

void rocksdb_store::drop_grants(group_ctx& ctx, const std::string& principal) {
  const std::string prefix = acl_prefix(principal);
  std::vector<std::string> doomed;
  auto scanned = scan(cf_default, prefix, prefix_end(prefix), [&](std::string_view k, std::string_view) -> result<bool> {
    doomed.emplace_back(k);
    return true;
  });
  if (!scanned) {
    ctx.poisoned = scanned.error();
    return;
  }
  // Grants written earlier in this commit group are not in the database yet.
  for (auto& [k, v] : ctx.overlay[cf_default]) {
    if (v && k.starts_with(prefix)) doomed.push_back(k);
  }
  for (auto& k : doomed) ctx.del(cf_default, k);
}

void rocksdb_store::create_principal(principal_record record, completion<bool> done) {
  submit<bool>(true, record.name.size() + 64, std::move(done), [this, rec = std::move(record)](group_ctx& ctx) -> result<bool> {
    if (bad_part(rec.name) || rec.token_sha256.size() != 32) return errc::invalid_argument;
    const std::string key = principal_key(rec.name);
    const bool exists = wget(ctx, cf_default, key).has_value();
    if (ctx.poisoned) return *ctx.poisoned;
    if (exists) return false;
    records::PrincipalRecord r;
    r.set_name(rec.name);
    r.set_token_sha256(rec.token_sha256);
    r.set_created_ms(rec.created_ms);
    ctx.put(cf_default, key, r.SerializeAsString());
    // A grant stored while an earlier principal of the name was being deleted must not pass
    // to this one: it starts bare.
    drop_grants(ctx, rec.name);
    if (ctx.poisoned) return *ctx.poisoned;
    return true;
  });
}

void rocksdb_store::delete_principal(std::string name, completion<bool> done) {
  submit<bool>(true, name.size() + 64, std::move(done), [this, name = std::move(name)](group_ctx& ctx) -> result<bool> {
    if (bad_part(name)) return errc::invalid_argument;
    const std::string key = principal_key(name);
    const bool existed = wget(ctx, cf_default, key).has_value();
    if (ctx.poisoned) return *ctx.poisoned;
    if (!existed) return false;
    ctx.del(cf_default, key);
    // Its grants go in the same write.
    drop_grants(ctx, name);
    if (ctx.poisoned) return *ctx.poisoned;
    return true;
  });
}

result<std::vector<principal_record>> rocksdb_store::principals() const {
  std::vector<principal_record> out;
  TXMQ_TRY(scan(cf_default, "u/", prefix_end("u/"), [&](std::string_view, std::string_view v) -> result<bool> {
    records::PrincipalRecord r;
    if (!r.ParseFromArray(v.data(), static_cast<int>(v.size()))) return errc::corruption;
    out.push_back({r.name(), r.token_sha256(), r.created_ms()});
    return true;
  }));
  return out;
}

void rocksdb_store::put_acl(acl_entry entry, completion<bool> done) {
  const std::size_t bytes = entry.principal.size() + entry.permission.size() + entry.resource.size() + 16;
  submit<bool>(true, bytes, std::move(done), [this, e = std::move(entry)](group_ctx& ctx) -> result<bool> {
    if (bad_part(e.principal) || bad_part(e.permission) || bad_part(e.resource)) return errc::invalid_argument;
    const std::string key = acl_key(e.principal, e.permission, e.resource);
    const bool exists = wget(ctx, cf_default, key).has_value();
    if (ctx.poisoned) return *ctx.poisoned;
    if (exists) return false;
    records::AclRecord r;
    r.set_principal(e.principal);
    r.set_permission(e.permission);
    r.set_resource(e.resource);
    ctx.put(cf_default, key, r.SerializeAsString());
    return true;
  });
}

void rocksdb_store::delete_acl(acl_entry entry, completion<bool> done) {
  const std::size_t bytes = entry.principal.size() + entry.permission.size() + entry.resource.size() + 16;
  submit<bool>(true, bytes, std::move(done), [this, e = std::move(entry)](group_ctx& ctx) -> result<bool> {
    if (bad_part(e.principal) || bad_part(e.permission) || bad_part(e.resource)) return errc::invalid_argument;
    const std::string key = acl_key(e.principal, e.permission, e.resource);
    const bool existed = wget(ctx, cf_default, key).has_value();
    if (ctx.poisoned) return *ctx.poisoned;
    if (existed) ctx.del(cf_default, key);
    return existed;
  });
}

result<std::vector<acl_entry>> rocksdb_store::acls() const {
  std::vector<acl_entry> out;
  TXMQ_TRY(scan(cf_default, "a/", prefix_end("a/"), [&](std::string_view, std::string_view v) -> result<bool> {
    records::AclRecord r;
    if (!r.ParseFromArray(v.data(), static_cast<int>(v.size()))) return errc::corruption;
    out.push_back({r.principal(), r.permission(), r.resource()});
    return true;
  }));
  return out;
}

}  // namespace txmq::storage::detail
