#include "auth/access_control.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "io_thread.h"

namespace txmq::broker::auth {

namespace {

std::string hex(const unsigned char* p, std::size_t n) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(digits[p[i] >> 4]);
    out.push_back(digits[p[i] & 15]);
  }
  return out;
}

}  // namespace

std::string make_token() {
  unsigned char bytes[24];
  if (RAND_bytes(bytes, sizeof bytes) != 1) throw std::runtime_error("OpenSSL RAND_bytes failed: no random token");
  return "txmq_" + hex(bytes, sizeof bytes);
}

std::string sha256(std::string_view text) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(text.data(), text.size(), md, &len, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL SHA-256 failed");
  }
  return std::string(reinterpret_cast<const char*>(md), len);
}

result<std::string> read_token_file(std::string_view key, const std::string& path) {
  const std::string advice = "; put a random token of at least " + std::to_string(k_min_admin_token_chars) +
                             " characters in it, e.g. `printf 'txmq_%s' $(openssl rand -hex 24) > " + path +
                             " && chmod 600 " + path + "`";
  const std::string k(key);
  std::ifstream in(path, std::ios::binary);
  if (path.empty() || !in) {
    return invalid("cannot read " + k + " " + path + ": " + (path.empty() ? "no file named" : std::strerror(errno)) +
                   advice);
  }
  std::ostringstream os;
  os << in.rdbuf();
  std::string token = os.str();
  const auto first = token.find_first_not_of(" \t\r\n");
  const auto last = token.find_last_not_of(" \t\r\n");
  token = first == std::string::npos ? std::string() : token.substr(first, last - first + 1);
  if (token.size() < k_min_admin_token_chars) {
    return invalid(k + " " + path + " holds a token of " + std::to_string(token.size()) + " characters; at least " +
                   std::to_string(k_min_admin_token_chars) + " are needed" + advice);
  }
  for (unsigned char ch : token) {
    if (ch <= 0x20 || ch == 0x7f) return invalid(k + " " + path + " holds a token with a space or control character" + advice);
  }
  return token;
}

result<std::string> read_admin_token(const std::string& path) {
  if (path.empty()) {
    return invalid("auth = true needs admin_token_file (--admin-token-file FILE), a file holding the admin "
                   "principal's token; make one with `printf 'txmq_%s' $(openssl rand -hex 24) > FILE && chmod 600 "
                   "FILE`");
  }
  return read_token_file("admin_token_file", path);
}

access_control::access_control(boost::asio::io_context& io, storage::store& store, bool enabled,
                               std::string admin_token_sha256, common::metrics_registry* registry)
    : io_(io), store_(store), enabled_(enabled), admin_hash_(std::move(admin_token_sha256)), registry_(registry) {
  if (registry_) {
    // The families appear at start, at zero, so a dashboard sees them before the first denial.
    for (auto p : {permission::produce, permission::consume, permission::transact, permission::admin,
                   permission::replicate}) {
      (void)registry_->add_counter("txmq_auth_denials_total", "Requests refused with NOT_AUTHORIZED, by permission",
                                   {{"permission", std::string(to_string(p))}});
    }
  }
}

result<void> access_control::load() {
  if (backend_ != nullptr) return outcome::success();  // the cluster's records come from etcd
  auto principals = store_.principals();
  if (!principals) return error(principals.error().code, "reading the principals: " + principals.error().message);
  auto entries = store_.acls();
  if (!entries) return error(entries.error().code, "reading the ACLs: " + entries.error().message);
  by_hash_.clear();
  by_name_.clear();
  for (auto& p : principals.value()) {
    by_hash_[p.token_sha256] = p.name;
    by_name_[p.name] = p;
  }
  acls_.assign(entries.value());
  return outcome::success();
}

std::optional<std::string> access_control::authenticate(std::string_view token,
                                                        const std::optional<std::string>& cert_principal) const {
  if (!enabled_) return std::string(k_admin_principal);
  if (!token.empty()) {
    const std::string h = sha256(token);
    if (!admin_hash_.empty() && h == admin_hash_) return std::string(k_admin_principal);
    if (!cluster_hash_.empty() && h == cluster_hash_) return std::string(k_cluster_principal);
    auto it = by_hash_.find(h);
    if (it == by_hash_.end()) return std::nullopt;
    return it->second;
  }
  if (cert_principal && !cert_principal->empty()) {
    if (*cert_principal == k_admin_principal && !admin_hash_.empty()) return *cert_principal;
    if (by_name_.count(*cert_principal)) return *cert_principal;
  }
  return std::nullopt;
}

