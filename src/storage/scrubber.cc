#include "storage/scrubber.h"

#include <algorithm>
#include <chrono>

#include "base/log.h"

namespace sluice::storage {

scrubber::scrubber(sluice::clock& clk, int64_t bytes_per_second,
                   std::function<std::vector<std::shared_ptr<log>>()> logs)
    : clk_(clk), bytes_per_second_(bytes_per_second), logs_(std::move(logs)) {}

scrubber::~scrubber() { stop(); }

void scrubber::start() {
  if (bytes_per_second_ <= 0 || thread_.joinable()) return;
  thread_ = std::thread([this] { run(); });
}

void scrubber::stop() {
  {
    std::lock_guard g(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

scrub_stats scrubber::stats() const { return scrub_stats{bytes_.load(), passes_.load(), ranges_.load()}; }

void scrubber::run() {
  while (!stopping_) {
    const int64_t started = clk_.monotonic_ms();
    if (!pass()) break;
    passes_ += 1;
    const int64_t wait_ms = started + limits::scrub_pass_interval_ms - clk_.monotonic_ms();
    if (wait_ms <= 0) continue;
    std::unique_lock g(mu_);
    cv_.wait_for(g, std::chrono::milliseconds(wait_ms), [this] { return stopping_.load(); });
  }
}

bool scrubber::pass() {
  pass_start_ms_ = clk_.monotonic_ms();
  pass_bytes_ = 0;
  const scrub_pace pace = [this](uint64_t n) { return this->pace(n); };
  for (const auto& l : logs_()) {
    if (stopping_) return false;
    auto r = l->scrub(pace);
    if (r.ok()) {
      ranges_ += *r;
    } else if (r.code() != errc::shutting_down) {
      // The log is closed (deleted topic) or stopped by us: neither needs a word.
      SLUICE_LOG_WARN("scrubber: {}: {}", l->name(), r.err().message);
    }
  }
  return !stopping_;
}

bool scrubber::pace(uint64_t n) {
  bytes_ += n;
  pass_bytes_ += n;
  // When the pass should reach this many bytes at the configured rate.
  const int64_t due_ms =
      pass_start_ms_ + static_cast<int64_t>(pass_bytes_ * 1000 / static_cast<uint64_t>(bytes_per_second_));
  const int64_t wait_ms = due_ms - clk_.monotonic_ms();
  if (wait_ms > 0) {
    std::unique_lock g(mu_);
    cv_.wait_for(g, std::chrono::milliseconds(wait_ms), [this] { return stopping_.load(); });
  }
  return !stopping_;
}

}  // namespace sluice::storage
