#pragma once

// A store that passes every call to another one: tests derive from it and override the few
// calls they hold up or corrupt (a gate before a scan, a damaged read), so each such store is
// its differences and not a copy of the whole interface.

#include <memory>
#include <utility>

#include "txmq/storage/store.h"

namespace txmq::broker::test {

class forwarding_store : public storage::store {
 public:
  explicit forwarding_store(std::unique_ptr<storage::store> inner) : inner_(std::move(inner)) {}

  void create_topic(storage::topic_config c, storage::completion<storage::topic_info> d) override {
    inner_->create_topic(std::move(c), std::move(d));
  }
  std::optional<storage::topic_info> topic(std::string_view n) const override { return inner_->topic(n); }
  std::vector<storage::topic_info> topics() const override { return inner_->topics(); }
  bool has_topic(std::string_view n) const override { return inner_->has_topic(n); }
  void set_topic_retention(std::string n, std::int64_t ms, std::uint64_t bytes,
                           storage::completion<storage::topic_info> d) override {
    inner_->set_topic_retention(std::move(n), ms, bytes, std::move(d));
  }
  void append(storage::append_request r, storage::completion<storage::append_result> d) override {
    inner_->append(std::move(r), std::move(d));
  }
  result<storage::read_result> read(const storage::read_request& r) const override { return inner_->read(r); }
  result<std::optional<storage::id_location>> find_id(const storage::message_id& id) const override {
    return inner_->find_id(id);
  }
  void prepare(storage::prepare_request r, storage::completion<storage::prepare_result> d) override {
    inner_->prepare(std::move(r), std::move(d));
  }
  void resolve(storage::resolve_request r, storage::completion<storage::resolve_result> d) override {
    inner_->resolve(std::move(r), std::move(d));
  }
  void record_checks(std::vector<storage::check_update> u, storage::completion<void> d) override {
    inner_->record_checks(std::move(u), std::move(d));
  }
  void mark_copied(storage::txid id, storage::completion<std::optional<storage::group_change_ref>> d) override {
    inner_->mark_copied(std::move(id), std::move(d));
  }
  result<std::optional<storage::tx_record>> find_tx(const storage::txid& id) const override { return inner_->find_tx(id); }
  result<std::vector<storage::tx_record>> due_checks(std::int64_t until, std::size_t limit, std::int64_t from) const override {
    return inner_->due_checks(until, limit, from);
  }
  result<std::vector<storage::tx_record>> list_txs(std::optional<storage::tx_state> s, std::size_t limit,
                                                   std::optional<storage::txid> after) const override {
    return inner_->list_txs(s, limit, after);
  }
  result<storage::tx_counts> count_unresolved_txs() const override { return inner_->count_unresolved_txs(); }
  void ensure_group(storage::group_info i, storage::group_start s, storage::completion<storage::group_state> d) override {
    inner_->ensure_group(std::move(i), s, std::move(d));
  }
  void update_group(storage::group_update u, storage::completion<storage::group_update_result> d) override {
    inner_->update_group(std::move(u), std::move(d));
  }
  result<storage::group_state> load_group(std::string_view n) const override { return inner_->load_group(n); }
  result<storage::group_state> load_group_partition(std::string_view n, std::string_view t, std::uint32_t p) const override {
    return inner_->load_group_partition(n, t, p);
  }
  std::vector<storage::group_info> groups() const override { return inner_->groups(); }
  result<std::vector<storage::dead_letter>> dead_letters(std::string_view g, std::size_t limit,
                                                         const std::optional<storage::message_ref>& after) const override {
    return inner_->dead_letters(g, limit, after);
  }
  result<std::vector<storage::due_delivery>> due_deliveries(std::int64_t until, std::size_t limit) const override {
    return inner_->due_deliveries(until, limit);
  }
  void put_webhook(v1::Webhook r, storage::completion<void> d) override { inner_->put_webhook(std::move(r), std::move(d)); }
  void delete_webhook(std::string id, storage::completion<bool> d) override {
    inner_->delete_webhook(std::move(id), std::move(d));
  }
  result<std::vector<v1::Webhook>> webhooks() const override { return inner_->webhooks(); }
  void record_webhook_attempts(std::vector<v1::WebhookAttempt> a, storage::completion<void> d) override {
    inner_->record_webhook_attempts(std::move(a), std::move(d));
  }
  result<std::vector<v1::WebhookAttempt>> webhook_attempts(const storage::webhook_attempts_query& q) const override {
    return inner_->webhook_attempts(q);
  }
  void expire_webhook_attempts(std::int64_t before, std::size_t limit, storage::completion<std::uint64_t> d) override {
    inner_->expire_webhook_attempts(before, limit, std::move(d));
  }
  void create_principal(storage::principal_record r, storage::completion<bool> d) override {
    inner_->create_principal(std::move(r), std::move(d));
  }
  void delete_principal(std::string n, storage::completion<bool> d) override {
    inner_->delete_principal(std::move(n), std::move(d));
  }
  result<std::vector<storage::principal_record>> principals() const override { return inner_->principals(); }
  void put_acl(storage::acl_entry e, storage::completion<bool> d) override { inner_->put_acl(std::move(e), std::move(d)); }
  void delete_acl(storage::acl_entry e, storage::completion<bool> d) override {
    inner_->delete_acl(std::move(e), std::move(d));
  }
  result<std::vector<storage::acl_entry>> acls() const override { return inner_->acls(); }
  void begin_epoch(std::string t, std::uint32_t p, std::uint32_t epoch, storage::completion<std::uint64_t> d) override {
    inner_->begin_epoch(std::move(t), p, epoch, std::move(d));
  }
  void replica_append(storage::replica_append_request r, storage::completion<std::uint64_t> d) override {
    inner_->replica_append(std::move(r), std::move(d));
  }
  void truncate(std::string t, std::uint32_t p, std::uint64_t offset, storage::completion<std::uint64_t> d) override {
    inner_->truncate(std::move(t), p, offset, std::move(d));
  }
  void restart_log(std::string t, std::uint32_t p, std::uint64_t start, std::uint32_t create_partitions,
                   storage::completion<std::uint64_t> d) override {
    inner_->restart_log(std::move(t), p, start, create_partitions, std::move(d));
  }
  result<std::vector<storage::epoch_entry>> leader_epochs(std::string_view t, std::uint32_t p) const override {
    return inner_->leader_epochs(t, p);
  }
  result<storage::raw_read> read_raw(const storage::read_request& r) const override { return inner_->read_raw(r); }
  result<storage::group_changes_read> group_changes(std::string_view t, std::uint32_t p, std::uint64_t from_seq,
                                                    std::size_t max) const override {
    return inner_->group_changes(t, p, from_seq, max);
  }
  result<v1::GroupSnapshot> group_snapshot(std::string_view t, std::uint32_t p) const override {
    return inner_->group_snapshot(t, p);
  }
  void apply_group_changes(std::string t, std::uint32_t p, std::vector<v1::GroupChange> c,
                           storage::completion<std::uint64_t> d) override {
    inner_->apply_group_changes(std::move(t), p, std::move(c), std::move(d));
  }
  void install_group_snapshot(std::string t, std::uint32_t p, v1::GroupSnapshot s,
                              storage::completion<std::uint64_t> d) override {
    inner_->install_group_snapshot(std::move(t), p, std::move(s), std::move(d));
  }
  void enforce_retention(storage::completion<storage::retention_result> d) override { inner_->enforce_retention(std::move(d)); }
  result<void> compact() override { return inner_->compact(); }
  result<std::uint64_t> count_dedupe_entries() const override { return inner_->count_dedupe_entries(); }
  storage::store_stats stats() const override { return inner_->stats(); }
  storage::store_health health() const override { return inner_->health(); }
  void close() override { inner_->close(); }

 protected:
  storage::store& inner() const { return *inner_; }

 private:
  std::unique_ptr<storage::store> inner_;
};

}  // namespace txmq::broker::test
