#pragma once

// Resident memory and CPU time of a server process and its descendants, read from /proc, so
// that a broker made of several processes (PostgreSQL's backends, RabbitMQ's Erlang helpers)
// is measured whole, like a single-process one.

namespace txmq::bench {

struct process_usage {
  double rss_mib = 0;  // proportional set size, summed over the tree (shared pages counted once)
  double cpu_s = 0;    // user + system time, including children that already exited
};

// Usage of `pid` and every live descendant; zeros when the process does not exist.
[[nodiscard]] process_usage process_tree_usage(int pid);

}  // namespace txmq::bench
