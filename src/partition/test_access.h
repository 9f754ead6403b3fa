#pragma once

// For tests only: what a partition keeps to itself.

#include <mutex>

#include "partition/partition.h"
#include "storage/log.h"

namespace sluice::cluster {

// Tests look at a partition's log itself (its config, what recovery found),
// which nothing outside partition/ may.
struct partition_test_access {
  static storage::log& log(partition& p) { return p.log(); }
  // Where the last rebuild of the producer state began replaying the log
  // (the snapshot it loaded, or the log start).
  static offset producers_loaded_from(partition& p) {
    std::lock_guard g(p.append_mu_);
    return p.producers_loaded_from_;
  }
};

}  // namespace sluice::cluster
