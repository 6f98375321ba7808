#pragma once

// A test hook of the RocksDB store, private to storage/ (its tests include it from src/): opening
// a store on a given RocksDB Env, such as one whose file system fails on demand, as RocksDB's
// own FaultInjectionTestFS does.

#include <memory>

#include <rocksdb/env.h>

#include "txmq/storage/store.h"

namespace txmq::storage::detail {

// open_store() with `env` in place of the default Env (nullptr: the default). The store owns
// `env`. An in-memory store (options.in_memory) ignores it and uses RocksDB's in-memory Env.
[[nodiscard]] result<std::unique_ptr<store>> open_store_on_env(store_options options,
                                                              std::unique_ptr<rocksdb::Env> env);

}  // namespace txmq::storage::detail
