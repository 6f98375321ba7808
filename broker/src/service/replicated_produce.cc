// A Produce to a replicated partition (cluster mode, replicas > 1; docs/cluster.md
// "Replication"): the leader appends and fsyncs as for any Produce, then answers only once
// every in-sync replica has fsynced the messages (cluster_mode::replication), or
// NOT_ENOUGH_REPLICAS after replication_timeout. Single-node mode never comes here.

#include <map>
#include <set>

#include "broker_metrics.h"
#include "cluster_mode/replication.h"
#include "io_thread.h"
#include "request_checks.h"
#include "service/service.h"

namespace txmq::broker {

void service::append_replicated(const std::shared_ptr<responder>& c, std::uint64_t corr, v1::ProduceRequest& req,
                                std::uint32_t partition_count, std::vector<std::uint32_t> partitions) {
  storage::append_request ar;
  ar.topic = req.topic();
  ar.sync = true;  // a follower's report is of fsynced offsets: so is the leader's own
  ar.auto_create_partitions = partition_count;
  ar.partitions = std::move(partitions);
  if (replication_) {
    // The followers take the messages once written, before the leader's fsync (their fsyncs
    // overlap it); the answer below still waits for the leader's and theirs.
    std::set<std::int32_t> chosen(ar.partitions.begin(), ar.partitions.end());
    ar.on_written = [this, topic = req.topic(),
                     parts = std::vector<std::int32_t>(chosen.begin(), chosen.end())] {  // on the store's writer
      boost::asio::post(io_, [this, topic, parts] {
        if (replication_) replication_->on_written(topic, parts);
      });
    };
  }
  ar.messages.reserve(static_cast<std::size_t>(req.messages_size()));
  for (auto& m : *req.mutable_messages()) {
    m.set_publish_time_ms(0);
    ar.messages.push_back(std::move(m));
  }
  std::weak_ptr<responder> weak = c;
  std::string topic = ar.topic;
  const auto started = std::chrono::steady_clock::now();
  std::uint64_t body_bytes = 0;
  for (auto& m : ar.messages) body_bytes += m.body().size();
  store_.append(std::move(ar), on_io<storage::append_result>(io_, [this, weak, corr, topic, started, body_bytes](
                                                                      result<storage::append_result> r) {
    // Counted when stored on the leader; the latency is observed when the client is answered
    // (after the replicas, or with the error).
    count_appended(r, body_bytes);
    if (!r) {
      if (metrics_) metrics_->produce_latency.observe(std::chrono::steady_clock::now() - started);
      if (auto c = weak.lock()) {
        c->respond_error(corr, wire_code(r.error()), "produce to '" + topic + "' failed: " + r.error().message);
      }
      return;
    }
    // Every message (a duplicate too: its original may not be replicated yet) must be below the HW.
    std::map<std::int32_t, std::uint64_t> need;
    for (auto& p : r.value().positions) {
      auto& n = need[static_cast<std::int32_t>(p.partition)];
      n = std::max(n, p.offset + 1);
    }
    if (!replication_) return;
    replication_->await_replicas(
        topic, {need.begin(), need.end()},
        [this, weak, corr, topic, started, positions = std::move(r.value().positions)](result<void> done) {
          if (metrics_) metrics_->produce_latency.observe(std::chrono::steady_clock::now() - started);
          // Consumer groups were woken when the high watermark moved over these messages
          // (replication::set_on_visible, before any waiter is settled); webhooks are not.
          if (done) webhooks_->wake(topic);
          auto c = weak.lock();
          if (!c) return;
          if (!done) return c->respond_error(corr, v1::NOT_ENOUGH_REPLICAS, std::move(done.error().message));
          c->respond(produce_answer(corr, positions));
        });
  }));
}

}  // namespace txmq::broker
