#pragma once

// Time behind a small interface so tests can move it (segment.ms rolls,
// retention, session timeouts, flush.ms, long polls) without sleeping.
// Every read of the time in Sluice goes through here: nothing else calls
// std::chrono's clocks.
//
// Waiting on a clock. A thread that waits until a deadline on a clock (a
// condition variable's wait_for, an asio timer) sleeps
// `sleep_ms_until(deadline)` of real time, then reads the clock again and
// sleeps again if the deadline is still ahead. The real clock moves by
// itself, so one sleep reaches the deadline (at most
// limits::max_clock_sleep_ms at a time, so no duration overflows). A manual
// clock moves only when a test advances it, so its waiters look again every
// limits::manual_clock_poll_ms: a waiter notices an advance within that much
// real time. Such a test advances the clock and then waits, with a generous
// bound, for the effect; no sleep decides whether it passes.

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "base/limits.h"

namespace sluice {

class clock {
 public:
  virtual ~clock() = default;
  // Wall-clock milliseconds since the Unix epoch (record timestamps, retention).
  virtual int64_t now_ms() const = 0;
  // Monotonic milliseconds (timeouts, rates); never goes backwards.
  virtual int64_t monotonic_ms() const = 0;
  // Monotonic nanoseconds, for latencies shorter than a millisecond (the
  // same time line as monotonic_ms()). A clock without a finer source
  // counts whole milliseconds.
  virtual int64_t monotonic_ns() const { return monotonic_ms() * 1'000'000; }

  // Real milliseconds to sleep before reading this clock again while
  // waiting until `deadline_ms` (on monotonic_ms()): the time left, never
  // negative, at most max_sleep_ms().
  int64_t sleep_ms_until(int64_t deadline_ms) const {
    return std::clamp<int64_t>(deadline_ms - monotonic_ms(), 0, max_sleep_ms());
  }
  // The longest one such sleep (see "Waiting on a clock" above).
  virtual int64_t max_sleep_ms() const { return limits::max_clock_sleep_ms; }

  // The process-wide real clock.
  static clock& system();
};

// A clock that moves only when told. Safe to read and advance from any
// thread. Threads waiting on it look again every
// limits::manual_clock_poll_ms of real time.
class manual_clock final : public clock {
 public:
  explicit manual_clock(int64_t start_ms = 1'700'000'000'000) : now_(start_ms), mono_(0) {}
  int64_t now_ms() const override { return now_.load(); }
  int64_t monotonic_ms() const override { return mono_.load(); }
  int64_t max_sleep_ms() const override { return limits::manual_clock_poll_ms; }
  void advance_ms(int64_t d) {
    now_ += d;
    mono_ += d;
  }
  void set_now_ms(int64_t t) { now_ = t; }

 private:
  std::atomic<int64_t> now_;
  std::atomic<int64_t> mono_;
};

// A point some milliseconds ahead on a clock's monotonic time, for loops
// that wait with a bound (tests, command-line tools).
class deadline {
 public:
  deadline(int64_t ms_from_now, const clock& c)
      : clk_(&c), at_ms_(c.monotonic_ms() + ms_from_now) {}
  bool passed() const { return clk_->monotonic_ms() >= at_ms_; }
  // Milliseconds until the deadline; 0 once it has passed.
  int64_t left_ms() const { return std::max<int64_t>(at_ms_ - clk_->monotonic_ms(), 0); }

 private:
  const clock* clk_;
  int64_t at_ms_;
};

}  // namespace sluice
