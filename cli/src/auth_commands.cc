#include "auth_commands.h"

#include <boost/json.hpp>

#include "output.h"
#include "txmq/cli/format.h"
#include "txmq/client/admin.h"

namespace txmq::cli::detail {

namespace json = boost::json;

int principal_create(session& s, const std::string& name) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  auto r = client::admin(conn).create_principal(name);
  if (!r) return s.fail("create principal " + quoted(name), r.error());
  if (s.json()) {
    print_json(s.env().out, json::object{{"principal", r.value().name()}, {"token", r.value().token()}});
  } else {
    s.env().out << r.value().token() << '\n';
    s.env().err << "principal " << quoted(name)
                << " created; its token is printed above and cannot be shown again (the broker keeps only its hash)\n";
  }
  return exit_ok;
}

int principal_list(session& s) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  auto r = client::admin(conn).list_principals();
  if (!r) return s.fail("list principals", r.error());
  if (s.json()) {
    for (auto& p : r.value().principals()) {
      print_json(s.env().out, json::object{{"principal", p.name()},
                                           {"admin", p.admin()},
                                           {"grants", p.grants()},
                                           {"connections", p.connections()},
                                           {"created_ms", p.created_ms()}});
    }
    return exit_ok;
  }
  table t({"PRINCIPAL", "ADMIN", "GRANTS", "CONNECTIONS", "CREATED"});
  for (auto& p : r.value().principals()) {
    t.add({p.name(), p.admin() ? "yes" : "no", p.admin() ? "all" : std::to_string(p.grants()),
           std::to_string(p.connections()), p.created_ms() ? iso_time(p.created_ms()) : "admin_token_file"});
  }
  t.print(s.env().out);
  return exit_ok;
}

int principal_delete(session& s, const std::string& name) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  auto r = client::admin(conn).delete_principal(name);
  if (!r) return s.fail("delete principal " + quoted(name), r.error());
  if (s.json()) {
    print_json(s.env().out, json::object{{"principal", name}, {"connections_closed", r.value().connections_closed()}});
  } else {
    s.env().out << "deleted principal " << quoted(name) << " and its grants; closed "
                << r.value().connections_closed() << " connection(s)\n";
  }
  return exit_ok;
}

int acl_change(session& s, bool grant, const std::string& principal, const std::string& permission,
               const std::string& resource) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  client::admin admin(conn);
  auto r = grant ? admin.grant(principal, permission, resource) : admin.revoke(principal, permission, resource);
  const std::string what = principal + " " + permission + " " + resource;
  if (!r) return s.fail(std::string(grant ? "grant " : "revoke ") + what, r.error());
  if (s.json()) {
    print_json(s.env().out, json::object{{"principal", principal},
                                         {"permission", permission},
                                         {"resource", resource},
                                         {grant ? "granted" : "revoked", true},
                                         {"changed", r.value().changed()}});
  } else if (grant) {
    s.env().out << (r.value().changed() ? "granted " : "already granted: ") << what << '\n';
  } else {
    s.env().out << (r.value().changed() ? "revoked " : "no such grant: ") << what << '\n';
  }
  return exit_ok;
}

int acl_list(session& s, const std::string& principal) {
  auto conn = s.connect();
  if (!conn) return exit_failure;
  auto r = client::admin(conn).list_acls(principal);
  if (!r) return s.fail("list grants", r.error());
  if (s.json()) {
    for (auto& e : r.value().entries()) {
      print_json(s.env().out,
                 json::object{{"principal", e.principal()}, {"permission", e.permission()}, {"resource", e.resource()}});
    }
    return exit_ok;
  }
  table t({"PRINCIPAL", "PERMISSION", "RESOURCE"});
  for (auto& e : r.value().entries()) t.add({e.principal(), e.permission(), e.resource()});
  t.print(s.env().out);
  return exit_ok;
}

}  // namespace txmq::cli::detail
