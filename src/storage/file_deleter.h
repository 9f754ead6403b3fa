#pragma once

// Delayed removal of retired segment files (docs/log_format.md, "Deleting
// segments"): a segment that leaves the log is renamed to *.deleted at once
// and its files are removed file.delete.delay.ms later by this thread, so
// nothing waits on unlinks and a late reader has had time to let go (an open
// descriptor stays valid after an unlink anyway; the delay is Kafka's habit
// and keeps the files inspectable for a while).
//
// Thread-safe. One per log manager. Deadlines are measured on the clock's
// monotonic time; with a manual clock, tests move it and call run_due().
// The queue holds one entry per retired segment, bounded by the segments
// retired within one delay.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "io/file.h"

namespace sluice::storage {

class file_deleter {
 public:
  file_deleter(io::filesystem& fs, sluice::clock& clk);
  ~file_deleter();  // stop()
  file_deleter(const file_deleter&) = delete;
  file_deleter& operator=(const file_deleter&) = delete;

  // Removes `paths` once `delay_ms` has passed. After stop(), removes them
  // on the calling thread at once.
  void schedule(std::vector<std::string> paths, int64_t delay_ms);
  // Removes every file whose time has come; returns how many paths were
  // handled (a file already gone counts).
  size_t run_due();
  // Removes everything still pending (a clean shutdown: no reader is left)
  // and stops the thread. Idempotent.
  void stop();
  size_t pending() const;

 private:
  void run();
  void remove_all(std::vector<std::string> paths);

  io::filesystem& fs_;
  sluice::clock& clk_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<int64_t, std::string> due_;  // monotonic deadline -> path
  bool stopping_ = false;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace sluice::storage
