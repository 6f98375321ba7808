#pragma once

// `txmq webhook create|list|delete|attempts|replay|rotate-secret` (docs/semantics.md §5, cli/README.md): webhook
// subscriptions on the broker. Each command has an options function and an execute function
// taking the parsed options; bad arguments throw boost::program_options::error (a usage error).
// Private to txmq_cli.

#include <boost/program_options.hpp>

#include "session.h"

namespace txmq::cli::detail {

void webhook_create_options(boost::program_options::options_description& o);
int webhook_create(session& s, const boost::program_options::variables_map& vm);
int webhook_list(session& s, const boost::program_options::variables_map& vm);
int webhook_delete(session& s, const boost::program_options::variables_map& vm);
void webhook_attempts_options(boost::program_options::options_description& o);
int webhook_attempts(session& s, const boost::program_options::variables_map& vm);
void webhook_replay_options(boost::program_options::options_description& o);
int webhook_replay(session& s, const boost::program_options::variables_map& vm);
void webhook_rotate_options(boost::program_options::options_description& o);
int webhook_rotate(session& s, const boost::program_options::variables_map& vm);

}  // namespace txmq::cli::detail