bool access_control::exists(const std::string& name) const {
  return (name == k_admin_principal && (!admin_hash_.empty() || !enabled_)) || by_name_.count(name) > 0;
}

bool access_control::allows(const std::string& principal, permission p, std::string_view resource) const {
  if (!enabled_) return true;
  // The brokers' own principal fetches replicas and produces the copies of committed
  // transactions' messages into partitions led by other brokers (docs/cluster.md
  // "Transactions"); nothing else. Fetching replicas (and so every message and group state) is
  // for the cluster's brokers only: not even admin may pose as a follower.
  if (principal == k_cluster_principal) {
    return (p == permission::replicate || p == permission::produce) && !cluster_hash_.empty();
  }
  if (p == permission::replicate) return false;
  if (principal == k_admin_principal) return true;
  // A deleted principal's connections are closed; until they are, they may do nothing.
  if (!by_name_.count(principal)) return false;
  return acls_.allows(principal, p, resource);
}

std::optional<std::string> access_control::deny(const std::string& principal, const std::vector<need>& needs) {
  for (auto& n : needs) {
    if (allows(principal, n.perm, n.resource)) continue;
    count_denial(n.perm);
    if (n.perm == permission::replicate) {
      return "principal '" + principal + "' may not fetch replicas: only the brokers of the cluster may, "
             "authenticated with cluster_token_file (docs/cluster.md \"Between brokers\")";
    }
    return "principal '" + principal + "' lacks " + std::string(to_string(n.perm)) + " on " + n.resource +
           " (an admin grants it with: txmq acl grant " + principal + " " + std::string(to_string(n.perm)) + " " +
           n.resource + ")";
  }
  return std::nullopt;
}

void access_control::count_denial(permission p) {
  if (registry_) {
    registry_->add_counter("txmq_auth_denials_total", "Requests refused with NOT_AUTHORIZED, by permission",
                           {{"permission", std::string(to_string(p))}})
        .inc();
  }
}

void access_control::create_principal(std::string name, std::function<void(result<std::string>)> done) {
  if (auto ok = check_principal_name(name); !ok) return done(ok.error());
  if (name == k_admin_principal) {
    return done(invalid("'admin' is the principal of admin_token_file; choose another name"));
  }
  if (name == k_cluster_principal) {
    return done(invalid("'" + name + "' is the brokers' own principal (cluster_token_file); choose another name"));
  }
  std::string token = make_token();
  storage::principal_record rec{name, sha256(token), now_ms()};
  if (backend_ != nullptr) {
    return backend_->create_principal(rec, [this, rec, token = std::move(token), done = std::move(done)](
                                                result<record_change> r) mutable {
      if (!r) return done(error(r.error().code, "storing principal '" + rec.name + "' in etcd failed: " + r.error().message));
      if (!r.value().changed) {
        return done(error(std::make_error_code(std::errc::file_exists),
                          "principal '" + rec.name + "' exists already; delete it first to give it a new token"));
      }
      own_revision_ = std::max(own_revision_, r.value().revision);
      by_hash_[rec.token_sha256] = rec.name;
      by_name_[rec.name] = rec;
      done(std::move(token));
    });
  }
  store_.create_principal(rec, on_io<bool>(io_, [this, rec, token = std::move(token), done = std::move(done)](
                                                    result<bool> r) mutable {
    if (!r) return done(error(r.error().code, "storing principal '" + rec.name + "' failed: " + r.error().message));
    if (!r.value()) {
      return done(error(std::make_error_code(std::errc::file_exists),
                        "principal '" + rec.name + "' exists already; delete it first to give it a new token"));
    }
    by_hash_[rec.token_sha256] = rec.name;
    by_name_[rec.name] = rec;
    done(std::move(token));
  }));
}

void access_control::delete_principal(std::string name, std::function<void(result<bool>)> done) {
  if (name == k_admin_principal) {
    return done(invalid("'admin' is the principal of admin_token_file; change that file to change it"));
  }
  if (auto ok = check_principal_name(name); !ok) return done(ok.error());
  if (backend_ != nullptr) {
    return backend_->delete_principal(name, [this, name, done = std::move(done)](result<record_change> r) mutable {
      if (!r) return done(error(r.error().code, "deleting principal '" + name + "' in etcd failed: " + r.error().message));
      own_revision_ = std::max(own_revision_, r.value().revision);
      forget(name);
      done(r.value().changed);
    });
  }
  store_.delete_principal(name, on_io<bool>(io_, [this, name, done = std::move(done)](result<bool> r) mutable {
    if (!r) return done(error(r.error().code, "deleting principal '" + name + "' failed: " + r.error().message));
    forget(name);
    done(r.value());
  }));
}

