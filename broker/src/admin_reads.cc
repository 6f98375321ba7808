#include "admin_reads.h"

#include "txmq/protocol/errc.h"

namespace txmq::broker {

result<dead_letter_counts> count_dead_letters(const storage::store& store, std::string_view group,
                                              const admin_reads& reads) {
  dead_letter_counts out;
  std::optional<storage::message_ref> after;
  for (;;) {
    if (reads.stopping()) {
      return error(protocol::errc::shutting_down, "the broker is shutting down");
    }
    TXMQ_TRY(auto page, store.dead_letters(group, k_admin_scan_page, after));
    for (auto& l : page) {
      ++out.per_partition[{l.topic, l.partition}];
      ++out.total;
    }
    if (page.size() < k_admin_scan_page) return out;
    after = storage::message_ref{page.back().topic, page.back().partition, page.back().offset};
  }
}

}  // namespace txmq::broker
