#pragma once

// txmq-bench http-publish: produce through the HTTP/JSON API (POST /v1/topics/{t}/messages,
// `batch` messages per request, `concurrency` requests in flight, each on its own keep-alive
// connection) and, in the same run against the same broker, through the wire protocol with the
// same batch and requests in flight. Closed loop: each answer sends the next request.

#include <cstdint>
#include <string>

namespace txmq::bench {

struct http_bench_options {
  std::string broker = "127.0.0.1:7878";  // wire protocol
  std::string http = "127.0.0.1:7879";    // admin HTTP
  std::string topic = "bench-http";
  std::uint32_t partitions = 4;
  std::uint32_t batch = 100;
  std::uint32_t concurrency = 32;
  std::uint32_t message_bytes = 256;
  double seconds = 5;
  double warmup = 1;
  bool json = false;
};

int run_http_bench(const http_bench_options& o);

}  // namespace txmq::bench
