#include "admin_reads.h"

#include "txmq/protocol/errc.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace txmq::broker {

boost::asio::awaitable<result<common::http_response>> admin_reads::await(
    std::function<result<common::http_response>()> work) {
  using T = common::http_response;
  struct state {
    explicit state(const boost::asio::any_io_executor& ex) : timer(ex) {}
    boost::asio::steady_timer timer;
    std::optional<result<T>> value;
  };
  if (stopping()) co_return error(protocol::errc::shutting_down, "the broker is shutting down");
  auto st = std::make_shared<state>(co_await boost::asio::this_coro::executor);
  st->timer.expires_at(boost::asio::steady_timer::time_point::max());
  run<T>(std::move(work), [st](result<T> r) {
    st->value.emplace(std::move(r));
    st->timer.cancel();
  });
  while (!st->value) {
    (void)co_await st->timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
  }
  co_return std::move(*st->value);
}

result<dead_letter_counts> count_dead_letters(const storage::store& store, std::string_view group,
                                              const admin_reads& reads) {
  dead_letter_counts out;
  std::optional<storage::message_ref> after;
  for (;;) {
    if (reads.stopping()) {
      return error(protocol::errc::shutting_down, "the broker is shutting down");
    }
    TXMQ_TRY(auto page, store.dead_letters(group, k_admin_scan_page, after));
    for (auto& l : page) {
      ++out.per_partition[{l.topic, l.partition}];
      ++out.total;
    }
    if (page.size() < k_admin_scan_page) return out;
    after = storage::message_ref{page.back().topic, page.back().partition, page.back().offset};
  }
}

}  // namespace txmq::broker
