#pragma once

// `txmq-bench webhook`: best-effort notification measured against a running broker
// (docs/BENCHMARKS.md "Webhooks"). The bench runs its own HTTP receiver on a loopback port that
// answers 200 at once, creates a webhook subscription to it, and measures:
//   throughput — N messages produced as fast as the broker takes them: distinct messages
//                delivered per second (first produce sent to last first-attempt received);
//   latency    — messages produced one by one at a steady rate: produce acknowledged (the
//                broker committed it) to its first attempt received, p50/p90/p99 (an attempt
//                that arrives before the ack counts as 0).

namespace txmq::bench {

// `txmq-bench webhook [options]` (argv[0] is "webhook"): parses the flags, prints --help,
// runs. Returns 0, 1 when messages were lost or a step failed (the reason on stderr), 2 for a
// usage error.
int webhook_command(int argc, char** argv);

}  // namespace txmq::bench
