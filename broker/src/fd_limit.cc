#include "fd_limit.h"

#include <sys/resource.h>

#include <algorithm>

namespace txmq::broker {

fd_budget plan_fd_budget(std::uint32_t max_connections, std::uint64_t soft_before, std::uint64_t soft_after,
                         std::uint64_t hard) {
  fd_budget b{soft_before, soft_after, hard, max_connections, std::nullopt};
  if (soft_after >= static_cast<std::uint64_t>(max_connections) + k_fd_headroom) return b;
  // Half of a tiny limit still goes to the clients, and at least one connection is served.
  const std::uint64_t room = soft_after > 2 * k_fd_headroom ? soft_after - k_fd_headroom : soft_after / 2;
  b.max_connections = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, std::min<std::uint64_t>(room, max_connections)));
  b.warning = "the open file limit (RLIMIT_NOFILE) is " + std::to_string(soft_after) + " (hard limit " +
              std::to_string(hard) + "), below max_connections (" + std::to_string(max_connections) + ") + " +
              std::to_string(k_fd_headroom) + " for the store and the admin server: max_connections lowered to " +
              std::to_string(b.max_connections) + " (raise the limit, e.g. LimitNOFILE= in the systemd unit)";
  return b;
}

fd_budget raise_fd_limit(std::uint32_t max_connections) {
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) != 0) return plan_fd_budget(max_connections, 0, 1u << 20, 1u << 20);
  const std::uint64_t before = l.rlim_cur;
  if (l.rlim_cur != l.rlim_max) {
    rlimit raised = l;
    raised.rlim_cur = l.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) l = raised;
  }
  const auto as_u64 = [](rlim_t v) { return v == RLIM_INFINITY ? std::uint64_t{1} << 30 : static_cast<std::uint64_t>(v); };
  return plan_fd_budget(max_connections, before == RLIM_INFINITY ? std::uint64_t{1} << 30 : before, as_u64(l.rlim_cur),
                        as_u64(l.rlim_max));
}

}  // namespace txmq::broker
