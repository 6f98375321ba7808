#include "tx_support.h"

#include <stdexcept>
#include <thread>

#include "txmq/client/connection.h"
#include "txmq/consumer/consumer.h"

namespace txmq::test {

std::vector<v1::TxInfo> list_txs(const std::string& address, v1::TxState state) {
  auto conn = client::connection::connect({.address = address, .client_id = "test-tx-list"});
  if (!conn) throw std::runtime_error("connect: " + conn.error().to_string());
  std::vector<v1::TxInfo> out;
  std::string after;
  do {
    v1::Frame request;
    request.mutable_tx_list()->set_state(state);
    request.mutable_tx_list()->set_limit(10000);
    request.mutable_tx_list()->set_after_txid(after);
    auto answer = conn.value()->request(request);
    if (!answer) throw std::runtime_error("TxList: " + answer.error().to_string());
    for (auto& t : answer.value().tx_list_response().txs()) out.push_back(t);
    after = answer.value().tx_list_response().next_after_txid();
  } while (!after.empty());
  return out;
}

std::size_t wait_all_resolved(const std::string& address, std::chrono::milliseconds deadline) {
  const auto until = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    const auto left = list_txs(address, v1::PREPARED).size();
    if (left == 0 || std::chrono::steady_clock::now() >= until) return left;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling the broker's state
  }
}

std::vector<v1::Message> drain_topic(const std::string& address, const std::string& topic, const std::string& group,
                                     std::chrono::milliseconds quiet) {
  consumer::consumer_options o;
  o.connection.address = address;
  o.connection.client_id = "test-drain";
  o.group = group;
  o.topics = {topic};
  consumer::consumer c(o);
  std::vector<v1::Message> out;
  for (;;) {
    auto batch = c.fetch(1000, quiet);
    if (!batch) throw std::runtime_error("fetch: " + batch.error().to_string());
    if (batch.value().empty()) return out;
    std::vector<consumer::delivery_ref> refs;
    for (auto& d : batch.value()) {
      refs.push_back(d.ref());
      out.push_back(d.message);
    }
    if (auto r = c.ack(refs); !r) throw std::runtime_error("ack: " + r.error().to_string());
  }
}

}  // namespace txmq::test
