#pragma once

// The scrubber (docs/log_format.md, "Damaged batches"): one background
// thread that reads every segment of every log, checks each batch's header
// and CRC (log::scrub), and has damage skipped by reads and rewritten away.
// After a clean shutdown segments are trusted without a scan, so this is
// what finds damage in them, and damage that appears later (bit rot).
//
// Pacing: at most `bytes_per_second` are read, averaged over a pass (the
// thread sleeps after each chunk of limits::recovery_scan_chunk_bytes until
// the pass is back on its budget), measured with the clock of base/clock.h.
// A pass starts at start() and then at most every
// limits::scrub_pass_interval_ms.
//
// Threads: start() and stop() from the owner (log_manager). stop() wakes
// the thread out of any sleep and waits for it; a scan in progress stops at
// its next chunk and leaves the log as it was. Counters may be read from
// any thread.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "storage/log_types.h"

namespace sluice::storage {

class log;

struct scrub_stats {
  uint64_t bytes = 0;           // read and checked since start
  uint64_t passes = 0;          // finished passes over every log
  uint64_t damaged_ranges = 0;  // found by the scrubber (recovery's are counted per log)
};

class scrubber {
 public:
  // `logs` lists the logs to scrub; called at the start of each pass.
  scrubber(sluice::clock& clk, int64_t bytes_per_second,
           std::function<std::vector<std::shared_ptr<log>>()> logs);
  ~scrubber();  // stop()
  scrubber(const scrubber&) = delete;
  scrubber& operator=(const scrubber&) = delete;

  // Starts the thread; nothing when bytes_per_second is 0.
  void start();
  void stop();
  scrub_stats stats() const;
  // Asks the thread to remove the damaged ranges a read found in `l`
  // (log::remove_known_damage), soon: at its next chunk or at once when
  // idle. Any thread; never blocks on I/O. Nothing when the thread does not
  // run (the ranges stay skipped and are removed after the next start).
  void request_removal(std::shared_ptr<log> l);

 private:
  void run();
  // Scrubs every log once, paced; false when stopped.
  bool pass();
  // Called after each chunk: sleeps until the pass is within its budget.
  bool pace(uint64_t bytes);
  // Handles the removal requests queued so far.
  void remove_requested();

  sluice::clock& clk_;
  const int64_t bytes_per_second_;
  const std::function<std::vector<std::shared_ptr<log>>()> logs_;

  std::mutex mu_;  // guards stopping_ (for the condition variable) and requests_
  std::condition_variable cv_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> running_{false};  // the thread was started
  std::vector<std::shared_ptr<log>> requests_;  // one entry per log at most
  std::thread thread_;

  // The pass in progress (scrubber thread only).
  int64_t pass_start_ms_ = 0;
  uint64_t pass_bytes_ = 0;

  std::atomic<uint64_t> bytes_{0}, passes_{0}, ranges_{0};
};

}  // namespace sluice::storage
