#pragma once

// Reads one partition of a stopped broker's store into a history. A broker's Fetch serves only
// the partitions it leads, below the high watermark (docs/cluster.md "Consumers"), so a
// follower's own copy of a log can only be compared by opening its store once it has stopped.

#include <cstdint>
#include <filesystem>
#include <string>

#include "history_checker.h"

namespace txmq::test {

// Every message of `topic`/`partition` in the store under `dir`, in offset order, recorded as
// consumed in `h`. An empty string, or why the store could not be opened or read.
[[nodiscard]] std::string read_stopped_log(const std::filesystem::path& dir, const std::string& topic,
                                           std::uint32_t partition, history& h);

}  // namespace txmq::test
