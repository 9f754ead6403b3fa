#pragma once

// `sluice-bench storage`: the partition log against the raw disk and page
// cache of the same directory (see README.md in this folder).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sluice::bench {

struct storage_options {
  std::string dir;             // where logs and raw files are written (must exist or be creatable)
  bool json = false;           // one JSON object instead of the text report
  uint64_t mib_per_run = 256;  // bytes written per append run and read per read pass
  int repeats = 5;             // measured pairs (raw, Sluice) after one warm-up pair
  int appenders = 4;           // threads sharing group-commit fsyncs
  std::vector<size_t> batch_kib = {16, 256, 1024};
  int idle_partitions = 1000;
  size_t read_max_bytes = 1 << 20;  // per log::read call (a fetch's per-partition default)
};

// Runs every measurement and prints the report; returns the exit status.
int run_storage(const storage_options& o);

// The child process behind the idle-partitions figure. `phase` "create"
// makes `partitions` logs with one small batch each and shuts down cleanly;
// "hold" opens them all and prints "rss_bytes=N baseline_rss_bytes=M".
int run_idle_child(const std::string& dir, int partitions, const std::string& phase);

}  // namespace sluice::bench
