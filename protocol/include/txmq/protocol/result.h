#pragma once

// Errors as values at every txmq boundary: result<T> holds a T or a std::error_code whose
// category names the component that failed (protocol, storage, ...).

#include <system_error>

#include <boost/outcome/result.hpp>
#include <boost/outcome/try.hpp>

namespace txmq {

namespace outcome = boost::outcome_v2;

template <class T>
using result = outcome::result<T, std::error_code>;

// TXMQ_TRY(var, expr): assigns the value of a result or returns its error.
#define TXMQ_TRY(...) BOOST_OUTCOME_TRY(__VA_ARGS__)

}  // namespace txmq
