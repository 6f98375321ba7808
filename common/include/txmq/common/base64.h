#pragma once

// Standard base64 (RFC 4648 §4: the '+' '/' alphabet, '=' padding), as webhook secrets and
// signatures and the CLI's and reconciliation API's `*_base64` fields use it.
//
// Thread-safety: pure functions, callable from any thread.

#include <string>
#include <string_view>

#include "txmq/protocol/result.h"

namespace txmq::common {

// Always padded: "f" -> "Zg==", "" -> "".
[[nodiscard]] std::string base64_encode(std::string_view bytes);

// Decodes padded standard base64. Errors: std::errc::invalid_argument for a length that is not
// a multiple of 4 or a character outside the alphabet; the text does not quote the input, which
// may be a secret.
[[nodiscard]] result<std::string> base64_decode(std::string_view text);

}  // namespace txmq::common
