#include "cluster_mode/cluster_node.h"

#include "cluster_mode/cluster_metrics.h"

#include <pthread.h>

#include <future>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "txmq/cluster/errc.h"
#include "txmq/common/log.h"
#include "txmq/v1/frame.pb.h"

namespace txmq::broker::cluster_mode {

namespace asio = boost::asio;

cluster_node::cluster_node(node_settings settings) : settings_(std::move(settings)) {
  cluster::etcd_options eo;
  eo.endpoints = settings_.etcd;
  member_ = std::make_unique<cluster::member>(io_.get_executor(), eo, settings_.member);
  etcd_ = std::make_unique<cluster::etcd_client>(io_.get_executor(), eo);
}

cluster_node::~cluster_node() { stop(); }

void cluster_node::enable_metrics(common::metrics_registry& registry) {
  metrics_ = std::make_unique<cluster_metrics>(registry, *this);
}

void cluster_node::set_replica_lag(std::vector<replica_lag_sample> lag) {
  std::lock_guard lk(lag_mu_);
  lag_ = std::move(lag);
}

std::vector<replica_lag_sample> cluster_node::replica_lag() const {
  std::lock_guard lk(lag_mu_);
  return lag_;
}

void cluster_node::start() {
  if (started_) return;
  started_ = true;
  member_->start();
  if (metrics_) {
    asio::co_spawn(io_, [this]() -> asio::awaitable<void> {
      asio::steady_timer timer(io_);
      for (;;) {
        metrics_->observe();
        timer.expires_after(std::chrono::milliseconds(100));
        co_await timer.async_wait(asio::use_awaitable);
      }
    }, [](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        common::log::error("cluster metrics sampling stopped: ", ex.what());
      } catch (...) {
      }
    });
  }
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "txmq-cluster");
    auto guard = asio::make_work_guard(io_);
    for (;;) {
      try {
        io_.run();
        return;
      } catch (const std::exception& e) {
        // A bug in the control plane must not take the broker down; it is logged and the loop runs on.
        common::log::error("cluster thread: unexpected exception: ", e.what());
      }
    }
  });
}

void cluster_node::stop() {
  if (!started_ || stopped_) return;
  stopped_ = true;
  std::promise<void> done;
  asio::co_spawn(io_, [this]() -> asio::awaitable<void> {
    co_await member_->stop();
    etcd_->close();
  }, [&done](std::exception_ptr) { done.set_value(); });
  // The lease revoke is one attempt within the etcd request timeout; do not wait forever.
  (void)done.get_future().wait_for(std::chrono::seconds(5));
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

void cluster_node::create_topic(cluster::topic_config topic, std::function<void(result<void>)> done) {
  asio::co_spawn(
      io_,
      [this, topic = std::move(topic), done]() -> asio::awaitable<void> {
        auto r = co_await cluster::create_topic(*etcd_, member_->keys(), topic);
        if (!r && r.error().code == cluster::errc::compare_failed) r = outcome::success();  // exists
        done(std::move(r));
      },
      // An exception ends the coroutine before it answered: the caller (a CreateTopic or an
      // auto-create waiting on it) still gets an answer, not silence.
      [done](std::exception_ptr e) {
        if (!e) return;
        std::string why = "unknown exception";
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          why = ex.what();
        } catch (...) {
        }
        common::log::error("writing a topic to etcd failed: ", why);
        done(error(cluster::errc::etcd_error, "writing the topic to etcd failed: " + why));
      });
}

void cluster_node::alter_topic(std::string name, std::function<result<void>(cluster::topic_config&)> change,
                               std::function<void(result<cluster::topic_config>)> done) {
  asio::co_spawn(
      io_,
      [this, name = std::move(name), change = std::move(change), done]() -> asio::awaitable<void> {
        done(co_await cluster::alter_topic(*etcd_, member_->keys(), name, change));
      },
      [done](std::exception_ptr e) {
        if (e) done(error(cluster::errc::etcd_error, "writing the topic's settings to etcd failed"));
      });
}

