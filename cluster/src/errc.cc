#include "txmq/cluster/errc.h"

#include <string>

namespace txmq::cluster {
namespace {

class category final : public std::error_category {
 public:
  const char* name() const noexcept override { return "txmq.cluster"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::etcd_unavailable: return "etcd unavailable";
      case errc::etcd_error: return "etcd error";
      case errc::bad_response: return "unexpected answer from etcd";
      case errc::lease_not_found: return "lease not found";
      case errc::compare_failed: return "compare failed";
      case errc::not_controller: return "not the controller";
      case errc::invalid_argument: return "invalid argument";
      case errc::not_found: return "not found";
    }
    return "unknown cluster error " + std::to_string(ev);
  }
  // etcd away is worth waiting out; everything else needs a new decision by the caller.
  bool equivalent(int ev, const std::error_condition& c) const noexcept override {
    return c == txmq::condition::retriable && static_cast<errc>(ev) == errc::etcd_unavailable;
  }
};

}  // namespace

const std::error_category& cluster_category() noexcept {
  static const category c;
  return c;
}

}  // namespace txmq::cluster
