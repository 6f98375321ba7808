#pragma once

// `txmq principal create|list|delete` and `txmq acl grant|revoke|list` (DESIGN §7,
// docs/security.md). The token of a new principal is printed once, by principal create; no
// other command ever prints a token. Private to txmq_cli.

#include <string>

#include "session.h"

namespace txmq::cli::detail {

int principal_create(session& s, const std::string& name);
int principal_list(session& s);
int principal_delete(session& s, const std::string& name);
int acl_change(session& s, bool grant, const std::string& principal, const std::string& permission,
               const std::string& resource);
int acl_list(session& s, const std::string& principal);

}  // namespace txmq::cli::detail
