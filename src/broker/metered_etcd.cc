#include "broker/metered_etcd.h"

namespace sluice::broker {

void metered_etcd::render(std::string& out) const {
  metrics::header(out, "sluice_etcd_request_seconds", "histogram",
                  "Time of each etcd request of this broker's control plane, retries included.");
  latency_.render(out, "sluice_etcd_request_seconds", "");
  metrics::header(out, "sluice_etcd_request_failures_total", "counter",
                  "etcd requests that failed (unreachable, timed out, outcome unknown or refused).");
  metrics::sample(out, "sluice_etcd_request_failures_total", "", static_cast<double>(failures_total()));
}

}  // namespace sluice::broker
