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
#include <set>
#include <span>
#include <string>
#include <vector>

#include "base/limits.h"
#include "storage/file_deleter.h"
#include "storage/log_types.h"
#include "storage/scrubber.h"

namespace sluice::storage {

class file_cache;
class flusher;
class log;
struct log_context;


// The topic-name prefix kept by the hashed directory form, and the stem
// "<prefix>~<hash>" that two topics would share if their directories could
// collide (partition_manager refuses to create the second one).
inline constexpr size_t hashed_dir_topic_prefix_bytes = 200;
std::string hashed_dir_stem(const std::string& topic);

struct log_manager_config {
  std::string data_dir;
  log_config default_log;  // for logs found on disk at open and for create() without a config
  size_t max_open_segment_files = limits::default_max_open_segment_files;
  // The scrubber's read rate (sluice.log.scrub.bytes.per.second); 0, the
  // default here, runs none (tests); the broker's default is
  // limits::default_scrub_bytes_per_second.
  int64_t scrub_bytes_per_second = 0;
  // sluice.follower.cache.drop.behind.bytes (log_context); 0, the default here,
  // drops nothing.
  uint64_t follower_cache_drop_behind_bytes = 0;
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
  // The same for many partitions at once, one answer per entry in order:
  // each its log, or the error that kept it from being opened or created
  // (one partition's failure is not another's).
  //
  // Durability of creation: a log is handed out (here, or to get() and
  // get_or_create()) only once its directory's name is durable in the data
  // directory, so that whatever is later appended and synced to it cannot
  // vanish with its directory in a crash. The logs created together share
  // that sync: one sync of the data directory per
  // limits::logs_created_per_directory_sync logs (with fsync on) instead
  // of one each, which creating 20,000 partitions paid 20,000 times. When
  // that sync fails, none of the logs it covered is handed out (each
  // answers the error; a later call opens their directories again).
  struct log_spec {
    topic_partition tp;
    std::optional<log_config> cfg;  // the manager's default when empty
  };
  std::vector<result<std::shared_ptr<log>>> get_or_create_all(std::span<const log_spec> wanted);
  // Closes the log and deletes its directory (topic deletion): the
  // directory is renamed "<dir name, cut to fit>.<32 hex>-delete" (synced),
  // then removed; open() removes any such directory a crash left behind.
  // errc::not_found when the manager holds no such log.
  status remove(const topic_partition& tp);
  // The same by directory name (leftovers found at open that no topic owns).
  status remove_dir(const std::string& dir_name);
  // Directory names of every log held, sorted.
  std::vector<std::string> dir_names() const;

  // Stops the scrubber, closes every log (sync, indexes; nothing for a log
  // unchanged since a clean open) on a few threads, then writes the
  // clean-shutdown record naming every log that closed cleanly, atomically
  // and synced once, and stops the flusher. Returns the first error.
  // Idempotent.
  status shutdown();

  // "<data_dir>/.clean-shutdown" (docs/log_format.md): the logs that the
  // last shutdown closed cleanly. open() reads it, removes it durably, then
  // opens those logs without a scan; a log it does not name is recovered
  // as after a crash. Per-log "clean-shutdown" markers (written by
  // log::close, and by earlier versions at shutdown) are honoured as well.
  static constexpr const char* kCleanShutdownRecord = ".clean-shutdown";

  // The scrubber's counters (zeros when it does not run).
  scrub_stats scrubbing() const { return scrubber_->stats(); }

  file_cache& files() { return *files_; }
  file_deleter& deleter() { return *deleter_; }
  // Returns once the flusher has no job queued or running (flusher::
  // wait_idle): a simulation that steps a broker from one thread waits so
  // that the seals and syncs an append asked for land at a point its seed
  // decides, not when a thread gets to them.
  void wait_idle();

 private:
  log_manager(io::filesystem& fs, sluice::clock& clk, log_manager_config cfg);
  status load_all();
  // Reads the clean-shutdown record (an empty set when there is none or it
  // is damaged) and removes it, synced, before any log is opened.
  result<std::set<std::string>> take_clean_shutdown_record();
  status write_clean_shutdown_record(const std::vector<std::string>& clean);
  log_context context();

  io::filesystem& fs_;
  sluice::clock& clk_;
  const log_manager_config cfg_;
  std::unique_ptr<file_cache> files_;
  std::unique_ptr<flusher> flusher_;
  std::unique_ptr<file_deleter> deleter_;
  std::unique_ptr<scrubber> scrubber_;

  mutable std::mutex mu_;                             // guards logs_ and shut_down_
  std::map<std::string, std::shared_ptr<log>> logs_;  // by directory name
  bool shut_down_ = false;
};

}  // namespace sluice::storage
