#pragma once

// The error type of the txmq client libraries. An error carries a code (a
// txmq::protocol::errc when the broker refused a request, a txmq::client::errc when the
// failure happened on this side) and a text for a person: the broker's own message when it
// sent one, or what failed locally and what to do.

#include <string>
#include <system_error>

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
  // 12 was `database`: PostgreSQL failures are txmq::pg::errc::database (txmq/pg/errc.h).
  tls_failed = 13,          // TLS setup or handshake failed: untrusted certificate, wrong host name,
                            // a plaintext port, no shared version, a refused client certificate
                            // (not retriable without a change of settings)
};

[[nodiscard]] const std::error_category& client_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), client_category()}; }

// The error and result types are txmq's own (txmq/protocol/result.h), shared with the server;
// the names stay here so that client code reads client::error and client::result<T>.
using error = txmq::error;
using exception = txmq::exception;
template <class T>
using result = txmq::result<T>;

// Turns a wire Error (code number and text) into an error; an unknown code becomes INTERNAL,
// as docs/protocol.md asks, with the number kept in the text.
[[nodiscard]] error from_wire(int code, std::string message);

}  // namespace txmq::client

template <>
struct std::is_error_code_enum<txmq::client::errc> : std::true_type {};
