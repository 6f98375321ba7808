// The operator's view of transactions: TxList and TxShow.

#include "tx/tx_coordinator.h"

#include <algorithm>
#include <iterator>

#include "request_checks.h"
#include "tx/tx_names.h"

namespace txmq::broker {

using detail::wire_resolver;
using detail::wire_state;
using storage::tx_state;

namespace {

constexpr std::uint32_t k_default_list = 100;
// TxList reads at most this many records per request; the answer says where to continue.
constexpr std::size_t k_list_scan_budget = 100'000;

// PREPARED and ABANDONED together in txid order (TxList without a state), each read through
// the store's index of unresolved transactions instead of every record: the `limit` smallest
// txids after `after` of both lists (a shorter answer means both ended).
result<std::vector<storage::tx_record>> unresolved_page(const storage::store& store, std::size_t limit,
                                                        std::optional<storage::txid> after) {
  TXMQ_TRY(auto prepared, store.list_txs(tx_state::prepared, limit, after));
  TXMQ_TRY(auto abandoned, store.list_txs(tx_state::abandoned, limit, after));
  std::vector<storage::tx_record> out;
  out.reserve(prepared.size() + abandoned.size());
  std::merge(std::make_move_iterator(prepared.begin()), std::make_move_iterator(prepared.end()),
             std::make_move_iterator(abandoned.begin()), std::make_move_iterator(abandoned.end()),
             std::back_inserter(out),
             [](const storage::tx_record& x, const storage::tx_record& y) { return x.id.raw() < y.id.raw(); });
  if (out.size() > limit) out.resize(limit);
  return out;
}

}  // namespace

std::unordered_set<storage::txid, protocol::uuid_hash> tx_coordinator::open_txids() const {
  std::unordered_set<storage::txid, protocol::uuid_hash> out;
  for (auto& [corr, o] : open_) out.insert(o.id);
  return out;
}

void tx_coordinator::fill_info(const storage::tx_record& rec, v1::TxInfo& out, bool with_messages,
                               const std::unordered_set<storage::txid, protocol::uuid_hash>& open) {
  out.set_txid(std::string(rec.id.raw()));
  out.set_producer_group(rec.producer_group);
  out.set_state(wire_state(rec.state));
  std::vector<std::string> topics, keys;
  for (auto& m : rec.messages) {
    if (std::find(topics.begin(), topics.end(), m.topic()) == topics.end()) topics.push_back(m.topic());
    if (m.has_key() && std::find(keys.begin(), keys.end(), m.key()) == keys.end()) keys.push_back(m.key());
  }
  for (auto& t : topics) out.add_topics(t);
  for (auto& k : keys) out.add_keys(k);
  out.set_messages(static_cast<std::uint32_t>(rec.messages.size()));
  out.set_prepared_ms(rec.prepared_ms);
  out.set_check_count(rec.check_count);
  out.set_next_check_ms(rec.next_check_ms);
  out.set_resolved_ms(rec.resolved_ms);
  out.set_resolved_by(wire_resolver(rec.resolved_by));
  out.set_acks(static_cast<std::uint32_t>(rec.acks.size()));
  out.set_check_open(open.count(rec.id) > 0);
  if (with_messages) {
    for (auto& m : rec.messages) *out.add_message_list() = m;
  }
}

void tx_coordinator::list(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::TxListRequest& req) {
  const std::uint32_t limit = list_limit(req.limit(), k_default_list);
  std::optional<storage::txid> after;
  if (!req.after_txid().empty()) {
    auto a = protocol::uuid::from_bytes(req.after_txid());
    if (!a) return c->respond_error(corr, v1::INVALID_ARGUMENT, "after_txid must be 16 bytes");
    after = a.value();
  }
  std::optional<tx_state> state;
  bool unresolved_only = false;
  if (!req.all_states()) {
    switch (req.state()) {
      case v1::TX_STATE_UNSPECIFIED: unresolved_only = true; break;
      case v1::PREPARED: state = tx_state::prepared; break;
      case v1::COMMITTED: state = tx_state::committed; break;
      case v1::ROLLED_BACK: state = tx_state::rolled_back; break;
      case v1::ABANDONED: state = tx_state::abandoned; break;
      default: return c->respond_error(corr, v1::INVALID_ARGUMENT, "unknown transaction state in TxList");
    }
  }
  // Up to k_list_scan_budget records read: on the admin worker (admin_reads.h), with a copy of
  // what it needs of the io thread's state (the open checks).
  // In a cluster, the home partitions led here: a follower's copy of a record may lag (a
  // commit not yet fetched), so each transaction is listed by its home leader only.
  std::optional<std::map<std::pair<std::string, std::uint32_t>, std::int64_t>> led;
  if (cluster_.led) led = cluster_.led();
  std::weak_ptr<responder> weak = c;
  reads_.run<v1::Frame>(
      [&store = store_, &reads = reads_, max_frame = settings_.max_frame_bytes, open = open_txids(), state,
       unresolved_only, topic = req.topic(), limit, after, led = std::move(led)]() mutable -> result<v1::Frame> {
        v1::Frame out;
        auto* resp = out.mutable_tx_list_response();
        if (led) {
          for (const auto& [k, epoch] : *led) {
            auto* s = resp->add_served();
            s->set_topic(k.first);
            s->set_partition(k.second);
            s->set_leader_epoch(epoch);
          }
        }
        std::size_t scanned = 0;
        // Many keys or topics make a TxInfo large: the answer ends before it would pass the
        // frame limit, and its cursor is the last transaction it holds.
        answer_budget budget(max_frame);
        bool full = false;
        constexpr std::size_t page_size = 1000;
        for (;;) {
          if (reads.stopping()) return error(protocol::errc::shutting_down, "the broker is shutting down");
          auto page = unresolved_only ? unresolved_page(store, page_size, after) : store.list_txs(state, page_size, after);
          if (!page) return error(page.error().code, "listing transactions failed: " + page.error().message);
          for (auto& rec : page.value()) {
            ++scanned;
            const bool wanted =
                (!led || rec.home_topic.empty() || led->contains({rec.home_topic, rec.home_partition})) &&
                (!unresolved_only || rec.state == tx_state::prepared || rec.state == tx_state::abandoned) &&
                (topic.empty() || std::any_of(rec.messages.begin(), rec.messages.end(),
                                              [&](const v1::Message& m) { return m.topic() == topic; }));
            if (wanted) {
              v1::TxInfo info;
              fill_info(rec, info, false, open);
              if (!budget.take(info.ByteSizeLong())) {
                full = true;
                break;
              }
              *resp->add_txs() = std::move(info);
            }
            after = rec.id;
            if (static_cast<std::uint32_t>(resp->txs_size()) >= limit) break;
          }
          if (full || static_cast<std::uint32_t>(resp->txs_size()) >= limit || scanned >= k_list_scan_budget) {
            if (after) resp->set_next_after_txid(std::string(after->raw()));
            break;
          }
          if (page.value().size() < page_size) break;
        }
        return out;
      },
      answer_admin_read(weak, corr));
}

void tx_coordinator::show(const std::shared_ptr<responder>& c, std::uint64_t corr, const v1::TxShowRequest& req) {
  auto id = protocol::uuid::from_bytes(req.txid());
  if (!id) return c->respond_error(corr, v1::INVALID_ARGUMENT, "TxShow needs a 16-byte txid");
  auto rec = store_.find_tx(id.value());
  if (!rec) {
    return c->respond_error(corr, wire_code(rec.error()), "reading transaction failed: " + rec.error().message);
  }
  if (!rec.value()) {
    return c->respond_error(corr, v1::UNKNOWN_TX,
                            "no transaction " + id.value().to_string() +
                                " (never prepared on this broker, or resolved longer than dedupe_window ago)");
  }
  v1::Frame out;
  out.set_correlation_id(corr);
  fill_info(*rec.value(), *out.mutable_tx_info(), true, open_txids());
  c->respond(std::move(out));
}

}  // namespace txmq::broker