void cluster_node::write_isr(std::string topic, std::int32_t partition, cluster::partition_state state,
                             std::int64_t mod_revision, std::function<void(result<void>)> done) {
  asio::co_spawn(
      io_,
      [this, topic = std::move(topic), partition, state = std::move(state), mod_revision,
       done]() -> asio::awaitable<void> {
        auto r = co_await cluster::write_isr(*etcd_, member_->keys(), topic, partition, state, mod_revision);
        if (!r) co_return done(r.error());
        done(outcome::success());
      },
      [done](std::exception_ptr e) {
        if (e) done(error(cluster::errc::etcd_error, "writing an ISR to etcd failed"));
      });
}

void cluster_node::run_record(std::function<asio::awaitable<result<cluster::record_change>>()> op, record_done done) {
  asio::co_spawn(
      io_,
      [op = std::move(op), done]() -> asio::awaitable<void> {
        auto r = co_await op();
        done(std::move(r));
      },
      [done](std::exception_ptr e) {
        if (e) done(error(cluster::errc::etcd_error, "writing a principal or grant to etcd failed"));
      });
}

void cluster_node::put_principal(cluster::principal_record p, record_done done) {
  run_record([this, p = std::move(p)] { return cluster::put_principal(*etcd_, member_->keys(), p); }, std::move(done));
}
void cluster_node::delete_principal(std::string name, record_done done) {
  run_record([this, name = std::move(name)] { return cluster::delete_principal(*etcd_, member_->keys(), name); },
             std::move(done));
}
void cluster_node::put_acl(cluster::acl_record a, record_done done) {
  run_record([this, a = std::move(a)] { return cluster::put_acl(*etcd_, member_->keys(), a); }, std::move(done));
}
void cluster_node::delete_acl(cluster::acl_record a, record_done done) {
  run_record([this, a = std::move(a)] { return cluster::delete_acl(*etcd_, member_->keys(), a); }, std::move(done));
}

void cluster_node::put_webhook(std::string id, std::string record, bool create, record_done done) {
  run_record([this, id = std::move(id), record = std::move(record), create] {
    return cluster::put_webhook(*etcd_, member_->keys(), id, record, create);
  }, std::move(done));
}
void cluster_node::delete_webhook(std::string id, record_done done) {
  run_record([this, id = std::move(id)] { return cluster::delete_webhook(*etcd_, member_->keys(), id); },
             std::move(done));
}

void cluster_node::update_webhook(std::string id, std::function<std::optional<std::string>(std::string_view)> change,
                                  record_done done) {
  run_record([this, id = std::move(id), change = std::move(change)] {
    return cluster::update_webhook(*etcd_, member_->keys(), id, change);
  }, std::move(done));
}

void cluster_node::disable_webhook(std::string id, std::string reason, std::int64_t disabled_ms, record_done done) {
  asio::co_spawn(
      io_,
      [this, id = std::move(id), reason = std::move(reason), disabled_ms, done]() -> asio::awaitable<void> {
        auto change = [&](std::string_view current) -> std::optional<std::string> {
          v1::Webhook rec;
          if (!rec.ParseFromArray(current.data(), static_cast<int>(current.size()))) return std::nullopt;
          if (rec.disabled()) return std::nullopt;  // disabled already (another node's 410)
          rec.set_disabled(true);
          rec.set_disabled_reason(reason);
          rec.set_disabled_ms(disabled_ms);
          return rec.SerializeAsString();
        };
        auto delay = std::chrono::milliseconds(250);
        asio::steady_timer timer(io_);
        for (;;) {
          auto r = co_await cluster::update_webhook(*etcd_, member_->keys(), id, change);
          if (r || stopped_) co_return done(std::move(r));
          ++disable_retries_;
          common::log::warn("webhooks: writing that ", id, " is disabled to etcd failed (", r.error().message,
                            "); retrying in ", delay.count(), " ms");
          timer.expires_after(delay);
          co_await timer.async_wait(asio::use_awaitable);
          delay = std::min<std::chrono::milliseconds>(delay * 2, std::chrono::seconds(5));
        }
      },
      [done](std::exception_ptr e) {
        if (e) done(error(cluster::errc::etcd_error, "writing a webhook's disable to etcd stopped"));
      });
}

}  // namespace txmq::broker::cluster_mode
