#pragma once

// The error codes of txmq::pg (category "txmq.pg"). The text of an error says what failed:
// "SQLSTATE 23505: duplicate key value ..." for a statement, libpq's message for a connection.

#include <system_error>

#include "txmq/protocol/result.h"

namespace txmq::pg {

enum class errc : int {
  // A PostgreSQL call failed: no connection, a statement refused (the text carries the
  // SQLSTATE, see sqlstate()), a transaction rolled back at COMMIT, a database without the
  // expected schema. Not retriable as such: whether a retry helps depends on the SQLSTATE.
  database = 1,
};

[[nodiscard]] const std::error_category& pg_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), pg_category()}; }

}  // namespace txmq::pg

template <>
struct std::is_error_code_enum<txmq::pg::errc> : std::true_type {};
