#pragma once

// Log compaction (Kafka's cleanup.policy=compact): the log cleaner keeps the
// newest record per key in the closed segments of compacted partitions.
//
// One clean of one log, as in Kafka's LogCleaner:
//   1. The dirty part starts at the cleaner checkpoint (storage's
//      cleaner-offset-checkpoint) and ends before the first closed segment
//      younger than min.compaction.lag.ms, never in the active segment.
//   2. A bounded key-hash -> newest-offset map (offset_map) is filled from
//      the dirty part; when it is full the clean covers only what fitted
//      and the next clean goes on from there.
//   3. Every closed segment from the log start up to the last mapped one is
//      rewritten in groups no larger than segment.bytes through storage's
//      crash-safe rewrite path (docs/log_format.md, "Replacing segments").
//      A record goes when the map holds a newer offset for its key, or when
//      it is a tombstone whose batch's delete horizon has passed. Control
//      batches stay; a batch that loses records is rebuilt in its original
//      codec with its original base offset, last offset delta and producer
//      fields; the last batch of each idempotent producer stays, emptied if
//      need be. A batch that keeps a tombstone gets a delete horizon of
//      clean time + delete.retention.ms.
//   4. The checkpoint moves to the end of the mapped part.
// A log is picked when its dirty ratio (dirty bytes / bytes of closed
// segments) reaches min.cleanable.dirty.ratio, when its oldest dirty record
// is older than max.compaction.lag.ms, or when a delete horizon it holds has
// passed; the dirtiest goes first.
//
// Threads: log.cleaner.threads background threads, each with its own map
// (log.cleaner.dedupe.buffer.size split between them), sleeping
// log.cleaner.backoff.ms when nothing needs cleaning. A log is cleaned by
// one thread at a time. Reading and writing run without the log's mutex;
// only the swap takes it (storage::log::replace_segments). stop() joins the
// threads; a clean in progress stops at its next batch and leaves the log
// unchanged.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "config/topic_config.h"
#include "storage/aborted_index.h"
#include "storage/log_manager.h"
#include "storage/log_types.h"

namespace sluice::storage {
class log;
}  // namespace sluice::storage

namespace sluice::cluster {

class partition;
class partition_manager;

// A fixed-size open-addressing table from a 128-bit key hash to the newest
// offset seen for that key (Kafka's SkimpyOffsetMap, with 128-bit hashes in
// place of MD5). 24 bytes per slot; full at 90% of its slots.
class offset_map {
 public:
  struct key_hash {
    uint64_t lo = 0, hi = 0;
    bool operator==(const key_hash&) const = default;
  };
  static key_hash hash(std::span<const uint8_t> key);

  explicit offset_map(size_t memory_bytes);
  // Records `o` as the newest offset of `k`. False when the key is new and
  // the map is full (nothing changes).
  bool put(const key_hash& k, int64_t o);
  std::optional<int64_t> get(const key_hash& k) const;
  void clear();
  size_t size() const { return used_; }
  size_t capacity() const { return max_used_; }

 private:
  struct slot {
    key_hash k;
    int64_t o = -1;  // -1: empty
  };
  size_t find(const key_hash& k) const;
  std::vector<slot> slots_;
  size_t used_ = 0;
  size_t max_used_ = 0;
};

// What one clean decides and does, and the per-log figures it leaves.
struct clean_result {
  bool cleaned = false;        // segments were rewritten
  uint64_t bytes_read = 0;     // of the rewritten segments
  uint64_t bytes_written = 0;  // of the cleaned copies
  uint64_t records_removed = 0;
  offset map_end;                       // the new cleaner checkpoint
  int64_t next_horizon_ms = INT64_MAX;  // earliest delete horizon kept
};

// Cleaner figures per log, for metrics.
struct cleaner_stats {
  uint64_t cleans = 0;
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  uint64_t records_removed = 0;
  int64_t last_clean_ms = -1;  // wall clock of the last finished clean
  double last_dirty_ratio = 0;
};

// How dirty a log is (pure, for tests and picking): the dirty ratio over
// closed segments and the end of the cleanable part.
struct dirtiness {
  double ratio = 0;
  uint64_t dirty_bytes = 0;
  offset cleanable_end;  // base of the first segment the clean may not touch
  bool past_max_lag = false;
};
// Only segments wholly below `stable_end` are cleanable: the partition's
// last stable offset (at most its high watermark), as Kafka bounds its
// cleaner. A record not yet committed may be truncated by a leader change,
// and one of an open transaction may yet be aborted, so neither may be what
// makes a committed record of its key go.
dirtiness measure_dirtiness(const std::vector<storage::segment_info>& segments, offset first_dirty,
                            offset stable_end, int64_t now_ms, int64_t min_lag_ms, int64_t max_lag_ms);

// Cleans one log once (steps 1-4 above) with `map`. `producer_last` holds
// the base offsets of each idempotent producer's last batch. `stop` is
// checked between batches. errc::not_found when the log changed under the
// clean (nothing changed then); other errors as they come.
// `stable_end`: the partition's last stable offset (measure_dirtiness).
// `aborted`: the partition's aborted transactions below it: their records
// never enter the map, so an aborted record never makes a committed record
// of its key go (it stays until a later committed record of the key
// replaces it; readers skip it by the aborted index).
result<clean_result> clean_log(storage::log& log, const config::topic_config& cfg, offset_map& map,
                               const std::vector<offset>& producer_last, offset stable_end,
                               const std::vector<storage::aborted_txn>& aborted, int64_t now_ms,
                               const std::atomic<bool>& stop);

class log_cleaner {
 public:
  log_cleaner(partition_manager& pm, sluice::clock& clk, int threads, int64_t dedupe_buffer_bytes,
              int64_t backoff_ms);
  ~log_cleaner();  // stop()

  void start();
  void stop();
  // Cleans the dirtiest cleanable log on the calling thread (tests, tools);
  // returns whether one was cleaned.
  bool run_once();
  // Figures for one partition ("topic-3"); zero when never cleaned.
  cleaner_stats stats(const std::string& log_name) const;

 private:
  void run(size_t thread_index);
  bool clean_one(std::unique_ptr<offset_map>& map);

  partition_manager& pm_;
  sluice::clock& clk_;
  const int threads_;
  const size_t map_bytes_per_thread_;
  const int64_t backoff_ms_;
  std::atomic<bool> stopping_{false};
  mutable std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::set<std::string> busy_;                  // logs being cleaned now
  std::map<std::string, cleaner_stats> stats_;  // by log name
  std::map<std::string, int64_t> horizons_;     // earliest kept delete horizon by log name
  std::vector<std::thread> workers_;
  std::unique_ptr<offset_map> shared_map_;  // for run_once
};

}  // namespace sluice::cluster
