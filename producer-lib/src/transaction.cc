#include "txmq/producer/transaction.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "txmq/common/backoff.h"
#include "txmq/protocol/partitioner.h"
#include "wire_message.h"

namespace txmq::producer {
namespace {

using clock = std::chrono::steady_clock;
using client::errc;
using client::error;

v1::TxOutcome to_wire(tx_decision d) {
  switch (d) {
    case tx_decision::commit: return v1::COMMIT;
    case tx_decision::rollback: return v1::ROLLBACK;
    case tx_decision::unknown: return v1::UNKNOWN;
  }
  return v1::UNKNOWN;
}

}  // namespace

const char* to_string(tx_decision d) noexcept {
  switch (d) {
    case tx_decision::commit: return "commit";
    case tx_decision::rollback: return "rollback";
    case tx_decision::unknown: return "unknown";
  }
  return "unknown";
}

// Where a transaction lives in a cluster (docs/cluster.md "Transactions"): the partition of its
// first message, keyed by its key, else by its id, as the broker computes it.
struct home_route {
  std::string topic;
  std::string key;  // the key, or the message id when keyless
};

struct transactional_producer::impl : std::enable_shared_from_this<transactional_producer::impl> {
  transactional_producer_options options;
  std::shared_ptr<client::connection> conn;
  std::atomic<std::uint64_t> answered_commit{0}, answered_rollback{0}, answered_unknown{0};
  // Cluster mode: the last Metadata (nullopt: not asked yet; cluster() false: a single broker,
  // everything over `conn` as before) and one connection per node, each answering check-backs
  // (the leader of a transaction's home partition checks it, whichever node that is).
  std::mutex mu;
  std::optional<v1::MetadataResponse> metadata;
  std::map<std::string, std::shared_ptr<client::connection>> nodes;

  std::shared_ptr<client::connection> node(const std::string& address) {
    std::lock_guard lock(mu);
    auto& c = nodes[address];
    if (!c) {
      auto o = conn->options();
      o.address = address;
      o.fail_while_unreachable = true;  // a dead leader fails at once: Metadata, then the new one
      c = std::make_shared<client::connection>(std::move(o));
      std::weak_ptr<impl> weak = weak_from_this();
      c->set_request_handler([weak](const v1::Frame& frame) -> std::optional<v1::Frame> {
        auto self = weak.lock();
        if (!self) return std::nullopt;
        return self->answer_check(frame);
      });
    }
    return c;
  }

  // Reads Metadata (over `conn`, or a node connection when it is down) and connects to every
  // node it names. A broker that does not know Metadata counts as a single broker.
  void refresh(std::chrono::milliseconds timeout) {
    v1::Frame frame;
    frame.mutable_metadata();
    auto via = conn;
    if (!via->is_connected()) {
      std::lock_guard lock(mu);
      for (auto& [a, c] : nodes) {
        if (c->is_connected()) {
          via = c;
          break;
        }
      }
    }
    auto r = via->request(frame, timeout);
    if (!r) {
      if (r.error().is(protocol::errc::unknown_request)) {
        std::lock_guard lock(mu);
        metadata.emplace();  // cluster() false
      }
      return;
    }
    if (!r.value().has_metadata_response()) return;
    auto m = std::move(*r.value().mutable_metadata_response());
    if (m.cluster()) {
      for (auto& n : m.nodes()) {
        if (!n.address().empty()) (void)node(n.address());
      }
    }
    std::lock_guard lock(mu);
    metadata = std::move(m);
  }

  // The connection to the leader of the route's partition; `conn` on a single broker or when
  // no leader is known (the broker then answers NOT_LEADER, and the next try reads Metadata).
  std::shared_ptr<client::connection> target(const home_route* route) {
    if (!route) return conn;
    std::string address;
    {
      std::lock_guard lock(mu);
      if (!metadata || !metadata->cluster()) return conn;
      for (auto& t : metadata->topics()) {
        if (t.name() != route->topic || t.partitions() == 0 || t.partition_info_size() != static_cast<int>(t.partitions())) {
          continue;
        }
        address = t.partition_info(static_cast<int>(protocol::partition_for_key(route->key, t.partitions()))).leader_address();
      }
    }
    return address.empty() ? conn : node(address);
  }

