#include "client_workload.h"

#include <random>

#include "eventually.h"
#include "fault_support.h"
#include "tx_support.h"

namespace txmq::test {

using namespace std::chrono_literals;

std::string workload_result::extra() const {
  return "deliveries=" + std::to_string(deliveries) + " send_failures=" + std::to_string(send_failures) +
         " tx_total=" + std::to_string(tx_total) + " tx_committed_locally=" + std::to_string(tx_committed_locally) +
         " tx_published=" + std::to_string(tx_published) + " tx_missing=" + std::to_string(tx_missing) +
         " tx_against_local=" + std::to_string(tx_against) + " tx_doubled=" + std::to_string(tx_doubled) +
         " tx_request_errors=" + std::to_string(tx_request_errors) + " unresolved=" + std::to_string(unresolved) +
         " client_connects=" + std::to_string(client_connects) + " client_losses=" + std::to_string(client_losses);
}

client_workload::client_workload(const std::string& address, const std::string& name) : name_(name) {
  client::connection_options conn;
  conn.address = address;
  conn.request_timeout = 3s;
  conn.connect_timeout = 2s;
  conn.reconnect_backoff_max = 500ms;
  conn.dead_link_timeout = 3s;  // the faults outlast it: every client notices and reconnects
  conn.log = [this](std::string_view text) {
    if (text.starts_with("connected to")) ++connects_;
    if (text.find("lost") != std::string_view::npos) ++losses_;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_);
    std::lock_guard lock(mu_);
    log_.push_back(std::to_string(ms.count()) + " ms: " + std::string(text));
    if (log_.size() > 200) log_.pop_front();
  };

  consumer::consumer_options co;
  co.connection = conn;
  co.group = name;
  co.topics = {name};
  co.concurrency = 2;
  co.max_wait = 200ms;
  // The consumer's own lines (failed fetches, acks, lost leases) in the same tail, prefixed.
  co.log = [this](std::string_view text) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_);
    std::lock_guard lock(mu_);
    log_.push_back(std::to_string(ms.count()) + " ms: consumer: " + std::string(text));
    if (log_.size() > 200) log_.pop_front();
  };
  consumer_ = std::make_unique<consumer::consumer>(co);
  consumer_thread_ = std::thread([this] {
    auto handler = [this](const consumer::delivery& d) -> consumer::handler_result {
      std::lock_guard lock(mu_);
      ++deliveries_;
      consumed_.insert(d.message.body());
      return outcome::success();
    };
    while (!stop_consumer_.stop_requested()) {
      auto ended = consumer_->run(handler, stop_consumer_.get_token());
      if (!ended) {
        // run() ends on an error it does not retry; say which (once a second at most), then run again.
        const auto now = std::chrono::steady_clock::now();
        if (now - last_run_error_ >= std::chrono::seconds(1)) {
          last_run_error_ = now;
          const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - started_);
          std::lock_guard lock(mu_);
          log_.push_back(std::to_string(ms.count()) + " ms: consumer run ended: " + ended.error().to_string());
          if (log_.size() > 200) log_.pop_front();
        }
      }
    }
  });

  producer::producer_options po;
  po.connection = conn;
  po.linger = 1ms;
  po.request_timeout = 3s;
  po.delivery_timeout = 120s;
  producer_ = std::make_unique<producer::producer>(po);
  producer_thread_ = std::thread([this] {
    while (!stop_.stop_requested()) {
      const std::string body = name_ + "-" + std::to_string(next_++);
      {
        std::lock_guard lock(mu_);
        sent_.insert(body);
      }
      producer_->async_send({name_, std::nullopt, {}, body, std::nullopt, std::nullopt},
                            [this, body](client::result<producer::send_result> r) {
                              std::lock_guard lock(mu_);
                              if (r) {
                                acked_.insert(body);
                              } else {
                                ++send_failures_;
                              }
                            });
      std::this_thread::sleep_for(2ms);  // the stream's pace, about 500 messages a second
    }
  });

  auto tx_conn = conn;
  tx_conn.client_id = name + "-tx";
  tx_conn.producer_group = name + "-tx";
  txp_ = std::make_unique<producer::transactional_producer>(producer::transactional_producer_options{
      .connection = tx_conn,
      .checker =
          [this](const producer::tx_check& check) {
            std::lock_guard lock(mu_);
            auto it = local_.find(check.txid.to_string());
            return it == local_.end() ? producer::tx_decision::unknown : it->second;
          },
      .request_timeout = 3s});
  tx_thread_ = std::thread([this] {
    std::mt19937 rng(13);
    while (!stop_.stop_requested()) {
      auto tx = txp_->begin();
      const std::string id = tx.id().to_string();
      tx.add({name_ + "-tx", std::nullopt, {}, id, std::nullopt, std::nullopt});
      if (!tx.prepare()) {
        std::lock_guard lock(mu_);
        ++tx_errors_;
        // The broker may hold it prepared: the local outcome of a transaction that never ran
        // is rollback, and the checker says so.
        local_[id] = producer::tx_decision::rollback;
        continue;
      }
      const auto decision = rng() % 4 == 3 ? producer::tx_decision::rollback : producer::tx_decision::commit;
      {
        std::lock_guard lock(mu_);
        local_[id] = decision;  // the local commit point
      }
      auto end = decision == producer::tx_decision::commit ? tx.commit().has_value() : tx.rollback().has_value();
      if (!end) {
        std::lock_guard lock(mu_);
        ++tx_errors_;  // left to the check-back
      }
      std::this_thread::sleep_for(10ms);  // the transactions' pace
    }
  });
}

