// Topics: creation inside the writer, lookup and listing for readers.

#include "rocksdb_store.h"

namespace txmq::storage::detail {

std::shared_ptr<topic_state> rocksdb_store::find_topic(std::string_view name) const {
  std::shared_lock lk(topics_mu_);
  auto it = topics_.find(std::string(name));
  return it == topics_.end() ? nullptr : it->second;
}

std::shared_ptr<topic_state> rocksdb_store::find_topic(std::uint32_t id) const {
  std::shared_lock lk(topics_mu_);
  auto it = topics_by_id_.find(id);
  return it == topics_by_id_.end() ? nullptr : it->second;
}

std::shared_ptr<topic_state> rocksdb_store::writer_topic(group_ctx&, std::string_view name) {
  auto it = writer_topics_.find(std::string(name));
  return it == writer_topics_.end() ? nullptr : it->second;
}

std::shared_ptr<topic_state> rocksdb_store::make_topic(group_ctx& ctx, const topic_config& config) {
  auto t = std::make_shared<topic_state>();
  t->record.set_id(next_topic_id_++);
  t->record.set_name(config.name);
  t->record.set_partitions(config.partitions);
  t->record.set_retention_ms(config.retention_ms);
  t->record.set_retention_bytes(config.retention_bytes);
  t->record.set_created_ms(ctx.now_ms);
  t->retention_ms.store(config.retention_ms, std::memory_order_relaxed);
  t->retention_bytes.store(config.retention_bytes, std::memory_order_relaxed);
  t->created_ms = ctx.now_ms;
  ctx.put(cf_default, topic_key(config.name), t->record.SerializeAsString());
  for (std::uint32_t p = 0; p < config.partitions; ++p) {
    auto ps = std::make_unique<partition_state>();
    ctx.put(cf_default, partition_meta_key(t->record.id(), p), encode(ps->meta));
    t->partitions.push_back(std::move(ps));
  }
  ctx.new_topics.push_back(t);
  writer_topics_[config.name] = t;
  return t;
}

result<std::shared_ptr<topic_state>> rocksdb_store::writer_topic_or_create(group_ctx& ctx, std::string_view name,
                                                                          std::optional<std::uint32_t> partitions) {
  if (!valid_name(name, k_max_topic_name)) return errc::invalid_argument;
  if (auto t = writer_topic(ctx, name)) return t;
  if (!partitions) return errc::unknown_topic;
  if (*partitions == 0 || *partitions > k_max_partitions) return errc::invalid_argument;
  topic_config config;
  config.name = std::string(name);
  config.partitions = *partitions;
  config.retention_ms = options_.auto_create_retention_ms;
  config.retention_bytes = options_.auto_create_retention_bytes;
  return make_topic(ctx, config);
}

void rocksdb_store::create_topic(topic_config config, completion<topic_info> done) {
  submit<topic_info>(true, 256, std::move(done), [this, config = std::move(config)](group_ctx& ctx) -> result<topic_info> {
    if (!valid_name(config.name, k_max_topic_name) || config.partitions == 0 || config.partitions > k_max_partitions) {
      return errc::invalid_argument;
    }
    if (auto t = writer_topic(ctx, config.name)) {
      if (t->record.partitions() != config.partitions) return errc::topic_exists;
      return info_of(*t);
    }
    auto t = make_topic(ctx, config);
    return info_of(*t);
  });
}

void rocksdb_store::set_topic_retention(std::string name, std::int64_t retention_ms, std::uint64_t retention_bytes,
                                        completion<topic_info> done) {
  submit<topic_info>(true, 256, std::move(done),
                     [this, name = std::move(name), retention_ms, retention_bytes](group_ctx& ctx) -> result<topic_info> {
    if (retention_ms < 0) return errc::invalid_argument;
    auto t = writer_topic(ctx, name);
    if (!t) return errc::unknown_topic;
    t->record.set_retention_ms(retention_ms);
    t->record.set_retention_bytes(retention_bytes);
    ctx.put(cf_default, topic_key(name), t->record.SerializeAsString());
    // Readers see the new values at once (before the fsync): retention is advisory until the
    // next pass, which runs on this writer after this write anyway.
    t->retention_ms.store(retention_ms, std::memory_order_relaxed);
    t->retention_bytes.store(retention_bytes, std::memory_order_relaxed);
    return info_of(*t);
  });
}

topic_info rocksdb_store::info_of(const topic_state& t) const {
  topic_info info;
  info.id = t.record.id();
  info.created_ms = t.created_ms;
  info.config.name = t.record.name();
  info.config.partitions = t.record.partitions();
  info.config.retention_ms = t.retention_ms.load(std::memory_order_relaxed);
  info.config.retention_bytes = t.retention_bytes.load(std::memory_order_relaxed);
  for (auto& p : t.partitions) {
    info.partitions.push_back({p->start_offset.load(std::memory_order_acquire),
                               p->committed_next.load(std::memory_order_acquire),
                               p->bytes.load(std::memory_order_acquire)});
  }
  return info;
}

std::optional<topic_info> rocksdb_store::topic(std::string_view name) const {
  auto t = find_topic(name);
  if (!t) return std::nullopt;
  return info_of(*t);
}

std::vector<topic_info> rocksdb_store::topics() const {
  std::vector<std::shared_ptr<topic_state>> all;
  {
    std::shared_lock lk(topics_mu_);
    for (auto& [_, t] : topics_) all.push_back(t);
  }
  std::vector<topic_info> out;
  for (auto& t : all) out.push_back(info_of(*t));
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.config.name < b.config.name; });
  return out;
}

}  // namespace txmq::storage::detail
