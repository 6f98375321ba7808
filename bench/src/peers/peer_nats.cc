// NATS JetStream through libnats: a file-storage stream, asynchronous publishes whose PubAck
// completes the batch, and a durable pull consumer fetching up to 1,000 messages with an
// explicit ack each. nats-server 2.9 answers a publish before any fsync (its file store syncs
// every two minutes by default and rejects `sync_interval: always`), so it is a speed
// reference, not a durability peer.

#include <nats/nats.h>

#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "peers/system_under_test.h"

namespace txmq::bench::detail {
namespace {

void check(natsStatus s, const std::string& what, jsErrCode jerr = static_cast<jsErrCode>(0)) {
  if (s == NATS_OK) return;
  std::string text = "nats: " + what + ": " + natsStatus_GetText(s);
  if (jerr != 0) text += " (JetStream error " + std::to_string(static_cast<int>(jerr)) + ")";
  throw std::runtime_error(text);
}

// A connection and its JetStream context; `ack_handler` (when set) receives every PubAck.
class js_link {
 public:
  js_link(const std::string& address, jsPubAckHandler ack_handler = nullptr, void* closure = nullptr) {
    const std::string url = "nats://" + address;
    check(natsConnection_ConnectTo(&nc_, url.c_str()), "connect to " + url + " (is nats-server -js running there?)");
    jsOptions o;
    jsOptions_Init(&o);
    // Stream and consumer creation normally answer in milliseconds; on a loaded two-core
    // machine the default 5 s may not be enough, and a timeout loses the whole run.
    o.Wait = 30'000;
    if (ack_handler) {
      o.PublishAsync.AckHandler = ack_handler;
      o.PublishAsync.AckHandlerClosure = closure;
      // The workload bounds what is in flight; the client must never stall on its own limit.
      o.PublishAsync.MaxPending = 1'000'000;
    }
    const auto s = natsConnection_JetStream(&js_, nc_, &o);
    if (s != NATS_OK) {
      natsConnection_Destroy(nc_);
      check(s, "JetStream context");
    }
  }
  ~js_link() {
    jsCtx_Destroy(js_);
    natsConnection_Destroy(nc_);
  }
  js_link(const js_link&) = delete;
  js_link& operator=(const js_link&) = delete;
  [[nodiscard]] jsCtx* js() const { return js_; }
  [[nodiscard]] natsConnection* nc() const { return nc_; }

 private:
  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
};

class nats_publisher final : public publisher {
 public:
  nats_publisher(const std::string& address, std::string subject)
      : link_(address, &nats_publisher::on_ack, this), subject_(std::move(subject)) {}

  ~nats_publisher() override {
    // Acks still on their way would call into a destroyed object: wait for them first.
    js_PublishAsyncComplete(link_.js(), nullptr);
  }

  void send(std::vector<std::string> bodies, completion done) override {
    auto b = std::make_shared<message_batch>(message_batch{bodies.size(), true, std::move(done)});
    ++outstanding_;
    for (const auto& body : bodies) {
      natsMsg* m = nullptr;
      check(natsMsg_Create(&m, subject_.c_str(), nullptr, body.data(), static_cast<int>(body.size())), "create message");
      {
        // Registered before publishing: the ack may arrive before js_PublishMsgAsync returns.
        std::lock_guard lock(mutex_);
        in_flight_.emplace(m, b);
      }
      natsMsg* owned = m;
      const auto s = js_PublishMsgAsync(link_.js(), &owned, nullptr);
      if (s != NATS_OK) {
        {
          std::lock_guard lock(mutex_);
          in_flight_.erase(m);
        }
        natsMsg_Destroy(owned);
        check(s, "publish to " + subject_);
      }
    }
  }

  void poll(std::chrono::nanoseconds max_wait) override {
    std::vector<std::shared_ptr<message_batch>> finished;
    {
      std::unique_lock lock(mutex_);
      cv_.wait_for(lock, max_wait, [&] { return !ready_.empty(); });
      finished.swap(ready_);
    }
    run_completions(finished, outstanding_);
  }

