#include "storage/scrubber.h"
#include "storage/log.h"

#include <algorithm>
#include <chrono>

#include "base/log.h"

namespace sluice::storage {

scrubber::scrubber(sluice::clock& clk, int64_t bytes_per_second,
                   std::function<std::vector<std::shared_ptr<log>>()> logs)
    : clk_(clk), bytes_per_second_(bytes_per_second), logs_(std::move(logs)) {}

scrubber::~scrubber() { stop(); }

void scrubber::start() {
  if (bytes_per_second_ <= 0 || running_) return;
  running_ = true;
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

void scrubber::request_removal(std::shared_ptr<log> l) {
  {
    std::lock_guard g(mu_);
    if (stopping_ || !running_) return;
    for (const auto& r : requests_)
      if (r == l) return;
    requests_.push_back(std::move(l));
  }
  cv_.notify_all();
}

void scrubber::remove_requested() {
  std::vector<std::shared_ptr<log>> todo;
  {
    std::lock_guard g(mu_);
    todo.swap(requests_);
  }
  for (const auto& l : todo) {
    if (stopping_) return;
    if (auto st = l->remove_known_damage(); !st.ok() && st.code() != errc::shutting_down)
      SLUICE_LOG_WARN("scrubber: {}: could not remove damaged ranges: {}; reads keep skipping them", l->name(),
                      st.err().message);
  }
}

scrub_stats scrubber::stats() const { return scrub_stats{bytes_.load(), passes_.load(), ranges_.load()}; }

void scrubber::run() {
  while (!stopping_) {
    const int64_t started = clk_.monotonic_ms();
    if (!pass()) break;
    passes_ += 1;
    for (;;) {
      remove_requested();
      const int64_t wait_ms = started + limits::scrub_pass_interval_ms - clk_.monotonic_ms();
      if (wait_ms <= 0 || stopping_) break;
      std::unique_lock g(mu_);
      cv_.wait_for(g, std::chrono::milliseconds(wait_ms), [this] { return stopping_ || !requests_.empty(); });
      if (requests_.empty()) break;  // time for the next pass (or stopping)
    }
  }
}

bool scrubber::pass() {
  pass_start_ms_ = clk_.monotonic_ms();
  pass_bytes_ = 0;
  const scrub_pace pace = [this](uint64_t n) { return this->pace(n); };
  for (const auto& l : logs_()) {
    if (stopping_) return false;
    auto r = l->scrub(pace);
    // shutting_down: the log was closed (a deleted topic) or we are
    // stopping; neither needs a word.
    if (r.ok()) {
      ranges_ += *r;
    } else if (r.code() != errc::shutting_down) {
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
  for (;;) {
    // Requests wait for no pass: the scan in progress checks its segment
    // id before it acts, so a rewrite under it is safe.
    remove_requested();
    const int64_t wait_ms = due_ms - clk_.monotonic_ms();
    if (wait_ms <= 0 || stopping_) break;
    std::unique_lock g(mu_);
    cv_.wait_for(g, std::chrono::milliseconds(wait_ms), [this] { return stopping_ || !requests_.empty(); });
    if (requests_.empty()) break;
  }
  return !stopping_;
}

}  // namespace sluice::storage
