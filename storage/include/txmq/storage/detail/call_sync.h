#pragma once

#include <future>
#include <utility>

namespace txmq::storage {

template <class T, class Start>
result<T> call_sync(Start&& start) {
  auto promise = std::make_shared<std::promise<result<T>>>();
  auto future = promise->get_future();
  std::forward<Start>(start)([promise](result<T> r) { promise->set_value(std::move(r)); });
  return future.get();
}

}  // namespace txmq::storage
