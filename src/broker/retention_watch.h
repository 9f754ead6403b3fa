#pragma once

// The operator's view of consumer groups against retention, and of disk use
// against what retention will hold (docs/operations.md defines each figure):
//
// - per group and partition: committed offset, lag in messages and in
//   seconds, retention headroom (maintenance/headroom.h) and its alert flag, and
//   a counter of messages the group lost to retention;
// - per partition and in total: the write rate over
//   sluice.metrics.write.rate.window.ms and the bytes retention will hold at
//   that rate.
//
// Cost. Everything is computed when /metrics is scraped, from atomics, the
// segment summaries the scrape copies anyway, and at most one batch header
// read (through the offset index, one pread) per group and partition whose
// committed offset moved since the previous scrape. The data path pays one
// relaxed atomic add per appended batch (cluster::partition::bytes_appended).
// A sampler thread reads those counters every window /
// limits::write_rate_samples_per_window.
//
// Losses. A group loses messages when retention moves the log start offset
// above its committed offset: log_start - committed of them, each counted
// once however often it is seen. They are accounted both at each scrape and
// whenever the coordinator replaces or removes a committed offset (so a
// consumer that resets itself between two scrapes is still counted). The
// counters live as long as the broker process.
//
// Thread safety: every public method is thread-safe. on_offset_replaced runs
// with the group coordinator's mutex held; it reads a partition's log start
// offset and then takes mu_, a leaf lock that is never held across I/O or
// calls into other modules.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/clock.h"
#include "group/coordinator.h"
#include "metadata/partition_manager.h"

namespace sluice::broker {

class retention_watch {
 public:
  // One partition as the scrape sees it (built once per scrape and shared
  // with the rest of /metrics).
  struct partition_row {
    std::string topic;
    int32_t partition = 0;
    std::string labels;  // topic="...",partition="..."
    std::shared_ptr<cluster::partition> part;
    // Read once per scrape, so every section of one scrape agrees.
    int64_t log_start = 0;
    int64_t log_end = 0;
    int64_t high_watermark = 0;
    std::vector<storage::segment_info> segments;
    uint64_t size_bytes = 0;
    cluster::partition::storage_health health;
  };

  // `coord` may be null (no group figures). Call set_offset_observer on the
  // coordinator with on_offset_replaced before the coordinator starts.
  retention_watch(cluster::partition_manager& pm, group::coordinator* coord, sluice::clock& clk,
                  int64_t window_ms);
  ~retention_watch();
  retention_watch(const retention_watch&) = delete;
  retention_watch& operator=(const retention_watch&) = delete;

  // The write-rate sampler thread.
  void start();
  void stop();  // idempotent
  // One sample of every partition's appended bytes (the thread's work; tests).
  void sample_rates();

  // The coordinator's offset observer (group::coordinator::offset_observer).
  void on_offset_replaced(const std::string& group, const std::string& topic, int32_t partition,
                          int64_t previous_offset);

  // Appends the group and disk sections of /metrics for `rows`.
  void render(std::string& out, const std::vector<partition_row>& rows);

  // Bytes per second appended to the partition over the window (since it
  // was opened when that is more recent; 0 before the first sample).
  double write_rate(const cluster::partition& p, const std::string& topic, int32_t partition);

  // Messages (group, topic, partition) has lost to retention so far.
  int64_t lost(const std::string& group, const std::string& topic, int32_t partition) const;

 private:
  using key = std::tuple<std::string, std::string, int32_t>;  // group, topic, partition
  struct group_partition {
    int64_t lost = 0;
    int64_t counted_below = -1;  // every offset below this was already judged
    int64_t ts_offset = -1;      // committed offset whose batch timestamp is cached
    int64_t ts_ms = -1;
  };
  struct rate_ring {
    const cluster::partition* identity = nullptr;  // a recreated topic restarts the ring
    std::vector<std::pair<int64_t, uint64_t>>
        samples;  // (monotonic ms, bytes appended), oldest first
  };

  // Counts the messages below `log_start` that `committed` had not passed.
  static void account(group_partition& gp, int64_t committed, int64_t log_start);
  void prune_locked(const std::map<key, bool>& live);

  cluster::partition_manager& pm_;
  group::coordinator* const coord_;
  sluice::clock& clk_;
  const int64_t window_ms_;

  mutable std::mutex mu_;  // guards groups_, rates_ and last_sample_ms_
  std::map<key, group_partition> groups_;
  std::map<std::pair<std::string, int32_t>, rate_ring> rates_;
  int64_t last_sample_ms_ = -1;  // monotonic time of the last sample_rates()

  std::mutex thread_mu_;  // guards stopping_
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sluice::broker
