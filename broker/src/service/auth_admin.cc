// The principal and ACL requests (txmq principal create|list|delete, txmq acl grant|revoke|list).
// The service's dispatch has checked admin on cluster before they run. A new token is only in
// the PrincipalCreateResponse: never logged, never listed.

#include "service/service.h"

#include "request_checks.h"
#include "txmq/common/log.h"

namespace txmq::broker {

namespace {

v1::ErrorCode code_of(const error& e) {
  if (e.code == std::errc::file_exists || e.code == std::errc::invalid_argument) return v1::INVALID_ARGUMENT;
  return wire_code(e);
}

}  // namespace

void service::principal_create(const std::shared_ptr<responder>& c, std::uint64_t corr,
                               const v1::PrincipalCreateRequest& req) {
  std::weak_ptr<responder> weak = c;
  const std::string by = c->principal();
  access_->create_principal(req.name(), [weak, corr, name = req.name(), by](result<std::string> token) {
    if (token) common::log::info("principal '", name, "' created by '", by, "'");
    auto c = weak.lock();
    if (!c) return;
    if (!token) return c->respond_error(corr, code_of(token.error()), token.error().message);
    v1::Frame out;
    out.set_correlation_id(corr);
    out.mutable_principal_create_response()->set_name(name);
    out.mutable_principal_create_response()->set_token(std::move(token.value()));
    c->respond(std::move(out));
  });
}

void service::principal_list(const std::shared_ptr<responder>& c, std::uint64_t corr) {
  std::map<std::string, std::uint32_t> open;
  for (auto& [id, weak] : connections_) {
    if (auto conn = weak.lock()) ++open[conn->principal()];
  }
  v1::Frame out;
  out.set_correlation_id(corr);
  auto* list = out.mutable_principal_list_response();
  for (auto& p : access_->principals()) {
    auto* info = list->add_principals();
    info->set_name(p.name);
    info->set_created_ms(p.created_ms);
    info->set_admin(p.admin);
    info->set_connections(open[p.name]);
    info->set_grants(static_cast<std::uint32_t>(access_->grants_of(p.name)));
  }
  c->respond(std::move(out));
}

void service::principal_delete(const std::shared_ptr<responder>& c, std::uint64_t corr,
                               const v1::PrincipalDeleteRequest& req) {
  std::weak_ptr<responder> weak = c;
  const std::string by = c->principal();
  access_->delete_principal(req.name(), [this, weak, corr, name = req.name(), by](result<bool> r) {
    std::uint32_t closed = 0;
    if (r && r.value()) {
      closed = close_connections_of(name, "principal '" + name + "' was deleted; this connection is closed");
      common::log::info("principal '", name, "' deleted by '", by, "'; ", closed, " of its connections closed");
    }
    auto c = weak.lock();
    if (!c) return;
    if (!r) return c->respond_error(corr, code_of(r.error()), r.error().message);
    if (!r.value()) return c->respond_error(corr, v1::INVALID_ARGUMENT, "no principal '" + name + "'");
    v1::Frame out;
    out.set_correlation_id(corr);
    out.mutable_principal_delete_response()->set_connections_closed(closed);
    c->respond(std::move(out));
  });
}

std::uint32_t service::close_connections_of(const std::string& principal, const std::string& why) {
  std::uint32_t closed = 0;
  // Told why, then closed once that is written.
  auto all = connections_;
  for (auto& [id, w] : all) {
    auto conn = w.lock();
    if (!conn || conn->principal() != principal) continue;
    v1::Frame bye;
    bye.mutable_error()->set_code(v1::NOT_AUTHENTICATED);
    bye.mutable_error()->set_message(why);
    conn->send_request(bye);
    conn->close();
    ++closed;
  }
  return closed;
}

void service::acl_change(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::AclEntry& entry,
                         bool grant) {
  std::weak_ptr<responder> weak = c;
  storage::acl_entry e{entry.principal(), entry.permission(), entry.resource()};
  auto done = [weak, corr, e, grant, by = c->principal()](result<bool> r) {
    if (r && r.value()) {
      common::log::info("acl ", grant ? "grant" : "revoke", " ", e.principal, " ", e.permission, " ", e.resource,
                        " by '", by, "'");
    }
    auto c = weak.lock();
    if (!c) return;
    if (!r) return c->respond_error(corr, code_of(r.error()), r.error().message);
    v1::Frame out;
    out.set_correlation_id(corr);
    out.mutable_acl_change_response()->set_changed(r.value());
    c->respond(std::move(out));
  };
  if (grant) {
    access_->grant(std::move(e), std::move(done));
  } else {
    access_->revoke(std::move(e), std::move(done));
  }
}

void service::acl_list(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::AclListRequest& req) {
  v1::Frame out;
  out.set_correlation_id(corr);
  auto* list = out.mutable_acl_list_response();
  const auto entries =
      access_->acls(req.principal().empty() ? std::nullopt : std::optional<std::string>(req.principal()));
  for (auto& e : entries) {
    auto* o = list->add_entries();
    o->set_principal(e.principal);
    o->set_permission(e.permission);
    o->set_resource(e.resource);
  }
  c->respond(std::move(out));
}

}  // namespace txmq::broker
