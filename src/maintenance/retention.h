#pragma once

// Time and size retention (Kafka's cleanup.policy=delete): a background
// thread that, every log.retention.check.interval.ms, moves each
// partition's log start offset past whole closed segments that are older
// than retention.ms (by their largest record timestamp) or that push the
// partition above retention.bytes; the log then deletes those segments.
// The active segment is never deleted.
//
// A fetch racing a deletion gets the data (its file stays open while the
// response is sent) or OFFSET_OUT_OF_RANGE; a consumer below the new log
// start follows its auto.offset.reset.
//
// Thread safety: start() and stop() from one controlling thread; the pass
// itself runs on the retention thread and only calls thread-safe partition
// and log methods.

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "storage/log_types.h"

namespace sluice::cluster {

class partition_manager;

// What one pass decides for one log: the new log start offset, or nullopt
// to leave it. Pure, for tests. Only segments wholly below `high_watermark`
// go (Kafka's deletable segments end at the high watermark): a leader whose
// follower lags a segment behind must not delete batches acks=all has yet
// to confirm, nor a follower what its leader still serves.
std::optional<offset> retention_cutoff(const std::vector<storage::segment_info>& segments, offset log_start,
                                       offset high_watermark, int64_t now_ms, int64_t retention_ms,
                                       int64_t retention_bytes);

class retention_task {
 public:
  retention_task(partition_manager& pm, sluice::clock& clk, int64_t interval_ms)
      : pm_(pm), clk_(clk), interval_ms_(interval_ms) {}
  ~retention_task() { stop(); }

  void start();
  void stop();
  // log.retention.check.interval.ms changed at runtime: the next pass is due
  // `interval_ms` after the previous one (at once if that is past), not at
  // the end of the wait already begun.
  void set_interval_ms(int64_t interval_ms);
  // One pass over every partition; returns how many segments' worth of log
  // start moves were made (for tests and the log line).
  int run_once();

 private:
  partition_manager& pm_;
  sluice::clock& clk_;
  std::mutex mu_;  // guards interval_ms_, interval_changes_, stopping_
  int64_t interval_ms_;
  uint64_t interval_changes_ = 0;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sluice::cluster
