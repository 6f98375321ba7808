#include "txmq/client/token.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace txmq::client {

result<std::string> resolve_token(const std::optional<std::string>& token_flag,
                                  const std::optional<std::string>& token_file,
                                  const std::function<std::optional<std::string>(std::string_view)>& getenv) {
  if (token_flag && token_file) {
    return error(errc::invalid_argument, "give either --token or --token-file, not both");
  }
  if (token_flag) return *token_flag;
  if (token_file) {
    std::ifstream in(*token_file, std::ios::binary);
    if (!in) {
      return error(errc::invalid_argument, "cannot read --token-file " + *token_file + ": " + std::strerror(errno));
    }
    std::ostringstream os;
    os << in.rdbuf();
    std::string t = os.str();
    const auto first = t.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return error(errc::invalid_argument, "--token-file " + *token_file + " is empty");
    const auto last = t.find_last_not_of(" \t\r\n");
    return t.substr(first, last - first + 1);
  }
  if (getenv) {
    if (auto e = getenv("TXMQ_TOKEN"); e && !e->empty()) return *e;
  }
  return std::string();
}

}  // namespace txmq::client
