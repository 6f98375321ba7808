// txmq: the admin and inspection CLI. Everything but wiring up argv and the standard streams
// lives in txmq_cli (txmq/cli/app.h).

#include <iostream>
#include <string>
#include <vector>

#include "txmq/cli/app.h"

int main(int argc, char** argv) {
  // Unsynchronized streams buffer on their own, which lets produce see whether more stdin
  // lines are already waiting (and batch them) before it blocks on the next read.
  std::ios::sync_with_stdio(false);
  std::vector<std::string> args(argv + 1, argv + argc);
  txmq::cli::environment env{std::cin, std::cout, std::cerr, txmq::cli::process_getenv};
  const int status = txmq::cli::run(args, env);
  std::cout.flush();
  return status;
}
