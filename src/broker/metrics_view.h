#pragma once

// What /metrics shows: the broker's figures rendered in Prometheus text.
// Read at scrape time from atomics and small per-partition summaries, so a
// scrape never waits on an append.

#include <string>

#include "broker/metered_etcd.h"
#include "broker/retention_watch.h"
#include "io/file.h"
#include "metadata/control_plane.h"
#include "metadata/partition_manager.h"
#include "metrics/metrics.h"
#include "net/server.h"
#include "storage/log_manager.h"
#include "share/service.h"
#include "txn/service.h"

namespace sluice::broker {

struct metrics_sources {
  cluster::partition_manager* partitions = nullptr;
  const net::server_metrics* server = nullptr;
  const metrics::request_metrics* requests = nullptr;
  retention_watch* watch = nullptr;  // groups against retention, disk against retention
  const storage::log_manager* logs = nullptr;  // the scrubber's progress
  // A cluster's control plane and its etcd client; null on a single
  // broker, which shows no controller or etcd metrics.
  const cluster::control_plane* control = nullptr;
  const metered_etcd* etcd = nullptr;
  // The transaction coordinator: its open transactions and outcomes.
  txn::service* txns = nullptr;
  // Share groups: members, records held, archived and dead letters.
  share::service* shares = nullptr;
  // The file system holding `log_dir` (log.dirs): its size and the bytes
  // still free to the broker, for disk use against retention. One statvfs
  // a scrape.
  io::filesystem* fs = nullptr;
  std::string log_dir;
};

std::string render_metrics(const metrics_sources& src);

}  // namespace sluice::broker
