#pragma once

// What /metrics shows: the broker's figures rendered in Prometheus text.
// Read at scrape time from atomics and small per-partition summaries, so a
// scrape never waits on an append.

#include <string>

#include "broker/retention_watch.h"
#include "cluster/partition_manager.h"
#include "metrics/metrics.h"
#include "net/server.h"
#include "storage/log_manager.h"

namespace sluice::broker {

struct metrics_sources {
  cluster::partition_manager* partitions = nullptr;
  const net::server_metrics* server = nullptr;
  const metrics::request_metrics* requests = nullptr;
  retention_watch* watch = nullptr;  // groups against retention, disk against retention
  const storage::log_manager* logs = nullptr;  // the scrubber's progress
};

std::string render_metrics(const metrics_sources& src);

}  // namespace sluice::broker
