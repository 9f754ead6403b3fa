#pragma once

// The broker's "purgatory": one thread with an asio io_context where
// requests that wait (long-polling fetches) park until data arrives or their
// time runs out. Work is posted from any thread; timers fire here.
//
// Time: a delay is measured on the clock given at construction (base/clock.h,
// "Waiting on a clock"): the asio timer only sleeps, and the clock decides
// whether the delay has passed, so a test moves waits with a manual_clock.
//
// Thread safety: post(), after(), timer::cancel() and drain() are
// thread-safe. Everything posted runs on the delayed-ops thread, one task at
// a time.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include "base/clock.h"

namespace sluice::kafka {

class delayed_ops {
 public:
  // A pending after(). Its function runs exactly once: on the delayed-ops
  // thread when its time comes, or on the thread that cancels it.
  class timer {
   public:
    timer(int64_t at_ms, std::function<void(bool)> fn) : at_ms_(at_ms), fn_(std::move(fn)) {}
    // Runs the function now, on the calling thread, with cancelled = true,
    // unless it ran already (or is running: then it returns at once). The
    // caller must not hold a lock the function takes. Thread-safe.
    void cancel();

   private:
    friend class delayed_ops;
    // Takes the function if it has not run; the one caller that gets it
    // runs it.
    std::function<void(bool)> take();

    const int64_t at_ms_;  // on the clock's monotonic_ms()
    std::mutex mu_;        // guards fn_
    std::function<void(bool)> fn_;  // emptied when it runs
  };

  // `clk` outlives this object.
  explicit delayed_ops(sluice::clock& clk);
  ~delayed_ops();  // stop()s
  delayed_ops(const delayed_ops&) = delete;
  delayed_ops& operator=(const delayed_ops&) = delete;

  // Runs `fn` on the delayed-ops thread.
  void post(std::function<void()> fn);
  // Calls `fn(false)` on the delayed-ops thread once the clock has moved
  // `delay` from now, or `fn(true)` earlier if the returned timer is
  // cancelled (on the cancelling thread) or the broker drains. Costs the
  // delayed-ops thread no wake-up unless the new timer is due before every
  // other: requests that wait (a produce for its replicas, a parked fetch)
  // arm one each, and almost all are cancelled long before they are due.
  // The caller keeps the returned timer until its function has run: the
  // queue holds timers weakly, and a timer nobody holds never fires.
  std::shared_ptr<timer> after(std::chrono::milliseconds delay, std::function<void(bool cancelled)> fn);

  // Shutdown, step 1: fires every pending timer now (cancelled) and makes
  // later after() calls fire at once, so waiting requests are answered
  // promptly while the server drains.
  void drain();
  // Shutdown, step 2: runs what is queued and joins the thread. Idempotent.
  void stop();

 private:
  struct entry {
    int64_t at_ms;
    std::weak_ptr<timer> t;  // a cancelled timer its owner dropped is gone
    bool operator>(const entry& o) const { return at_ms > o.at_ms; }
  };
  // On the delayed-ops thread: fires the timers that are due and sleeps
  // toward the next deadline (at most the clock's max_sleep_ms, so a
  // manual clock is looked at again).
  void wake();

  sluice::clock& clk_;
  asio::io_context io_;
  std::unique_ptr<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  asio::steady_timer wake_timer_;  // the delayed-ops thread's
  std::thread thread_;
  std::mutex mu_;  // guards heap_, wake_at_ms_, draining_, stopped_
  // Every timer not yet due, earliest first. Cancelled ones stay until
  // their time or the next sweep; each is one small entry.
  std::priority_queue<entry, std::vector<entry>, std::greater<>> heap_;
  // When the delayed-ops thread next looks at heap_ (INT64_MAX: it sleeps
  // until told): after() posts a wake only for a timer due before it.
  int64_t wake_at_ms_ = INT64_MAX;
  bool draining_ = false;
  bool stopped_ = false;
};

}  // namespace sluice::kafka
