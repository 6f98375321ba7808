#include "store_reader.h"

#include "txmq/storage/store.h"

namespace txmq::test {

std::string read_stopped_log(const std::filesystem::path& dir, const std::string& topic, std::uint32_t partition,
                             history& h) {
  storage::store_options o;
  o.dir = dir;
  auto st = storage::open_store(o);
  if (!st) return "cannot open the store in " + dir.string() + ": " + st.error().message;
  storage::read_request rr;
  rr.topic = topic;
  rr.partition = partition;
  rr.max_messages = 1000;
  for (;;) {
    auto r = st.value()->read(rr);
    if (!r) return "cannot read " + topic + "/" + std::to_string(partition) + ": " + r.error().message;
    for (const auto& m : r.value().messages) h.consumed(m.id(), m.key(), m.body(), m.partition(), m.offset());
    if (r.value().messages.empty()) return {};
    rr.from_offset = r.value().next_offset;
  }
}

}  // namespace txmq::test
