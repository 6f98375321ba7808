#pragma once

// Thin libpq helpers shared by producer-lib (pg_checker, outbox_writer, pg_schema),
// consumer-lib (pg_inbox), txmq-relay and the CLI: owning handles, parameterised statements,
// and PostgreSQL errors as txmq::error values (code pg::errc::database, text "SQLSTATE xxxxx:
// ..."), converted here, where they enter txmq's code.
//
// Every function takes the caller's PGconn: the libraries never open a connection behind the
// caller's back, so their statements run inside whatever transaction the caller has open.
//
// Thread-safety: a PGconn is used by one thread at a time (libpq's rule); the free functions
// keep no state; connection_pool is thread-safe.

#include <libpq-fe.h>

#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "txmq/pg/errc.h"
#include "txmq/protocol/result.h"

namespace txmq::pg {

struct conn_deleter {
  void operator()(PGconn* c) const noexcept { PQfinish(c); }
};
struct result_deleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using connection_ptr = std::unique_ptr<PGconn, conn_deleter>;
using result_ptr = std::unique_ptr<PGresult, result_deleter>;

// A statement parameter: text, or SQL NULL. Binary values (bytea) go as text in hex form
// ("\x..."), which every PostgreSQL since 9.0 accepts; see bytea_literal().
using param = std::optional<std::string>;

// Opens a connection (libpq conninfo or URI). Errors: errc::database with libpq's text.
[[nodiscard]] result<connection_ptr> connect(const std::string& conninfo);

// Runs one statement with $1..$n parameters. Success = PGRES_COMMAND_OK or PGRES_TUPLES_OK.
// Errors: errc::database, text "SQLSTATE <code>: <primary message>" (or libpq's
// connection error when the server is gone).
// Without parameters the simple protocol runs, so sql may hold several statements.
[[nodiscard]] result<result_ptr> exec(PGconn* conn, std::string_view sql, std::initializer_list<param> params = {});
[[nodiscard]] result<result_ptr> exec(PGconn* conn, std::string_view sql, std::span<const param> params);

// The same with the result in binary format (always the extended protocol, parameters still
// text): a bytea column arrives as its raw bytes (no hex to encode on the server and decode
// here), a text column as its text; other types in PostgreSQL's binary encodings, so cast them
// to text in the statement where their text form is wanted.
[[nodiscard]] result<result_ptr> exec_binary(PGconn* conn, std::string_view sql, std::span<const param> params);

// Runs a statement prepared on this session (SQL `PREPARE name(types) AS ...`); the result in
// text format, or in binary format (as exec_binary) when binary_result. The parameters are text, or with binary_params every one
// in PostgreSQL's binary form of its type (its bytes as they are, NULs included: e.g.
// uuid_array_binary()). Errors: as exec().
[[nodiscard]] result<result_ptr> exec_prepared(PGconn* conn, const std::string& name, std::span<const param> params,
                                               bool binary_result, bool binary_params = false);

// The binary form of a one-dimensional uuid[] (a parameter for exec_prepared with binary_params)
// from ids given as their 16 bytes each, one after the other: no text to print here and none for
// the server to parse (array_in and uuid_in over thousands of ids). `raw`'s size must be a
// multiple of 16.
[[nodiscard]] std::string uuid_array_binary(std::string_view raw);

// The SQLSTATE in an error made by exec() ("23505"), or empty.
[[nodiscard]] std::string sqlstate(const error& e);

inline constexpr std::string_view unique_violation = "23505";
inline constexpr std::string_view serialization_failure = "40001";
inline constexpr std::string_view deadlock_detected = "40P01";

// The text form of an int[] parameter ("{1,2,3}"; "{}" for none).
[[nodiscard]] std::string int_array_literal(const std::set<int>& values);

// The text form of a bytea parameter ("\x" + hex).
[[nodiscard]] std::string bytea_literal(std::string_view bytes);
// Decodes a bytea column received in text form ("\x" + hex). Errors: errc::database.
[[nodiscard]] result<std::string> bytea_value(std::string_view text);

// Idle connections to one database, for a library that serves several threads (one
// connection per concurrent call). Thread-safe.
class connection_pool {
 public:
  // setup runs once on each new connection (session settings); its error fails take().
  explicit connection_pool(std::string conninfo, std::function<result<void>(PGconn*)> setup = {});

  // An idle connection, or a new one. Errors: pg::connect's, setup's.
  [[nodiscard]] result<connection_ptr> take();
  // Keeps c for the next take() unless it broke (server restarted, backend terminated) or is
  // still inside a transaction, whose state would leak into the next use.
  void give_back(connection_ptr c);

  [[nodiscard]] const std::string& conninfo() const noexcept { return conninfo_; }

 private:
  const std::string conninfo_;
  const std::function<result<void>(PGconn*)> setup_;
  std::mutex mutex_;
  std::vector<connection_ptr> idle_;
};

// Runs fn between BEGIN and COMMIT; a failing fn (an error value or an exception) rolls back.
// The result of COMMIT decides: a commit that fails (e.g. serialization) returns its error.
template <class Fn>
[[nodiscard]] result<void> in_transaction(PGconn* conn, Fn&& fn);

}  // namespace txmq::pg

#include "txmq/pg/detail/in_transaction.h"
