#pragma once

// Serves the web console (docs/console.md) on the admin HTTP port: GET / is index.html, every
// other console file at its own path (/console.css, /js/app.js, ...). The console itself uses
// only the HTTP/JSON API under /v1, so these routes hold no data and need no token.
//
// Each answer carries its Content-Type, a strict Content-Security-Policy (scripts, styles and
// requests from this origin only; no inline code, no frames, no forms posting elsewhere),
// `Cache-Control: no-cache` with an ETag (a browser revalidates and gets 304 while the binary
// is unchanged), and nosniff / no-referrer headers. Unknown paths answer 404.

#include "txmq/common/admin_http.h"

namespace txmq::broker::console {

// The Content-Security-Policy header every console answer carries (tests compare with it).
[[nodiscard]] std::string_view content_security_policy();

// Registers the GET route "/" (a prefix of every path) serving the console's files. The
// longest-prefix rule of admin_http_server keeps /healthz, /metrics and /v1 with their own
// handlers.
void register_routes(common::admin_http_server& server);

}  // namespace txmq::broker::console
