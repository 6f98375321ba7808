#pragma once

// The error type of the txmq client libraries. An error carries a code (a
// txmq::protocol::errc when the broker refused a request, a txmq::client::errc when the
// failure happened on this side) and a text for a person: the broker's own message when it
// sent one, or what failed locally and what to do.

#include <ostream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include <boost/outcome/basic_result.hpp>
#include <boost/outcome/policy/base.hpp>
#include <boost/outcome/success_failure.hpp>

#include "txmq/protocol/errc.h"
#include "txmq/protocol/result.h"

namespace txmq::client {

// Failures that happen on the client's side; never sent on the wire.
enum class errc : int {
  connection_lost = 1,      // the connection broke while the request was in flight (retriable)
  not_connected = 2,        // no connection to the broker could be made in time (retriable)
  timeout = 3,              // no answer within the request timeout (retriable; it may have been applied)
  write_queue_full = 4,     // the connection's bounded write queue is full (retriable)
  closed = 5,               // the connection, producer or consumer was closed by its owner
  unexpected_response = 6,  // the broker answered with a frame of the wrong type
  bad_address = 7,          // an address that is not HOST:PORT
  delivery_timeout = 8,     // the producer gave up on a message after its delivery timeout
  would_deadlock = 9,       // a blocking call made on the connection's own io thread
  invalid_argument = 10,    // a call with an argument the library rejects before sending
  handler_failed = 11,      // a consumer handler threw (the delivery is nacked)
  database = 12,            // a PostgreSQL call failed (text: SQLSTATE and message; txmq/client/pg.h)
};

[[nodiscard]] const std::error_category& client_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), client_category()}; }

struct error {
  std::error_code code;
  std::string message;

  error() = default;
  error(std::error_code c, std::string m) : code(c), message(std::move(m)) {}
  error(errc c, std::string m) : code(make_error_code(c)), message(std::move(m)) {}
  error(protocol::errc c, std::string m) : code(protocol::make_error_code(c)), message(std::move(m)) {}

  // Worth trying again with the same request: connection trouble, timeouts, and the broker's
  // STORAGE_ERROR, SHUTTING_DOWN, INTERNAL and LIMIT_EXCEEDED.
  [[nodiscard]] bool retriable() const noexcept;
  // The code as the wire's error code, when it is one (protocol::errc{} otherwise).
  [[nodiscard]] bool is(protocol::errc e) const noexcept { return code == protocol::make_error_code(e); }
  [[nodiscard]] bool is(errc e) const noexcept { return code == make_error_code(e); }
  // "UNKNOWN_TOPIC: no topic 'orders' (auto-creation is off)".
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const error& a, const error& b) noexcept { return a.code == b.code && a.message == b.message; }
};

std::ostream& operator<<(std::ostream& os, const error& e);

// Thrown by result<T>::value() on an error (and by nothing else in these libraries).
class exception : public std::runtime_error {
 public:
  explicit exception(error e) : std::runtime_error(e.to_string()), error_(std::move(e)) {}
  [[nodiscard]] const error& get() const noexcept { return error_; }

 private:
  error error_;
};

namespace detail {
// result<T>::value() throws client::exception carrying the error, with its text.
struct throw_client_exception : outcome::policy::base {
  template <class Impl>
  static constexpr void wide_value_check(Impl&& self) {
    if (!base::_has_value(self)) {
      if (base::_has_error(self)) throw exception(base::_error(self));
      throw outcome::bad_result_access("no value");
    }
  }
  template <class Impl>
  static constexpr void wide_error_check(Impl&& self) {
    if (!base::_has_error(self)) throw outcome::bad_result_access("no error");
  }
  template <class Impl>
  static constexpr void wide_exception_check(Impl&& self) {
    if (!base::_has_exception(self)) throw outcome::bad_result_access("no exception");
  }
};
}  // namespace detail

// A T or a client::error. value() on an error throws client::exception.
template <class T>
using result = outcome::basic_result<T, error, detail::throw_client_exception>;

// Turns a wire Error (code number and text) into an error; an unknown code becomes INTERNAL,
// as docs/protocol.md asks, with the number kept in the text.
[[nodiscard]] error from_wire(int code, std::string message);

}  // namespace txmq::client

template <>
struct std::is_error_code_enum<txmq::client::errc> : std::true_type {};
