#include "txmq/storage/errc.h"

#include <string>

namespace txmq::storage {
namespace {

class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "txmq.storage"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::unknown_topic: return "unknown topic";
      case errc::topic_exists: return "topic exists with other settings";
      case errc::invalid_argument: return "invalid argument";
      case errc::unknown_tx: return "unknown transaction";
      case errc::tx_not_prepared: return "transaction already resolved";
      case errc::unknown_group: return "unknown consumer group";
      case errc::unknown_partition: return "unknown partition";
      case errc::io_error: return "storage I/O error";
      case errc::corruption: return "stored data is corrupt";
      case errc::store_failed: return "store failed";
      case errc::closed: return "store is closed";
      case errc::store_full: return "disk nearly full: free space below the configured minimum";
      case errc::not_a_store: return "directory is not a txmq store (or its files are missing)";
      case errc::unsupported_format: return "the store's format version is not one this txmq reads";
    }
    return "storage error " + std::to_string(ev);
  }
};

}  // namespace

const std::error_category& storage_category() noexcept {
  static const category c;
  return c;
}

}  // namespace txmq::storage