  // Sends `request` until it gets an answer that is not a retriable error, or request_timeout
  // has passed since the first try. Prepare and EndTx are idempotent per txid, so a retry after
  // a lost connection is safe. In a cluster each try goes to the leader of the transaction's
  // home partition, and a retriable failure (NOT_LEADER, a lost connection) reads Metadata again.
  client::result<v1::Frame> request_with_retries(const v1::Frame& request, const home_route* route = nullptr) {
    const auto deadline = clock::now() + options.request_timeout;
    common::backoff retry_delay(options.retry_backoff_initial, options.retry_backoff_max);
    if (route) {
      bool known = false;
      {
        std::lock_guard lock(mu);
        known = metadata.has_value();
      }
      if (!known) refresh(options.request_timeout);
    }
    for (int attempt = 1;; ++attempt) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
      auto answer = target(route)->request(request, std::max(left, std::chrono::milliseconds(1)));
      if (answer || !answer.error().retriable()) return answer;
      bool cluster = false;
      {
        std::lock_guard lock(mu);
        cluster = metadata && metadata->cluster();
      }
      if (route && cluster) {
        refresh(std::max(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()),
                         std::chrono::milliseconds(1)));
      }
      const auto delay = retry_delay.next();
      if (clock::now() + delay >= deadline) {
        return error(answer.error().code, answer.error().message + " (after " + std::to_string(attempt) + " attempts in " +
                                              std::to_string(options.request_timeout.count()) + " ms)");
      }
      std::this_thread::sleep_for(delay);  // back-off between retries, not synchronisation
    }
  }

  std::optional<v1::Frame> answer_check(const v1::Frame& frame) {
    if (!frame.has_check_tx()) return std::nullopt;  // the connection answers UNKNOWN_REQUEST itself
    const auto& check = frame.check_tx();
    tx_decision decision = tx_decision::unknown;
    auto txid = protocol::uuid::from_bytes(check.txid());
    if (txid && options.checker) {
      tx_check c;
      c.txid = txid.value();
      c.producer_group = check.producer_group();
      c.messages.assign(check.messages().begin(), check.messages().end());
      c.check_number = check.check_number();
      c.prepared_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(check.prepared_ms()));
      try {
        decision = options.checker(c);
      } catch (const std::exception& e) {
        if (options.connection.log) options.connection.log(std::string("transaction checker failed: ") + e.what());
        decision = tx_decision::unknown;
      }
    }
    (decision == tx_decision::commit     ? answered_commit
     : decision == tx_decision::rollback ? answered_rollback
                                         : answered_unknown)
        .fetch_add(1, std::memory_order_relaxed);
    v1::Frame answer;
    answer.mutable_check_tx_result()->set_txid(check.txid());
    answer.mutable_check_tx_result()->set_outcome(to_wire(decision));
    return answer;
  }
};

struct transaction::data {
  std::shared_ptr<transactional_producer::impl> producer;
  protocol::txid id;
  state current = state::open;
  std::vector<outgoing_message> messages;
  std::string ack_group;
  bool mixed_ack_groups = false;
  std::vector<consumed_ref> acks;
  home_route home;  // set by prepare()

