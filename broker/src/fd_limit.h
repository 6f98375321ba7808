#pragma once

// The broker's file descriptor budget (DESIGN.md §7 Limits: max_connections counted at
// accept, default 10000). Each client connection holds one descriptor, so the process's
// RLIMIT_NOFILE must exceed max_connections by what RocksDB, the admin HTTP server, webhook
// deliveries and the listening sockets need. At start the soft limit is raised to the hard
// limit; if even that is too small, max_connections is lowered to fit, with a warning, so that
// a flood of sockets meets LIMIT_EXCEEDED instead of EMFILE in RocksDB.

#include <cstdint>
#include <optional>
#include <string>

namespace txmq::broker {

// Descriptors kept for everything that is not a client connection.
inline constexpr std::uint64_t k_fd_headroom = 1024;

struct fd_budget {
  std::uint64_t soft_before = 0;  // RLIMIT_NOFILE soft limit found at start
  std::uint64_t soft_after = 0;   // after raising it (at most the hard limit)
  std::uint64_t hard = 0;
  std::uint32_t max_connections = 0;  // what the broker will accept
  std::optional<std::string> warning;  // set when max_connections had to be lowered
};

// Pure: what max_connections fits `soft_limit` descriptors (the configured value when it fits).
[[nodiscard]] fd_budget plan_fd_budget(std::uint32_t max_connections, std::uint64_t soft_before,
                                       std::uint64_t soft_after, std::uint64_t hard);

// Raises this process's soft RLIMIT_NOFILE to its hard limit and plans max_connections.
[[nodiscard]] fd_budget raise_fd_limit(std::uint32_t max_connections);

}  // namespace txmq::broker
