// relay_pg_health (relay.h): pure, apart from the loop in relay.cc.

#include "txmq/relay/relay.h"

namespace txmq::relay {

pg_health_status relay_pg_health(const relay_status& st) {
  if (!st.database_up) return {false, "PostgreSQL unavailable: " + st.last_error};
  if (!st.pg_ok) return {false, "PostgreSQL statements fail: " + st.last_error};
  if (st.pg_waiting >= k_pg_silent) {
    return {false, "PostgreSQL has not answered a statement for " + std::to_string(st.pg_waiting.count()) + " ms"};
  }
  return {};
}

}  // namespace txmq::relay
