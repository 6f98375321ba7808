#include "txmq/client/leader_router.h"

#include <future>

#include "txmq/protocol/partitioner.h"

namespace txmq::client {

leader_router::leader_router(std::shared_ptr<connection> bootstrap) : bootstrap_(std::move(bootstrap)) {}

leader_router::~leader_router() { close(); }

void leader_router::keep(v1::MetadataResponse m) {
  std::lock_guard lock(mutex_);
  metadata_ = std::move(m);
}

void leader_router::async_refresh(std::function<void(result<void>)> done,
                                  std::optional<std::chrono::milliseconds> timeout) {
  v1::Frame frame;
  frame.mutable_metadata();
  auto conn = bootstrap_;
  if (!conn->is_connected()) {
    // The bootstrap node may be the one that went away; ask a leader we still reach.
    std::lock_guard lock(mutex_);
    for (auto& [address, c] : leaders_) {
      if (c->is_connected()) {
        conn = c;
        break;
      }
    }
  }
  conn->async_request(std::move(frame), [self = shared_from_this(), done = std::move(done)](result<v1::Frame> r) {
    if (!r) return done(r.error());
    if (!r.value().has_metadata_response()) {
      return done(error(errc::unexpected_response, "the broker answered Metadata with frame body " +
                                                       std::to_string(static_cast<int>(r.value().body_case()))));
    }
    self->keep(std::move(*r.value().mutable_metadata_response()));
    done(outcome::success());
  }, timeout);
}

result<v1::MetadataResponse> leader_router::refresh(std::chrono::milliseconds timeout) {
  v1::Frame frame;
  frame.mutable_metadata();
  auto r = bootstrap_->request(std::move(frame), timeout);
  if (!r) return r.error();
  if (!r.value().has_metadata_response()) {
    return error(errc::unexpected_response, "the broker answered Metadata with frame body " +
                                                std::to_string(static_cast<int>(r.value().body_case())));
  }
  keep(r.value().metadata_response());
  return r.value().metadata_response();
}

std::string leader_router::leader_for(const std::string& topic, const std::optional<std::string>& key) {
  std::lock_guard lock(mutex_);
  if (!metadata_ || !metadata_->cluster()) return {};
  for (const auto& t : metadata_->topics()) {
    if (t.name() != topic || t.partitions() == 0 || t.partition_info_size() != static_cast<int>(t.partitions())) continue;
    if (key) return t.partition_info(static_cast<int>(protocol::partition_for_key(*key, t.partitions()))).leader_address();
    // Keyless: any partition with a leader does; the broker picks among those it leads.
    auto& next = round_robin_[topic];
    for (std::uint32_t i = 0; i < t.partitions(); ++i) {
      const auto& p = t.partition_info(static_cast<int>((next + i) % t.partitions()));
      if (!p.leader_address().empty()) {
        next += i + 1;
        return p.leader_address();
      }
    }
    return {};
  }
  return {};
}

std::shared_ptr<connection> leader_router::connection_for(const std::string& address) {
  if (address.empty()) return bootstrap_;
  std::lock_guard lock(mutex_);
  if (closed_) return bootstrap_;
  auto& c = leaders_[address];
  if (!c) {
    auto options = bootstrap_->options();
    options.address = address;
    // A leader that cannot be reached (killed, stopped) is answered at once: the producer and
    // the consumer read Metadata again and move to the new leader as soon as there is one,
    // instead of waiting out a request timeout on the dead node's reconnects.
    options.fail_while_unreachable = true;
    c = std::make_shared<connection>(std::move(options));
  }
  return c;
}

std::optional<v1::MetadataResponse> leader_router::metadata() const {
  std::lock_guard lock(mutex_);
  return metadata_;
}

void leader_router::close() {
  std::map<std::string, std::shared_ptr<connection>> leaders;
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
    leaders.swap(leaders_);
  }
  for (auto& [address, c] : leaders) c->close();
}

}  // namespace txmq::client
