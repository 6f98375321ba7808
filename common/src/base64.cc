#include "txmq/common/base64.h"

#include <system_error>

#include <openssl/evp.h>

namespace txmq::common {

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

result<std::string> base64_decode(std::string_view text) {
  const auto invalid = [&](std::string why) -> result<std::string> {
    return error(std::make_error_code(std::errc::invalid_argument), "not base64: " + why);
  };
  if (text.size() % 4 != 0) {
    return invalid(std::to_string(text.size()) + " characters, not a multiple of 4 (is the '=' padding missing?)");
  }
  std::string out(3 * text.size() / 4, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n < 0) return invalid("a character outside A-Z, a-z, 0-9, '+', '/' and '=' padding");
  // EVP_DecodeBlock counts the padding as zero bytes.
  std::size_t len = static_cast<std::size_t>(n);
  if (text.ends_with("==")) {
    len -= 2;
  } else if (text.ends_with('=')) {
    len -= 1;
  }
  out.resize(len);
  return out;
}

}  // namespace txmq::common
