#pragma once

// `sluice-bench maintenance`: produce throughput while retention deletes
// segments and the log cleaner compacts, against the same run with both idle
// (see README.md in this folder, "How it measures").

#include <string>
#include <vector>

#include "kafka_util.h"

namespace sluice::bench {

struct maintenance_options {
  broker_target broker;      // always started: its data directory is observed
  int partitions = 16;       // of the measured topic
  double seconds = 10;       // measured produce window per run
  int repeats = 3;           // idle/active pairs
  int prefill_mib = 256;     // written to each maintenance topic before a run
  double churn_rate = 2000;  // msgs/s to each maintenance topic during the window
  bool json = false;
};

// Starts a broker, then per repeat one idle and one active run (alternating
// which goes first). Prints figures; never a pass/fail.
int run_maintenance(const maintenance_options& o);

}  // namespace sluice::bench
