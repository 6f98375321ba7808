// The io thread's request table: requests queued for writing with their timeout timers,
// answers matched to them by correlation id, and requests the broker sends (CheckTx) handed
// to the handler pool, whose answers come back to the write queue.

#include "connection_impl.h"

#include <vector>

#include <boost/asio/post.hpp>

namespace txmq::client {


void connection::impl::enqueue_request(std::uint64_t id, std::string bytes, response_callback cb, std::chrono::milliseconds wait) {
  if (closing_) return invoke(cb, error(errc::closed, "the connection to " + options_.address + " was closed"));
  if (!write_queue_.empty() && write_queue_bytes_ + bytes.size() > options_.max_write_queue_bytes) {
    return invoke(cb, error(errc::write_queue_full, "the write queue to " + options_.address + " holds " +
                                                         std::to_string(write_queue_bytes_) + " bytes (limit " +
                                                         std::to_string(options_.max_write_queue_bytes) +
                                                         "); retry when the broker has caught up"));
  }
  if (!connected_now_ && refusal_) return invoke(cb, *refusal_);
  if (!connected_now_ && unreachable_) return invoke(cb, *unreachable_);
  auto timer = std::make_unique<asio::steady_timer>(io_);
  timer->expires_after(wait);
  timer->async_wait([this, id, wait](boost::system::error_code ec) {
    if (ec) return;
    on_timeout(id, wait);
  });
  pending_.emplace(id, pending_request{std::move(cb), std::move(timer), false});
  write_queue_bytes_ += bytes.size();
  write_queue_.push_back(queued_frame{id, 0, std::move(bytes)});
  write_signal_.cancel();
}

void connection::impl::on_timeout(std::uint64_t id, std::chrono::milliseconds wait) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  if (!it->second.sent) {
    for (auto q = write_queue_.begin(); q != write_queue_.end(); ++q) {
      if (q->request_id == id) {
        write_queue_bytes_ -= q->bytes.size();
        write_queue_.erase(q);
        break;
      }
    }
  }
  const bool sent = it->second.sent;
  // A sent request unanswered, and no answer at all from the broker for dead_link_timeout: the
  // link passes nothing although TCP holds it up (a stalled or half-open path through a proxy,
  // NAT or load balancer acknowledges our bytes, so keepalive and TCP_USER_TIMEOUT never fire).
  // The session is ended so that the connection is made again, as for a dead link.
  const auto silent = std::chrono::steady_clock::now() - last_received_;
  if (sent && connected_now_ && socket_ && options_.dead_link_timeout.count() > 0) {
    if (silent >= options_.dead_link_timeout) {
      disconnect_reason_ = error(errc::connection_lost,
                                 "no answer from " + options_.address + " for " +
                                     std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(silent).count()) +
                                     " ms while a request waited (a stalled or half-open link); reconnecting");
      socket_->close();
    } else {
      // Another answer came in after this request was sent, just before the link stalled: the
      // silence is not long enough yet. Without a second look the stall goes unnoticed when no
      // later request times out while it lasts (client_dead_link_test): look again when the
      // silence reaches dead_link_timeout.
      check_dead_link_later();
    }
  }
  std::string text = "no answer from " + options_.address + " within " + std::to_string(wait.count()) + " ms";
  if (!connected_now_) {
    text += "; not connected";
    if (last_error_io_) text += " (last attempt: " + last_error_io_->to_string() + ")";
  } else if (sent) {
    text += "; the request may have been applied";
  }
  complete(id, error(errc::timeout, std::move(text)));
}

void connection::impl::check_dead_link_later() {
  const auto heard = last_received_;
  const auto generation = generation_;
  // Re-arming moves an earlier check (its wait ends cancelled) to the latest answer's silence.
  dead_link_timer_.expires_at(heard + options_.dead_link_timeout);
  dead_link_timer_.async_wait([this, heard, generation](boost::system::error_code ec) {
    if (ec || closing_ || generation != generation_ || !connected_now_ || !socket_) return;
    if (last_received_ != heard) return;  // the broker answered meanwhile (a late answer counts)
    const auto silent = std::chrono::steady_clock::now() - last_received_;
    disconnect_reason_ = error(errc::connection_lost,
                               "no answer from " + options_.address + " for " +
                                   std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(silent).count()) +
                                   " ms after a request timed out (a stalled or half-open link); reconnecting");
    socket_->close();
  });
}