client_workload::~client_workload() {
  stop_threads();
  if (producer_) producer_->close();
  if (txp_) txp_->close();
}

void client_workload::stop_threads() {
  stop_.request_stop();
  stop_consumer_.request_stop();
  if (producer_thread_.joinable()) producer_thread_.join();
  if (tx_thread_.joinable()) tx_thread_.join();
  if (consumer_thread_.joinable()) consumer_thread_.join();
}

std::string client_workload::log_tail() const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& line : log_) out += line + "\n";
  return out;
}

std::size_t client_workload::acknowledged() const {
  std::lock_guard lock(mu_);
  return acked_.size();
}

std::size_t client_workload::consumed() const {
  std::lock_guard lock(mu_);
  return consumed_.size();
}

workload_result client_workload::finish(const std::string& verify_address, std::chrono::seconds deadline) {
  workload_result out;
  stop_.request_stop();
  if (producer_thread_.joinable()) producer_thread_.join();
  if (tx_thread_.joinable()) tx_thread_.join();
  (void)producer_->flush(deadline);
  out.all_consumed = eventually(
      [&] {
        std::lock_guard lock(mu_);
        for (const auto& b : acked_) {
          if (!consumed_.contains(b)) return false;
        }
        return true;
      },
      deadline);
  stop_consumer_.request_stop();
  if (consumer_thread_.joinable()) consumer_thread_.join();
  producer_->close();

  // Every transaction settled (by its EndTx or the check-back), then what consumers see.
  out.unresolved = wait_all_resolved(verify_address, deadline);
  std::map<std::string, int> published;
  for (auto& m : drain_topic(verify_address, name_ + "-tx", "verify")) ++published[m.body()];
  txp_->close();

  std::lock_guard lock(mu_);
  for (const auto& [id, d] : local_) {
    const bool is_published = published.contains(id);
    if (d == producer::tx_decision::commit) {
      ++out.tx_committed_locally;
      out.tx_missing += is_published ? 0 : 1;
    } else {
      out.tx_against += is_published ? 1 : 0;
    }
  }
  for (const auto& [id, n] : published) {
    if (!local_.contains(id)) ++out.tx_against;
    out.tx_doubled += n > 1 ? 1 : 0;
  }
  out.tx_total = local_.size();
  out.tx_published = published.size();
  out.tx_request_errors = tx_errors_;
  const auto counts = count_outcome(sent_, acked_, consumed_);
  out.acknowledged = counts.acknowledged;
  out.consumed = counts.consumed;
  out.lost = counts.lost;
  out.invented = counts.invented;
  out.deliveries = deliveries_;
  out.send_failures = send_failures_;
  out.client_connects = connects_.load();
  out.client_losses = losses_.load();
  return out;
}

}  // namespace txmq::test
