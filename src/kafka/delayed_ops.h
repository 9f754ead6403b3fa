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
#include <thread>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

#include "base/clock.h"

namespace sluice::kafka {

class delayed_ops {
 public:
  // A pending after(). Its function runs exactly once, on the delayed-ops
  // thread.
  class timer {
   public:
    explicit timer(asio::io_context& io) : t_(io) {}
    // Runs the function now with cancelled = true, unless it ran already.
    // Thread-safe.
    void cancel();

   private:
    friend class delayed_ops;
    asio::steady_timer t_;                // touched on the delayed-ops thread only, once armed
    int64_t at_ms_ = 0;                   // on the clock's monotonic_ms()
    std::function<void(bool)> fn_;        // emptied when it runs
    std::atomic<bool> cancelled_{false};
    std::weak_ptr<timer> self_;
  };

  // `clk` outlives this object.
  explicit delayed_ops(sluice::clock& clk = sluice::clock::system());
  ~delayed_ops();  // stop()s
  delayed_ops(const delayed_ops&) = delete;
  delayed_ops& operator=(const delayed_ops&) = delete;

  // Runs `fn` on the delayed-ops thread.
  void post(std::function<void()> fn);
  // Calls `fn(false)` on the delayed-ops thread once the clock has moved
  // `delay` from now, or `fn(true)` earlier if the returned timer is
  // cancelled or the broker drains.
  std::shared_ptr<timer> after(std::chrono::milliseconds delay, std::function<void(bool cancelled)> fn);

  // Shutdown, step 1: fires every pending timer now (cancelled) and makes
  // later after() calls fire at once, so waiting requests are answered
  // promptly while the server drains.
  void drain();
  // Shutdown, step 2: runs what is queued and joins the thread. Idempotent.
  void stop();

 private:
  // On the delayed-ops thread: runs the timer's function if it was
  // cancelled or the clock has reached its deadline, else sleeps toward the
  // deadline and looks again.
  void arm(std::shared_ptr<timer> t);

  sluice::clock& clk_;
  asio::io_context io_;
  std::unique_ptr<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread thread_;
  std::mutex mu_;  // guards timers_, draining_, stopped_
  std::vector<std::weak_ptr<timer>> timers_;
  bool draining_ = false;
  bool stopped_ = false;
};

}  // namespace sluice::kafka
