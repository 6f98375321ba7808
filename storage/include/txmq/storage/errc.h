#pragma once

#include <system_error>

namespace txmq::storage {

// Failures of the durable store. Each names a condition the caller can act on; the text a user
// sees comes with it from the call that failed (path, topic, id).
enum class errc : int {
  unknown_topic = 1,     // no topic of that name (and auto-create not asked for)
  topic_exists = 2,      // create_topic of a name already taken with other settings
  invalid_argument = 3,  // a request the store cannot take (bad id length, zero partitions, ...)
  unknown_tx = 4,        // no transaction with that txid (never prepared, or expired)
  tx_not_prepared = 5,   // prepare of a txid already resolved
  unknown_group = 6,
  unknown_partition = 7,
  io_error = 20,         // the file system failed; the store stops taking writes
  corruption = 21,       // stored data failed a checksum or does not parse; never ignored
  store_failed = 22,     // an earlier write failed: restart after fixing the cause
  closed = 23,           // the store is shutting down
  not_a_store = 24,      // the directory holds files that are not a txmq store
  store_full = 25,       // free disk space below store_options::min_free_bytes: appends and
                         // prepares are refused, every other write still runs
  unsupported_format = 26,  // the store's format version is newer (or older) than this build
                            // reads; the text names both
};

const std::error_category& storage_category() noexcept;

inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), storage_category()}; }

}  // namespace txmq::storage

template <>
struct std::is_error_code_enum<txmq::storage::errc> : std::true_type {};
