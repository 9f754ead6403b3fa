#pragma once

// Paces a fixed-rate sender (the `broker` and `cluster` modes' latency
// phases, for Sluice and JetStream alike). Message i falls due at
// t0 + i / rate. The sender sleeps in ticks of at least `tick_ns` and then
// sends, back to back, every message that fell due meanwhile; each is timed
// from when it fell due, not from when it went out, so the wait inside a
// tick counts against the server, never for it. Waking once a tick rather
// than once a message (50 us apart at 20,000 msgs/s) keeps the sender from
// taking the cores the servers share with it: here a sleep-per-message
// sender cost 0.14 of a core in wake-ups alone.

#include <algorithm>
#include <cstdint>

namespace sluice::bench {

class pacer {
 public:
  // `rate` > 0 messages a second from `t0` (ns on the sender's clock).
  pacer(int64_t t0, double rate, int64_t tick_ns = default_tick_ns)
      : t0_(t0), interval_ns_(1e9 / rate), tick_ns_(tick_ns) {}

  static constexpr int64_t default_tick_ns = 500'000;

  // When the next message falls due.
  int64_t due() const { return t0_ + static_cast<int64_t>(static_cast<double>(sent_) * interval_ns_); }
  // How long to sleep at `now` before the next message may go: 0 when it is
  // due, else until it is due but at least a tick.
  int64_t sleep_ns(int64_t now) const { return now >= due() ? 0 : std::max(due() - now, tick_ns_); }
  // The next message went out: returns its due time, what it is timed from.
  int64_t sent() { return t0_ + static_cast<int64_t>(static_cast<double>(sent_++) * interval_ns_); }

 private:
  int64_t t0_;
  double interval_ns_;
  int64_t tick_ns_;
  uint64_t sent_ = 0;
};

}  // namespace sluice::bench
