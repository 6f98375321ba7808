// A partition leader's own write of its ISR (replication, docs/cluster.md "Fencing"): the
// same fenced shape as the controller's writes, but compared on the partition key alone.

#include "txmq/cluster/control_plane.h"
#include "txmq/cluster/errc.h"

namespace txmq::cluster {

namespace asio = boost::asio;

asio::awaitable<result<std::int64_t>> write_isr(etcd_client& etcd, const key_layout& keys, std::string_view topic,
                                                std::int32_t partition, const partition_state& state,
                                                std::int64_t expected_mod_revision) {
  const auto key = keys.partition(topic, partition);
  txn_request req;
  // The revision the leader read pins the whole value: leader, leader_epoch, replicas, ISR. A
  // leader whose leadership moved (a new epoch was written) compares against an older revision
  // and writes nothing.
  req.compares.push_back({key, compare_target::mod_revision, compare_result::equal, expected_mod_revision, {}});
  req.success.push_back(op_put{key, encode(state), 0});
  auto answer = co_await etcd.txn(req);
  if (!answer) co_return answer.error();
  if (answer.value().succeeded) co_return answer.value().revision;
  co_return error(errc::compare_failed, "partition " + std::string(topic) + "/" + std::to_string(partition) +
                                            ": ISR not written, the partition changed since revision " +
                                            std::to_string(expected_mod_revision));
}

}  // namespace txmq::cluster
