#pragma once

// The web console's files (broker/console/), compiled into the broker by CMake
// (cmake/txmq_embed.cmake generates the definition of files() in the build directory), so an
// installed broker serves the console without any file beside it.

#include <span>
#include <string_view>

namespace txmq::broker::console {

struct embedded_file {
  std::string_view path;          // "/index.html", "/js/app.js": below broker/console/
  std::string_view content_type;  // from the extension, with charset for text
  std::string_view bytes;
};

// Every console file, in the order CMake lists them. Static storage; never fails.
[[nodiscard]] std::span<const embedded_file> files();

}  // namespace txmq::broker::console