void access_control::grant(storage::acl_entry e, std::function<void(result<bool>)> done) {
  if (!parse_permission(e.permission)) {
    return done(invalid("unknown permission '" + e.permission + "': expected produce, consume, transact or admin"));
  }
  if (auto ok = check_resource(e.resource); !ok) return done(ok.error());
  if (e.principal == k_admin_principal) {
    return done(invalid("'admin' holds every permission already; grant to another principal"));
  }
  if (e.principal == k_cluster_principal) {
    return done(invalid("'" + e.principal + "' is the brokers' own principal; it holds replicate and produce and nothing else"));
  }
  if (!by_name_.count(e.principal)) {
    return done(invalid("no principal '" + e.principal + "'; create it with: txmq principal create " + e.principal));
  }
  if (backend_ != nullptr) {
    return backend_->put_acl(e, [this, e, done = std::move(done)](result<record_change> r) mutable {
      if (!r) return done(error(r.error().code, "storing the grant in etcd failed: " + r.error().message));
      own_revision_ = std::max(own_revision_, r.value().revision);
      acls_.add(e);
      done(r.value().changed);
    });
  }
  store_.put_acl(e, on_io<bool>(io_, [this, e, done = std::move(done)](result<bool> r) mutable {
    if (!r) return done(error(r.error().code, "storing the grant failed: " + r.error().message));
    // Deleted meanwhile: the store kept the entry without its principal; it grants nothing
    // (allows() needs the principal) and goes when the name is deleted again.
    acls_.add(e);
    done(r.value());
  }));
}

void access_control::revoke(storage::acl_entry e, std::function<void(result<bool>)> done) {
  if (!parse_permission(e.permission)) {
    return done(invalid("unknown permission '" + e.permission + "': expected produce, consume, transact or admin"));
  }
  if (auto ok = check_resource(e.resource); !ok) return done(ok.error());
  if (backend_ != nullptr) {
    return backend_->delete_acl(e, [this, e, done = std::move(done)](result<record_change> r) mutable {
      if (!r) return done(error(r.error().code, "removing the grant in etcd failed: " + r.error().message));
      own_revision_ = std::max(own_revision_, r.value().revision);
      acls_.remove(e);
      done(r.value().changed);
    });
  }
  store_.delete_acl(e, on_io<bool>(io_, [this, e, done = std::move(done)](result<bool> r) mutable {
    if (!r) return done(error(r.error().code, "removing the grant failed: " + r.error().message));
    acls_.remove(e);
    done(r.value());
  }));
}

void access_control::forget(const std::string& name) {
  if (auto it = by_name_.find(name); it != by_name_.end()) {
    by_hash_.erase(it->second.token_sha256);
    by_name_.erase(it);
  }
  acls_.remove_principal(name);
}

std::vector<std::string> access_control::replace_all(const std::vector<storage::principal_record>& principals,
                                                     const std::vector<storage::acl_entry>& grants,
                                                     std::int64_t revision) {
  std::vector<std::string> gone;
  if (revision < own_revision_) return gone;
  std::map<std::string, std::string> by_hash;
  std::map<std::string, storage::principal_record> by_name;
  for (const auto& p : principals) {
    by_hash[p.token_sha256] = p.name;
    by_name[p.name] = p;
  }
  for (const auto& [name, rec] : by_name_) {
    // Gone, or made again with another token (deleted and created between two reads).
    auto it = by_name.find(name);
    if (it == by_name.end() || it->second.token_sha256 != rec.token_sha256) gone.push_back(name);
  }
  by_hash_ = std::move(by_hash);
  by_name_ = std::move(by_name);
  acls_.assign(grants);
  return gone;
}

std::vector<principal_info> access_control::principals() const {
  std::vector<principal_info> out;
  if (enabled_ && !admin_hash_.empty()) out.push_back({std::string(k_admin_principal), 0, true});
  for (auto& [name, rec] : by_name_) out.push_back({name, rec.created_ms, false});
  return out;
}

std::vector<storage::acl_entry> access_control::acls(const std::optional<std::string>& principal) const {
  return acls_.entries(principal);
}

}  // namespace txmq::broker::auth
