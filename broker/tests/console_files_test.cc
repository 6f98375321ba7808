// The web console's files compiled into the broker (cmake/txmq_embed.cmake): every file of
// broker/console/ is embedded (a file added to the folder but not to CMakeLists.txt would be
// missing from an installed broker), byte for byte, with its Content-Type.

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "console/console_files.h"
#include "console/console_routes.h"

namespace fs = std::filesystem;
using txmq::broker::console::files;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST(console_files, every_file_of_the_folder_is_embedded_byte_for_byte) {
  const fs::path dir = TXMQ_CONSOLE_DIR;
  std::set<std::string> on_disk;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) on_disk.insert("/" + fs::relative(e.path(), dir).generic_string());
  }
  std::set<std::string> embedded;
  for (const auto& f : files()) {
    embedded.insert(std::string(f.path));
    EXPECT_EQ(std::string(f.bytes), read_file(dir / std::string(f.path).substr(1))) << f.path;
  }
  EXPECT_EQ(embedded, on_disk) << "list every file of broker/console/ in broker/CMakeLists.txt (txmq_embed_files)";
  EXPECT_TRUE(embedded.contains("/index.html"));
}

TEST(console_files, content_types_follow_the_extension) {
  for (const auto& f : files()) {
    const std::string path(f.path);
    const std::string type(f.content_type);
    if (path.ends_with(".js")) {
      EXPECT_EQ(type, "text/javascript; charset=utf-8") << path;
    } else if (path.ends_with(".html")) {
      EXPECT_EQ(type, "text/html; charset=utf-8") << path;
    } else if (path.ends_with(".css")) {
      EXPECT_EQ(type, "text/css; charset=utf-8") << path;
    } else if (path.ends_with(".svg")) {
      EXPECT_EQ(type, "image/svg+xml") << path;
    }
  }
}

TEST(console_files, no_markup_injection_point_and_a_strict_policy) {
  // The console sets API text through textContent only; innerHTML, outerHTML, insertAdjacentHTML
  // and document.write would turn data into markup, and the CSP forbids inline code.
  for (const auto& f : files()) {
    const std::string body(f.bytes);
    for (const char* banned : {"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("}) {
      EXPECT_EQ(body.find(banned), std::string::npos) << f.path << " uses " << banned;
    }
  }
  const std::string csp(txmq::broker::console::content_security_policy());
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(csp.find("script-src 'self'"), std::string::npos);
  EXPECT_EQ(csp.find("unsafe"), std::string::npos);
}
