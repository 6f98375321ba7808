// Read-process-write in a cluster (docs/cluster.md "Transactions"): a transaction's record
// lives in its home partition, its acks name deliveries of input partitions that other
// brokers may lead. The home leader settles them on the transaction's behalf through each
// input partition's leader: a hold (an Extend carrying the txid: the delivery stays in flight
// for that transaction only, replicated as any Extend), then the Ack (COMMIT) or a Nack
// (ROLLBACK: redelivered). Each is answered by that leader once its ISR holds the change, like
// a consumer's. Partitions led here are settled in place; the others over a peer connection
// (peer_connection.h: TLS and the cluster token; the request needs `replicate`).

#include <cstdlib>
#include <map>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "cluster_mode/cluster_node.h"
#include "cluster_mode/peer_pool.h"
#include "cluster_mode/replication.h"
#include "cluster_mode/routing.h"
#include "service/service.h"
#include "txmq/common/log.h"

namespace txmq::broker {

namespace {

// Answered by the input leader once its ISR holds the change: longer than replication_timeout.
constexpr std::chrono::milliseconds k_settle_timeout{15'000};
// UNKNOWN_GROUP from an input partition's leader: it has not learned the group yet (a new leader
// whose replicated group state is still arriving, a group that began on another node). Groups
// are never deleted, and the delivery was made by the partition's leader for that group, so this
// is transient: asked again every k_unknown_group_retry for up to k_unknown_group_wait, then the
// step fails with UNKNOWN_GROUP (a Prepare or EndTx is answered with it; a COMMIT's follow-up is
// tried again by the coordinator). Never taken as "settled": an ack taken so would be lost.
constexpr std::chrono::milliseconds k_unknown_group_wait{5'000};
constexpr std::chrono::milliseconds k_unknown_group_retry{200};

#ifdef TXMQ_FAULT_HOOKS
// Test builds: TXMQ_TEST_TX_ACK_UNKNOWN_GROUP=N answers the first N acks of a COMMIT's follow-up
// UNKNOWN_GROUP without asking the input leader (as a leader that has not learned the group
// would), for cluster_tx_ack_test.
bool fake_unknown_group(tx_coordinator::settle_step step) {
  static const int limit = [] {
    const char* v = std::getenv("TXMQ_TEST_TX_ACK_UNKNOWN_GROUP");
    return v ? std::atoi(v) : 0;
  }();
  static int used = 0;
  if (step != tx_coordinator::settle_step::ack || used >= limit) return false;
  ++used;
  common::log::warn("TXMQ_TEST_TX_ACK_UNKNOWN_GROUP: answering a transaction's ack UNKNOWN_GROUP (", used, " of ",
                    limit, ")");
  return true;
}
#endif

// The answer of a settle done in place, handed to a callback. It keeps itself alive until it
// has answered (the groups keep only a weak pointer across the replication gate).
class local_answer final : public responder {
 public:
  static std::shared_ptr<local_answer> make(std::function<void(v1::Frame)> fn) {
    auto r = std::shared_ptr<local_answer>(new local_answer());
    r->self_ = r;
    r->fn_ = std::move(fn);
    return r;
  }
  void respond(v1::Frame frame) override {
    auto fn = std::move(fn_);
    auto keep = std::move(self_);
    if (fn) fn(std::move(frame));
  }
  void send_request(const v1::Frame&) override {}
  void close() override {}
  [[nodiscard]] std::uint64_t id() const noexcept override { return 0; }
  [[nodiscard]] bool is_open() const noexcept override { return true; }
  [[nodiscard]] const std::string& client_id() const noexcept override { return name_; }
  [[nodiscard]] const std::string& producer_group() const noexcept override { return empty_; }
  [[nodiscard]] const std::string& principal() const noexcept override { return name_; }
  [[nodiscard]] const std::string& peer() const noexcept override { return name_; }

 private:
  local_answer() = default;
  std::shared_ptr<local_answer> self_;
  std::function<void(v1::Frame)> fn_;
  std::string name_ = "txmq-cluster (in place)";
  std::string empty_;
};

}  // namespace

void service::settle_for_tx(const std::shared_ptr<responder>& c, std::uint64_t corr, consumer_groups::settle_kind kind,
                            const std::string& group, const google::protobuf::RepeatedPtrField<v1::DeliveryRef>& refs,
                            std::uint32_t ms, const std::string& tx) {
  if (cluster_ == nullptr) {
    return c->respond_error(corr, v1::INVALID_ARGUMENT, "settling deliveries for a transaction (tx) is cluster mode's");
  }
  // A node that does not lead the partition has no say on its deliveries (its tracker holds
  // none of them): NOT_LEADER, so that the home leader asks the new leader rather than taking
  // an unknown delivery for a settled one.
  for (auto& r : refs) {
    if (auto refused = leads_now(r.topic(), r.partition(), "the delivery's partition")) {
      v1::Frame out;
      out.set_correlation_id(corr);
      *out.mutable_error() = std::move(*refused);
      return c->respond(std::move(out));
    }
  }
  groups_->settle(c, corr, kind, group, refs, ms, tx);
}

void service::settle_tx_acks(tx_coordinator::settle_step step, const storage::txid& id,
                             const std::vector<storage::ack_ref>& acks,
                             std::function<void(result<std::vector<bool>>)> done) {
  const auto state = cluster_ ? cluster_->snapshot() : nullptr;
  if (!state) return done(error(protocol::errc::not_leader, "the cluster's state is not read yet"));
  // By (leader address, group); an empty address: led here.
  std::map<std::pair<std::string, std::string>, std::vector<std::size_t>> by_leader;
  for (std::size_t i = 0; i < acks.size(); ++i) {
    const auto& a = acks[i];
    if (!leads_now(a.topic, a.partition, "")) {
      by_leader[{"", a.group}].push_back(i);
      continue;
    }
    auto refused = cluster_mode::partition_refusal(*state, cluster_->id(), a.topic, static_cast<std::int32_t>(a.partition));
    if (!refused || refused->leader_address.empty()) {
      return done(error(protocol::errc::not_leader, "input partition " + a.topic + "/" + std::to_string(a.partition) +
                                                        " has no leader to settle with now"));
    }
    by_leader[{refused->leader_address, a.group}].push_back(i);
  }
  struct pending {
    std::vector<bool> applied;
    std::size_t left = 0;
    std::optional<error> failed;
    std::function<void(result<std::vector<bool>>)> done;
  };
  auto p = std::make_shared<pending>();
  p->applied.assign(acks.size(), false);
  p->left = by_leader.size();
  p->done = std::move(done);
  if (p->left == 0) return p->done(std::move(p->applied));
  const std::string txid(id.raw());
  const auto give_up_at = std::chrono::steady_clock::now() + k_unknown_group_wait;
  for (auto& entry : by_leader) {
    const std::string address = entry.first.first;
    const std::string group = entry.first.second;
    const auto idx = entry.second;
    // Sends the entry's request (again, after UNKNOWN_GROUP: the same attempt, idempotent).
    auto send = std::make_shared<std::function<void()>>();
    auto answered = [this, p, idx, address, group, send, give_up_at](result<v1::Frame> r) {
      const std::string where = address.empty() ? "here" : address;
      if (r && r.value().has_error() && r.value().error().code() == v1::UNKNOWN_GROUP) {
        if (std::chrono::steady_clock::now() + k_unknown_group_retry < give_up_at) {
          auto timer = std::make_shared<boost::asio::steady_timer>(io_, k_unknown_group_retry);
          timer->async_wait([timer, send](boost::system::error_code) { (*send)(); });
          return;
        }
        if (!p->failed) {
          p->failed = error(protocol::errc::unknown_group,
                            "the input partition's leader (" + where + ") does not know consumer group '" + group +
                                "' (asked for " + std::to_string(k_unknown_group_wait.count()) +
                                " ms); the acks were not applied: " + r.value().error().message());
        }
      } else if (!r) {
        if (!p->failed) p->failed = r.error();
      } else if (r.value().has_delivery_results()) {
        const auto& res = r.value().delivery_results().results();
        for (std::size_t k = 0; k < idx.size(); ++k) {
          p->applied[idx[k]] = static_cast<int>(k) < res.size() && res[static_cast<int>(k)] == v1::ERROR_CODE_UNSPECIFIED;
        }
      } else if (r.value().has_error()) {
        // NOT_LEADER, NOT_ENOUGH_REPLICAS, ...: asked again (the same attempt: idempotent).
        if (!p->failed) {
          p->failed = error(static_cast<protocol::errc>(r.value().error().code()),
                            "the input partition's leader (" + where + "): " + r.value().error().message());
        }
      } else {
        if (!p->failed) p->failed = error(protocol::errc::internal, "unexpected answer from " + where);
      }
      // The entry is done: `send` and `answered` hold each other, let go of both (after this
      // call: a local settle may be answering from inside `send`).
      boost::asio::post(io_, [send] { *send = nullptr; });
      if (--p->left > 0) return;
      if (p->failed) return p->done(*p->failed);
      p->done(std::move(p->applied));
    };
    v1::Frame f;
    google::protobuf::RepeatedPtrField<v1::DeliveryRef>* refs = nullptr;
    consumer_groups::settle_kind kind{};
    std::uint32_t ms = 0;
    switch (step) {
      case tx_coordinator::settle_step::hold:
        kind = consumer_groups::settle_kind::extend;
        ms = static_cast<std::uint32_t>(tx_coordinator::ack_hold().count());
        f.mutable_extend()->set_group(entry.first.second);
        f.mutable_extend()->set_extend_ms(ms);
        f.mutable_extend()->set_tx(txid);
        refs = f.mutable_extend()->mutable_refs();
        break;
      case tx_coordinator::settle_step::ack:
        kind = consumer_groups::settle_kind::ack;
        f.mutable_ack()->set_group(entry.first.second);
        f.mutable_ack()->set_tx(txid);
        refs = f.mutable_ack()->mutable_refs();
        break;
      case tx_coordinator::settle_step::release:
        kind = consumer_groups::settle_kind::nack;  // delay 0: the group's retry schedule
        f.mutable_nack()->set_group(entry.first.second);
        f.mutable_nack()->set_tx(txid);
        refs = f.mutable_nack()->mutable_refs();
        break;
    }
    for (auto i : idx) {
      auto* r = refs->Add();
      r->set_topic(acks[i].topic);
      r->set_partition(acks[i].partition);
      r->set_offset(acks[i].offset);
      r->set_attempt(acks[i].attempt);
    }
    *send = [this, f = std::move(f), address, group, kind, ms, txid, answered, step]() {
#ifdef TXMQ_FAULT_HOOKS
      if (fake_unknown_group(step)) {
        v1::Frame unknown;
        unknown.mutable_error()->set_code(v1::UNKNOWN_GROUP);
        unknown.mutable_error()->set_message("no consumer group '" + group + "' (TXMQ_TEST_TX_ACK_UNKNOWN_GROUP)");
        return boost::asio::post(io_, [answered, unknown] { answered(unknown); });
      }
#else
      (void)step;
#endif
      if (address.empty()) {
        auto to = local_answer::make([answered](v1::Frame out) { answered(std::move(out)); });
        const auto& list = kind == consumer_groups::settle_kind::extend ? f.extend().refs()
                           : kind == consumer_groups::settle_kind::ack  ? f.ack().refs()
                                                                         : f.nack().refs();
        groups_->settle(to, 1, kind, group, list, ms, txid);
        return;
      }
      if (!peers_) return answered(error(protocol::errc::internal, "no replication to reach " + address));
      peers_->request(address, f, k_settle_timeout, answered);
    };
    (*send)();
  }
}

}  // namespace txmq::broker
