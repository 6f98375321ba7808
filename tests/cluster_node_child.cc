// A cluster member without a broker, for the control-plane tests (cluster_control_test): joins
// the cluster in etcd as node N and takes its part (session, controller campaign, controller
// work) until SIGTERM, or until the test SIGKILLs it.
//
// Usage: cluster_node_child --etcd URL[,URL] --node-id N --advertise HOST:PORT [--cluster NAME]

#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "txmq/cluster/member.h"
#include "txmq/common/log.h"
#include "txmq/common/signals.h"

int main(int argc, char** argv) {
  namespace cluster = txmq::cluster;
  const auto signals = txmq::common::block_stop_signals();
  std::string etcd, advertise, name = "txmq";
  long long id = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--etcd") etcd = argv[i + 1];
    else if (flag == "--node-id") id = std::atoll(argv[i + 1]);
    else if (flag == "--advertise") advertise = argv[i + 1];
    else if (flag == "--cluster") name = argv[i + 1];
  }
  auto endpoints = cluster::parse_etcd_endpoints(etcd);
  if (!endpoints || id <= 0) {
    std::cerr << "usage: cluster_node_child --etcd URL --node-id N --advertise HOST:PORT [--cluster NAME]\n";
    return 2;
  }
  boost::asio::io_context io;
  cluster::member m(io.get_executor(), cluster::etcd_options{endpoints.value()},
                    cluster::member_options{.cluster_name = name, .id = id, .advertise = advertise});
  m.start();
  std::thread waiter([&] {
    (void)txmq::common::wait_for_stop_signal(signals);
    boost::asio::co_spawn(io, [&]() -> boost::asio::awaitable<void> {
      co_await m.stop();
      io.stop();
    }, boost::asio::detached);
  });
  io.run();
  waiter.join();
  return 0;
}
