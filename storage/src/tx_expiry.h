#pragma once

// What the transaction family's compaction filter reads of a record (rocksdb_store_open.cc).

#include <cstdint>
#include <string_view>

namespace txmq::storage::detail {

// Whether a serialized TxRecord was resolved (committed or rolled back) before `cutoff_ms`:
// false for any other state and for bytes that do not read as a record (kept, as a failed parse
// kept them).
bool resolved_before(std::string_view bytes, std::int64_t cutoff_ms);

}  // namespace txmq::storage::detail