  client::result<v1::EndTxResponse> end(tx_decision decision) {
    if (current != state::prepared) {
      return error(errc::invalid_argument, std::string("cannot ") + to_string(decision) + " transaction " + id.to_string() +
                                               ": it is not prepared");
    }
    v1::Frame request;
    request.mutable_end_tx()->set_txid(std::string(id.raw()));
    request.mutable_end_tx()->set_outcome(to_wire(decision));
    auto answer = producer->request_with_retries(request, &home);
    if (!answer) {
      // TX_ALREADY_RESOLVED is final; anything else leaves the outcome to the check-back.
      if (answer.error().is(protocol::errc::tx_already_resolved)) current = state::failed;
      return answer.error();
    }
    if (!answer.value().has_end_tx_response()) {
      return error(errc::unexpected_response, "the broker answered EndTx for " + id.to_string() + " with frame body " +
                                                  std::to_string(static_cast<int>(answer.value().body_case())));
    }
    current = decision == tx_decision::commit ? state::committed : state::rolled_back;
    return std::move(*answer.value().mutable_end_tx_response());
  }
};

transaction::transaction(std::unique_ptr<data> d) : d_(std::move(d)) {}
transaction::transaction(transaction&&) noexcept = default;
transaction& transaction::operator=(transaction&&) noexcept = default;
transaction::~transaction() = default;

const protocol::txid& transaction::id() const noexcept { return d_->id; }
transaction::state transaction::current_state() const noexcept { return d_->current; }
const std::vector<outgoing_message>& transaction::messages() const noexcept { return d_->messages; }

transaction& transaction::add(outgoing_message message) {
  // The id is fixed now, so that a retried Prepare carries the same ids.
  if (!message.id) message.id = protocol::uuid::make_v7();
  d_->messages.push_back(std::move(message));
  return *this;
}

transaction& transaction::add_ack(const std::string& group, consumed_ref ref) {
  if (d_->acks.empty()) {
    d_->ack_group = group;
  } else if (group != d_->ack_group) {
    d_->mixed_ack_groups = true;  // refused at prepare(): the wire carries one group
  }
  d_->acks.push_back(std::move(ref));
  return *this;
}

client::result<void> transaction::prepare() {
  auto& d = *d_;
  if (d.current != state::open) {
    return error(errc::invalid_argument, "transaction " + d.id.to_string() + " was already prepared");
  }
  if (d.messages.empty()) {
    return error(errc::invalid_argument, "transaction " + d.id.to_string() + " has no messages to prepare");
  }
  if (d.mixed_ack_groups) {
    return error(errc::invalid_argument, "transaction " + d.id.to_string() + " acks deliveries of more than one consumer group");
  }
  const auto& options = d.producer->options;
  if (options.connection.producer_group.empty()) {
    return error(errc::invalid_argument,
                 "a transactional producer needs a producer group (connection.producer_group): the broker asks it "
                 "about transactions it cannot settle");
  }
  v1::Frame request;
  auto* prepare = request.mutable_prepare();
  prepare->set_txid(std::string(d.id.raw()));
  prepare->set_producer_group(options.connection.producer_group);
  for (std::size_t i = 0; i < d.messages.size(); ++i) {
    if (d.messages[i].topic.empty()) {
      return error(errc::invalid_argument, "message " + std::to_string(i) + " of transaction " + d.id.to_string() + " has no topic");
    }
    *prepare->add_messages() = detail::to_wire(outgoing_message(d.messages[i]), *d.messages[i].id);
  }
  if (options.tx_timeout.count() > 0) prepare->set_tx_timeout_ms(static_cast<std::uint32_t>(options.tx_timeout.count()));
  if (!d.acks.empty()) {
    prepare->set_ack_group(d.ack_group);
    for (const auto& a : d.acks) {
      auto* ref = prepare->add_acks();
      ref->set_topic(a.topic);
      ref->set_partition(a.partition);
      ref->set_offset(a.offset);
      if (a.attempt != 0) ref->set_attempt(a.attempt);
    }
  }
  const auto& first = prepare->messages(0);
  d.home = {first.topic(), first.has_key() ? first.key() : first.id()};
  auto answer = d.producer->request_with_retries(request, &d.home);
  if (!answer) return answer.error();
  if (!answer.value().has_prepare_response()) {
    return error(errc::unexpected_response, "the broker answered Prepare for " + d.id.to_string() + " with frame body " +
                                                std::to_string(static_cast<int>(answer.value().body_case())));
  }
  d.current = state::prepared;
  return outcome::success();
}