  [[nodiscard]] std::size_t outstanding() const override { return outstanding_; }

 private:
  // Runs on a libnats thread.
  static void on_ack(jsCtx*, natsMsg* msg, jsPubAck*, jsPubAckErr* pae, void* closure) {
    auto* self = static_cast<nats_publisher*>(closure);
    {
      std::lock_guard lock(self->mutex_);
      const auto it = self->in_flight_.find(msg);
      if (it != self->in_flight_.end()) {
        auto b = it->second;
        self->in_flight_.erase(it);
        if (b->settle(pae == nullptr)) self->ready_.push_back(std::move(b));
      }
    }
    self->cv_.notify_one();
    natsMsg_Destroy(msg);
  }

  js_link link_;
  std::string subject_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::unordered_map<natsMsg*, std::shared_ptr<message_batch>> in_flight_;
  std::vector<std::shared_ptr<message_batch>> ready_;
  std::size_t outstanding_ = 0;
};

class nats_consumer final : public consumer {
 public:
  nats_consumer(const std::string& address, const std::string& stream) : link_(address) {
    jsSubOptions so;
    jsSubOptions_Init(&so);
    so.Stream = stream.c_str();
    // As many unacknowledged messages as txmq allows per partition and group.
    so.Config.MaxAckPending = 10'000;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    check(js_PullSubscribe(&sub_, link_.js(), stream.c_str(), "bench", nullptr, &so, &jerr), "pull subscribe " + stream, jerr);
  }
  ~nats_consumer() override { natsSubscription_Destroy(sub_); }

  std::size_t poll(std::chrono::nanoseconds max_wait, const delivery& on_message) override {
    natsMsgList list{};
    jsErrCode jerr = static_cast<jsErrCode>(0);
    const auto ms = std::max<std::int64_t>(1, std::chrono::duration_cast<std::chrono::milliseconds>(max_wait).count());
    const auto s = natsSubscription_Fetch(&list, sub_, 1000, ms, &jerr);
    if (s == NATS_TIMEOUT) return 0;
    check(s, "fetch", jerr);
    for (int i = 0; i < list.Count; ++i) {
      on_message(std::string_view(natsMsg_GetData(list.Msgs[i]), static_cast<std::size_t>(natsMsg_GetDataLength(list.Msgs[i]))));
      check(natsMsg_Ack(list.Msgs[i], nullptr), "ack");
    }
    const auto n = static_cast<std::size_t>(list.Count);
    natsMsgList_Destroy(&list);
    return n;
  }

  void drain() override { natsConnection_Flush(link_.nc()); }

 private:
  js_link link_;
  natsSubscription* sub_ = nullptr;
};

class nats_system final : public system_under_test {
 public:
  explicit nats_system(const system_options& o) : address_(o.address), stream_(o.name) {
    js_link admin(address_);
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = stream_.c_str();
    const char* subjects[] = {stream_.c_str()};
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    jsStreamInfo* si = nullptr;
    jsErrCode jerr = static_cast<jsErrCode>(0);
    check(js_AddStream(&si, admin.js(), &cfg, nullptr, &jerr), "add stream " + stream_, jerr);
    jsStreamInfo_Destroy(si);
  }

  ~nats_system() override {
    // Best effort: a stream left behind only costs disk in the benchmark's temporary directory.
    try {
      js_link admin(address_);
      js_DeleteStream(admin.js(), stream_.c_str(), nullptr, nullptr);
    } catch (const std::exception&) {
    }
  }

  std::unique_ptr<publisher> make_publisher(std::size_t) override { return std::make_unique<nats_publisher>(address_, stream_); }
  std::unique_ptr<consumer> make_consumer() override { return std::make_unique<nats_consumer>(address_, stream_); }
  std::string durability() const override { return "file storage, PubAck before fsync (nats-server 2.9 cannot sync on every write)"; }

 private:
  std::string address_, stream_;
};

}  // namespace

std::unique_ptr<system_under_test> open_nats(const system_options& options) {
  return std::make_unique<nats_system>(options);
}

}  // namespace txmq::bench::detail
