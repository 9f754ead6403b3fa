#pragma once

// Time behind a small interface so tests can move it (segment.ms rolls,
// retention, session timeouts) without sleeping.

#include <atomic>
#include <cstdint>

namespace sluice {

class clock {
 public:
  virtual ~clock() = default;
  // Wall-clock milliseconds since the Unix epoch (record timestamps, retention).
  virtual int64_t now_ms() const = 0;
  // Monotonic milliseconds (timeouts, rates); never goes backwards.
  virtual int64_t monotonic_ms() const = 0;

  // The process-wide real clock.
  static clock& system();
};

// A clock that moves only when told. Safe to read from any thread.
class manual_clock final : public clock {
 public:
  explicit manual_clock(int64_t start_ms = 1'700'000'000'000) : now_(start_ms), mono_(0) {}
  int64_t now_ms() const override { return now_.load(); }
  int64_t monotonic_ms() const override { return mono_.load(); }
  void advance_ms(int64_t d) {
    now_ += d;
    mono_ += d;
  }
  void set_now_ms(int64_t t) { now_ = t; }

 private:
  std::atomic<int64_t> now_;
  std::atomic<int64_t> mono_;
};

}  // namespace sluice
