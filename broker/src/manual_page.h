#pragma once

// txmq-broker's man page and bash completion (`txmq-broker --man-page`, `--bash-completion`),
// from the settings table of config.cc: the same rows --help prints and the parser reads.

#include <string>
#include <string_view>
#include <vector>

#include "txmq/common/manual.h"

namespace txmq::broker {

// The options of the settings table (config.cc), as --help lists them.
[[nodiscard]] std::vector<common::manual::option> broker_option_docs();

[[nodiscard]] common::manual::page broker_manual_page(std::string_view version);

}  // namespace txmq::broker
