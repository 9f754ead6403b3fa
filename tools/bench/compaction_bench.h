#pragma once

#include <string>

namespace sluice::bench {

struct compaction_options {
  std::string dir;
  bool json = false;
  int mib = 128;      // log bytes cleaned per run
  int keys = 20'000;  // distinct keys: the rest are updates the cleaner drops
  int repeats = 3;    // measured raw/Sluice pairs after the warm-up
};

// Cleaner throughput (MB of log read per second of clean_log) beside the
// raw sequential read-plus-write rate of the same disk, measured alternately
// in the same run. Prints figures; never a pass/fail.
int run_compaction(const compaction_options& o);

}  // namespace sluice::bench
