#pragma once

// The group-commit threads shared by all logs of a log manager. A log that
// has durability waiters asks for a flush; a flusher thread syncs that log
// once for every waiter that arrived before the sync began, so concurrent
// appenders share one fdatasync. Requests that arrive while a log is being
// synced are covered by its next sync. Several threads (`threads`) sync
// different logs at once; two threads never sync one log at once (the log's
// own flush mutex orders them).
//
// Thread-safe. Durability callbacks run on a flusher thread. The queue holds
// at most one entry per log, so it is bounded by the number of logs.

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/limits.h"

namespace sluice::storage {

class log;

class flusher {
 public:
  explicit flusher(int threads = limits::flusher_threads);  // threads >= 1
  ~flusher();  // stop()
  flusher(const flusher&) = delete;
  flusher& operator=(const flusher&) = delete;

  // Queues `l` for a sync unless it is already queued.
  void request(std::shared_ptr<log> l);
  // Syncs what is queued, then stops the threads. Idempotent. Requests after
  // stop() are served on the calling thread.
  void stop();

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<log>> queue_;
  bool stopping_ = false;
  bool stopped_ = false;
  int running_ = 0;  // threads not yet past their last sync
  std::vector<std::thread> threads_;
};

}  // namespace sluice::storage