client::result<commit_result> transaction::commit() {
  auto answer = d_->end(tx_decision::commit);
  if (!answer) return answer.error();
  commit_result result;
  result.already_resolved = answer.value().already_resolved();
  for (int i = 0; i < answer.value().positions_size(); ++i) {
    const auto& p = answer.value().positions(i);
    const auto& id = static_cast<std::size_t>(i) < d_->messages.size() ? *d_->messages[static_cast<std::size_t>(i)].id
                                                                       : protocol::message_id{};
    result.positions.push_back(send_result{id, p.partition(), p.offset(), p.duplicate()});
  }
  return result;
}

client::result<void> transaction::rollback() {
  auto answer = d_->end(tx_decision::rollback);
  if (!answer) return answer.error();
  return outcome::success();
}

transactional_producer::transactional_producer(transactional_producer_options options) : impl_(std::make_shared<impl>()) {
  impl_->options = std::move(options);
  auto connection_options = impl_->options.connection;
  connection_options.request_handler_threads = std::max<std::size_t>(impl_->options.checker_threads, 1);
  impl_->conn = std::make_shared<client::connection>(std::move(connection_options));
  // The handler holds the impl weakly: after the producer is gone a late check is not answered
  // (the broker counts it as undecided and asks again).
  std::weak_ptr<impl> weak = impl_;
  impl_->conn->set_request_handler([weak](const v1::Frame& frame) -> std::optional<v1::Frame> {
    auto self = weak.lock();
    if (!self) return std::nullopt;
    return self->answer_check(frame);
  });
}

transactional_producer::~transactional_producer() { close(); }

transaction transactional_producer::begin() {
  auto d = std::make_unique<transaction::data>();
  d->producer = impl_;
  // Time-ordered (UUIDv7), so the broker's transaction records and the barrier table's primary key
  // take each new txid near the previous one instead of at a random place (issue #15).
  d->id = protocol::uuid::make_v7();
  return transaction(std::move(d));
}

client::result<tx_result> transactional_producer::send_in_transaction(
    std::vector<outgoing_message> messages, const std::function<tx_decision(const transaction&)>& local_tx) {
  auto tx = begin();
  for (auto& m : messages) tx.add(std::move(m));
  if (auto prepared = tx.prepare(); !prepared) return prepared.error();
  tx_result result;
  result.txid = tx.id();
  try {
    result.decision = local_tx(tx);
  } catch (...) {
    // Best effort: if the rollback does not reach the broker, the check-back asks the checker,
    // which knows the local transaction did not commit.
    (void)tx.rollback();
    throw;
  }
  auto with_decision = [&](const error& e) {
    return error(e.code, e.message + " (the local transaction said " + to_string(result.decision) + " for " +
                             tx.id().to_string() + "; the broker's check-back will settle it)");
  };
  if (result.decision == tx_decision::commit) {
    auto committed = tx.commit();
    if (!committed) return with_decision(committed.error());
    result.committed = std::move(committed).value();
  } else if (result.decision == tx_decision::rollback) {
    if (auto rolled = tx.rollback(); !rolled) return with_decision(rolled.error());
  }
  return result;
}

transactional_producer::check_counts transactional_producer::checks_answered() const noexcept {
  return {impl_->answered_commit.load(), impl_->answered_rollback.load(), impl_->answered_unknown.load()};
}

const std::shared_ptr<client::connection>& transactional_producer::conn() const noexcept { return impl_->conn; }

void transactional_producer::close() {
  if (!impl_) return;
  if (impl_->conn) impl_->conn->close();
  std::map<std::string, std::shared_ptr<client::connection>> nodes;
  {
    std::lock_guard lock(impl_->mu);
    nodes.swap(impl_->nodes);
  }
  for (auto& [a, c] : nodes) c->close();
}

}  // namespace txmq::producer
