#pragma once

// The group-commit thread shared by all logs of a log manager. A log that
// has durability waiters asks for a flush; the flusher syncs that log once
// for every waiter that arrived before the sync began, so concurrent
// appenders share one fdatasync. Requests that arrive while a log is being
// synced are covered by its next sync.
//
// Thread-safe. Durability callbacks run on this thread. The queue holds at
// most one entry per log, so it is bounded by the number of logs.

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace sluice::storage {

class log;

class flusher {
 public:
  flusher();
  ~flusher();  // stop()
  flusher(const flusher&) = delete;
  flusher& operator=(const flusher&) = delete;

  // Queues `l` for a sync unless it is already queued.
  void request(std::shared_ptr<log> l);
  // Syncs what is queued, then stops the thread. Idempotent. Requests after
  // stop() are served on the calling thread.
  void stop();

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<log>> queue_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace sluice::storage
