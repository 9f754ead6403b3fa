#pragma once

// The log manager: owns every partition log under one data directory, the
// shared flusher thread (group commit), the scrubber thread and the shared
// cap on open segment files. The broker creates one at start-up and calls shutdown() at exit.
//
// Thread safety: every method is thread-safe. Logs are handed out as
// shared_ptr; a log removed with remove() stays usable by holders until they
// drop it, but its files are gone and writes fail.
//
// Memory: an idle partition costs its segment list and in-memory indexes
// (8 or 12 bytes per index.interval.bytes of data) and no buffers, so a
// thousand idle partitions fit in a few MiB.

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "storage/file_deleter.h"
#include "storage/log.h"
#include "storage/scrubber.h"

namespace sluice::storage {

struct topic_partition {
  std::string topic;
  int32_t partition = 0;
  auto operator<=>(const topic_partition&) const = default;
  // "<topic>-<partition>", the directory name.
  std::string dir_name() const;
  // Parses a directory name; nullopt when it is not one.
  static std::optional<topic_partition> parse(const std::string& dir_name);
};

struct log_manager_config {
  std::string data_dir;
  log_config default_log;  // for logs found on disk at open and for create() without a config
  size_t max_open_segment_files = limits::default_max_open_segment_files;
  // The scrubber's read rate (sluice.log.scrub.bytes.per.second); 0, the
  // default here, runs none (tests); the broker's default is
  // limits::default_scrub_bytes_per_second.
  int64_t scrub_bytes_per_second = 0;
};

class log_manager {
 public:
  // Creates the data directory if needed, removes leftovers of deletions,
  // and opens (recovering) every partition log found in it. `fs` and `clk`
  // must outlive the manager.
  static result<std::unique_ptr<log_manager>> open(io::filesystem& fs, sluice::clock& clk,
                                                   log_manager_config cfg);
  ~log_manager();  // calls shutdown()

  // The log of a partition, or nullptr when it does not exist.
  std::shared_ptr<log> get(const topic_partition& tp) const;
  // The log of a partition, created empty (with `cfg`) when missing.
  result<std::shared_ptr<log>> get_or_create(const topic_partition& tp,
                                             std::optional<log_config> cfg = std::nullopt);
  // Closes the log and deletes its directory (topic deletion).
  status remove(const topic_partition& tp);
  std::vector<topic_partition> partitions() const;

  // Stops the scrubber, closes every log cleanly (sync, indexes,
  // checkpoints, clean-shutdown marker) and stops the flusher. Returns the
  // first error. Idempotent.
  status shutdown();

  // The scrubber's counters (zeros when it does not run).
  scrub_stats scrubbing() const { return scrubber_->stats(); }

  file_cache& files() { return *files_; }
  file_deleter& deleter() { return *deleter_; }

 private:
  log_manager(io::filesystem& fs, sluice::clock& clk, log_manager_config cfg);
  status load_all();
  log_context context();

  io::filesystem& fs_;
  sluice::clock& clk_;
  const log_manager_config cfg_;
  std::unique_ptr<file_cache> files_;
  std::unique_ptr<flusher> flusher_;
  std::unique_ptr<file_deleter> deleter_;
  std::unique_ptr<scrubber> scrubber_;

  mutable std::mutex mu_;  // guards logs_, shut_down_ and removal counter
  std::map<topic_partition, std::shared_ptr<log>> logs_;
  bool shut_down_ = false;
  uint64_t removals_ = 0;
};

}  // namespace sluice::storage
