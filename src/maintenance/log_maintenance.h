#pragma once

// The background work that keeps the logs within their topics' limits:
// retention (delete.retention by time and size, every
// log.retention.check.interval.ms) and the log cleaner (compaction, when
// log.cleaner.enable). It walks the partitions a partition_manager hosts and
// is owned beside it, not by it: the partition manager opens, creates and
// deletes partitions; this deletes and rewrites their old segments.
//
// Lifecycle: start() after the partition manager is open; stop() (also the
// destructor) before the partition manager shuts down, since the threads
// walk its partitions. Thread safety: start and stop from one thread; the
// accessors are for tests and the metrics view.

#include <memory>

#include "base/clock.h"
#include "maintenance/compaction.h"
#include "maintenance/retention.h"

namespace sluice::cluster {

class partition_manager;

class log_maintenance {
 public:
  // `pm` must outlive this. Settings come from pm's broker config; a change
  // of log.retention.check.interval.ms applies at once.
  log_maintenance(partition_manager& pm, sluice::clock& clk);
  ~log_maintenance();
  log_maintenance(const log_maintenance&) = delete;
  log_maintenance& operator=(const log_maintenance&) = delete;

  // Starts retention and, when log.cleaner.enable and log.cleaner.threads
  // > 0, the cleaner. Call once.
  void start();
  // Stops both and joins their threads. Idempotent.
  void stop();

  retention_task* retention() { return retention_.get(); }
  log_cleaner* cleaner() { return cleaner_.get(); }

 private:
  partition_manager& pm_;
  sluice::clock& clk_;
  std::unique_ptr<retention_task> retention_;
  std::unique_ptr<log_cleaner> cleaner_;
};

}  // namespace sluice::cluster
