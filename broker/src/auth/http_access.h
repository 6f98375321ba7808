#pragma once

// The broker's access hook for its admin HTTP server (common::admin_http_server::set_access_hook):
// `Authorization: Bearer TOKEN` (or the client certificate's CN with mTLS) names the principal,
// 401 with `WWW-Authenticate: Bearer realm="txmq"` without a valid one; each route's
// (permission, resource) pairs are checked against the ACLs, 403 naming the first one missing.
// Answers are JSON {"error": CODE, "message": TEXT}, as the /v1 API's. Installed with auth on.

#include "auth/access_control.h"
#include "txmq/common/admin_http.h"

namespace txmq::broker::auth {

// `access` must outlive the server's use of the hook (the broker owns both).
[[nodiscard]] common::http_access_hook make_http_access_hook(access_control& access);

}  // namespace txmq::broker::auth
