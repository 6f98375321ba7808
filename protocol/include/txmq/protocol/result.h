#pragma once

// Errors as values at every txmq boundary, server and client alike.
//
// An `error` carries a code and a text for a person. The code's category names the component
// that failed (txmq.protocol, txmq.storage, txmq.client, or the system's); the text says what
// failed, on what, and what to do ("no topic 'orders' (auto-creation is off)"). When only a
// code is given, the text is the category's own description of it.
//
// `result<T>` holds a T or an error; value() on an error throws txmq::exception, which carries
// the error and its text.

#include <ostream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include <boost/outcome/bad_access.hpp>
#include <boost/outcome/basic_result.hpp>
#include <boost/outcome/policy/base.hpp>
#include <boost/outcome/success_failure.hpp>
#include <boost/outcome/try.hpp>

namespace txmq {

namespace outcome = boost::outcome_v2;

// Conditions that span categories. A category says which of its codes are equivalent to one
// (std::error_category::equivalent), so that `code == condition::retriable` works for the
// protocol's codes and the client's alike without either knowing the other.
enum class condition : int {
  retriable = 1,  // worth trying again with the same request (ids make that safe)
};

[[nodiscard]] const std::error_category& condition_category() noexcept;

inline std::error_condition make_error_condition(condition c) noexcept {
  return {static_cast<int>(c), condition_category()};
}

}  // namespace txmq

template <>
struct std::is_error_condition_enum<txmq::condition> : std::true_type {};

namespace txmq {

struct error {
  std::error_code code;
  std::string message;

  error() = default;
  // The text is the category's description of the code.
  error(std::error_code c);  // NOLINT(google-explicit-constructor): errors convert from codes
  error(std::error_code c, std::string m) : code(c), message(std::move(m)) {}
  template <class E>
    requires std::is_error_code_enum_v<E>
  error(E e) : error(make_error_code(e)) {}  // NOLINT(google-explicit-constructor)
  template <class E>
    requires std::is_error_code_enum_v<E>
  error(E e, std::string m) : error(make_error_code(e), std::move(m)) {}

  // Worth trying again with the same request: connection trouble, timeouts, and the broker's
  // STORAGE_ERROR, STORE_UNAVAILABLE, STORE_FULL, SHUTTING_DOWN, INTERNAL and LIMIT_EXCEEDED.
  [[nodiscard]] bool retriable() const noexcept { return code == condition::retriable; }
  template <class E>
    requires std::is_error_code_enum_v<E>
  [[nodiscard]] bool is(E e) const noexcept {
    return code == make_error_code(e);
  }
  // "UNKNOWN_TOPIC: no topic 'orders' (auto-creation is off)": the wire name for protocol
  // codes, the category's description for others, then the text when it adds something.
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const error& a, const error& b) noexcept {
    return a.code == b.code && a.message == b.message;
  }
  friend bool operator==(const error& a, const std::error_code& c) noexcept { return a.code == c; }
  friend bool operator==(const error& a, const std::error_condition& c) noexcept { return a.code == c; }
  template <class E>
    requires std::is_error_code_enum_v<E>
  friend bool operator==(const error& a, E e) noexcept {
    return a.code == make_error_code(e);
  }
  template <class E>
    requires std::is_error_condition_enum_v<E>
  friend bool operator==(const error& a, E e) noexcept {
    return a.code == make_error_condition(e);
  }
};

std::ostream& operator<<(std::ostream& os, const error& e);

// An error for input a person gave that cannot be used (a flag, a configuration value, an
// address, an ACL line): std::errc::invalid_argument with the text that says why.
[[nodiscard]] inline error invalid(std::string text) {
  return {std::make_error_code(std::errc::invalid_argument), std::move(text)};
}

// Thrown by result<T>::value() on an error (and by nothing else in txmq's libraries).
class exception : public std::runtime_error {
 public:
  explicit exception(error e) : std::runtime_error(e.to_string()), error_(std::move(e)) {}
  [[nodiscard]] const error& get() const noexcept { return error_; }

 private:
  error error_;
};

namespace detail {
// result<T>::value() throws txmq::exception carrying the error, with its text.
struct throw_txmq_exception : outcome::policy::base {
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

template <class T>
using result = outcome::basic_result<T, error, detail::throw_txmq_exception>;

// TXMQ_TRY(var, expr): assigns the value of a result or returns its error.
#define TXMQ_TRY(...) BOOST_OUTCOME_TRY(__VA_ARGS__)

}  // namespace txmq
