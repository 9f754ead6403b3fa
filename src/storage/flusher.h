#pragma once

// The group-commit threads shared by all logs of a log manager. A log that
// has durability waiters asks for a flush; a flusher thread syncs that log
// once for every waiter that arrived before the sync began, so concurrent
// appenders share one fdatasync. Requests that arrive while a log is being
// synced are covered by its next sync. A thread takes every log queued at
// once and syncs them as one round (log::flush_together), so many
// partitions' commits share the device's work. One round runs at a time
// (rounds that overlap contend for the same device flushes and make each
// other longer); the other threads (`threads`) meanwhile seal what the
// previous round's logs rolled and serve flush.ms timers, so a seal's
// index writes never hold up the next round.
//
// Logs with a finite flush.ms also ask for a sync some time ahead
// (request_after); a timer heap holds those, at most one per log (the log
// asks again only after its timer fired). The timers run on the flusher's
// clock (base/clock.h, "Waiting on a clock"), so a test moves them with a
// manual_clock.
//
// Thread-safe. Durability callbacks run on a flusher thread. The queue and
// the timer heap each hold at most one entry per log, so they are bounded by
// the number of logs.

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/limits.h"

namespace sluice::storage {

class log;

class flusher {
 public:
  // `clk` outlives the flusher; threads >= 1.
  explicit flusher(sluice::clock& clk, int threads = limits::flusher_threads);
  ~flusher();  // stop()
  flusher(const flusher&) = delete;
  flusher& operator=(const flusher&) = delete;

  // Queues `l` for a sync unless it is already queued.
  void request(std::shared_ptr<log> l);
  // Calls l->flush_on_timer() on a flusher thread once the clock has moved
  // `ms` milliseconds from now (capped at a day: a log re-arms after each). The log keeps at most one
  // such request outstanding.
  void request_after(std::shared_ptr<log> l, int64_t ms);
  // Calls l->prepare_tail() on the preparing thread, one log at a time in
  // the order asked, beside the rounds (its zeros and their sync never hold
  // up a group commit). The log asks again only after its call began.
  void request_prepare(std::shared_ptr<log> l);
  // Runs `fn` on a flusher thread, beside the rounds: checkpoint writes
  // and syncs that must not run on the thread asking (an I/O thread), in
  // the order asked. After stop(), on the calling thread.
  void run_task(std::function<void()> fn);
  // Returns once no job is queued or running (timers not yet due aside).
  // For tests that drop a log without close() to act out a crash: its
  // queued sync or seal must not touch files after the successor opened.
  void wait_idle();
  // Syncs what is queued, then stops the threads. Idempotent. Requests after
  // stop() are served on the calling thread.
  void stop();

 private:
  struct job {
    std::shared_ptr<log> l;
    bool timer = false;  // call flush_on_timer (a flush.ms timer fired)
  };
  struct timed {
    int64_t at_ms;  // on clk_.monotonic_ms()
    std::weak_ptr<log> l;  // a log deleted meanwhile is not kept alive by its timer
    bool operator>(const timed& o) const { return at_ms > o.at_ms; }
  };

  void run();
  void run_preparing();
  // No sync, seal or tail preparation queued or running (with mu_ held).
  bool idle_locked() const {
    return queue_.empty() && tasks_.empty() && busy_ == 0 && to_prepare_.empty() && !preparing_;
  }
  // Moves the timers that are due to the queue (with mu_ held).
  void promote_due_locked();

  sluice::clock& clk_;
  std::mutex mu_;
  std::mutex round_mu_;  // held by the thread running a round's syncs
  std::condition_variable cv_;
  std::condition_variable idle_cv_;
  int busy_ = 0;  // jobs taken off the queue and not yet done
  std::deque<job> queue_;
  std::deque<std::function<void()>> tasks_;  // run_task's, in order; mu_
  std::priority_queue<timed, std::vector<timed>, std::greater<>> timers_;
  bool stopping_ = false;
  bool stopped_ = false;
  int running_ = 0;  // threads not yet past their last sync
  std::vector<std::thread> threads_;
  std::deque<std::weak_ptr<log>> to_prepare_;  // mu_; at most one entry per log; keeps none alive
  bool preparing_ = false;                       // mu_: a prepare_tail is running
  std::condition_variable prepare_cv_;
  std::thread preparer_;
};

}  // namespace sluice::storage