void connection::impl::complete(std::uint64_t id, result<v1::Frame> r) {
  auto it = pending_.find(id);
  if (it == pending_.end()) return;
  auto cb = std::move(it->second.cb);
  pending_.erase(it);
  invoke(cb, std::move(r));
}

void connection::impl::invoke(response_callback& cb, result<v1::Frame> r) {
  try {
    cb(std::move(r));
  } catch (const std::exception& e) {
    log(std::string("a response callback threw: ") + e.what());
  }
}

void connection::impl::fail_all(const error& e) {
  auto pending = std::move(pending_);
  pending_.clear();
  write_queue_.clear();
  write_queue_bytes_ = 0;
  for (auto& [id, p] : pending) invoke(p.cb, e);
}

// Requests written on a connection that broke get `e`; those still queued wait for the next.
void connection::impl::fail_sent(const error& e) {
  std::vector<std::uint64_t> ids;
  for (auto& [id, p] : pending_) {
    if (p.sent) ids.push_back(id);
  }
  for (auto id : ids) complete(id, e);
  std::erase_if(write_queue_, [](const queued_frame& q) { return q.request_id == 0; });
  write_queue_bytes_ = 0;
  for (auto& q : write_queue_) write_queue_bytes_ += q.bytes.size();
}

void connection::impl::fail_unsent(const error& e) {
  std::vector<std::uint64_t> ids;
  for (auto& q : write_queue_) {
    if (q.request_id != 0) ids.push_back(q.request_id);
  }
  write_queue_.clear();
  write_queue_bytes_ = 0;
  for (auto id : ids) complete(id, e);
}

void connection::impl::dispatch(v1::Frame frame) {
  if (is_response(frame)) {
    if (frame.has_error() && frame.correlation_id() == 0) {
      // Answers no request: the broker says why it is about to close the connection.
      broker_notice_ = from_wire(frame.error().code(), frame.error().message());
      log("broker notice: " + broker_notice_->to_string());
      return;
    }
    // Only answers show that the broker hears us: a half-open link can still carry the broker's
    // own requests (CheckTx) to us while ours are lost.
    last_received_ = std::chrono::steady_clock::now();
    const auto id = frame.correlation_id();
    if (frame.has_error()) return complete(id, from_wire(frame.error().code(), frame.error().message()));
    return complete(id, std::move(frame));
  }
  std::shared_ptr<request_handler> handler;
  {
    std::lock_guard lock(mutex_);
    handler = handler_;
  }
  const std::uint64_t broker_id = frame.correlation_id();
  const std::uint64_t generation = generation_;
  if (!handler || !*handler) {
    v1::Frame answer;
    answer.mutable_error()->set_code(v1::UNKNOWN_REQUEST);
    answer.mutable_error()->set_message("this client does not handle requests of body type " +
                                        std::to_string(static_cast<int>(frame.body_case())));
    return enqueue_answer(broker_id, generation, answer);
  }
  // The handler may block (a database query for CheckTx): never on the io thread.
  asio::post(handler_pool_, [this, handler, frame = std::move(frame), broker_id, generation] {
    std::optional<v1::Frame> answer;
    try {
      answer = (*handler)(frame);
    } catch (const std::exception& e) {
      answer.emplace();
      answer->mutable_error()->set_code(v1::INTERNAL);
      answer->mutable_error()->set_message(std::string("the client's request handler failed: ") + e.what());
    }
    if (!answer) return;
    asio::post(io_, [this, broker_id, generation, answer = std::move(*answer)] {
      enqueue_answer(broker_id, generation, answer);
    });
  });
}

void connection::impl::enqueue_answer(std::uint64_t broker_id, std::uint64_t generation, v1::Frame answer) {
  if (closing_ || generation != generation_ || !connected_now_) return;
  answer.set_correlation_id(broker_id);
  std::string bytes;
  if (!protocol::encode_frame(answer, bytes, send_limit_.load())) {
    log("dropping an answer to broker request " + std::to_string(broker_id) + ": it cannot be framed");
    return;
  }
  write_queue_bytes_ += bytes.size();
  write_queue_.push_back(queued_frame{0, generation, std::move(bytes)});
  write_signal_.cancel();
}

}  // namespace txmq::client
