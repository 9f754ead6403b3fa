#include "maintenance/retention.h"

#include <algorithm>
#include <chrono>

#include "base/log.h"
#include "metadata/partition_manager.h"
#include "storage/log.h"

namespace sluice::cluster {

std::optional<offset> retention_cutoff(const std::vector<storage::segment_info>& segments, offset log_start,
                                       offset high_watermark, int64_t now_ms, int64_t retention_ms,
                                       int64_t retention_bytes) {
  if (segments.size() < 2) return std::nullopt;  // only the active segment
  // Closed segments that end at or below the high watermark.
  size_t closed = 0;
  while (closed + 1 < segments.size() && segments[closed].next <= high_watermark) ++closed;
  offset cut = log_start;
  if (retention_ms >= 0) {
    for (size_t i = 0; i < closed; ++i) {
      const auto& s = segments[i];
      // An empty segment has no time; it goes with the ones around it. A
      // segment whose time cannot be read is kept, never taken as expired.
      if (s.size_bytes > 0 && (s.largest_time_ms < 0 || s.largest_time_ms >= now_ms - retention_ms)) break;
      cut = std::max(cut, s.next);
    }
  }
  if (retention_bytes >= 0) {
    uint64_t total = 0;
    for (const auto& s : segments) total += s.size_bytes;
    for (size_t i = 0; i < closed; ++i) {
      const auto& s = segments[i];
      if (total - s.size_bytes < static_cast<uint64_t>(retention_bytes)) break;
      total -= s.size_bytes;
      cut = std::max(cut, s.next);
    }
  }
  if (cut <= log_start) return std::nullopt;
  return cut;
}

void retention_task::start() {
  thread_ = std::thread([this] {
    std::unique_lock g(mu_);
    // The interval runs on clk_ (base/clock.h, "Waiting on a clock").
    int64_t last_ms = clk_.monotonic_ms();
    while (!stopping_) {
      const uint64_t changes = interval_changes_;
      // Saturating: the setting allows intervals up to INT64_MAX.
      const int64_t due_ms = interval_ms_ > INT64_MAX - last_ms ? INT64_MAX : last_ms + interval_ms_;
      if (cv_.wait_for(g, std::chrono::milliseconds(clk_.sleep_ms_until(due_ms)),
                       [&] { return stopping_ || interval_changes_ != changes; }))
        continue;  // stopping, or wait again with the new interval
      if (clk_.monotonic_ms() < due_ms) continue;  // not yet: sleep again
      g.unlock();
      run_once();
      g.lock();
      last_ms = clk_.monotonic_ms();
    }
  });
}

void retention_task::set_interval_ms(int64_t interval_ms) {
  {
    std::lock_guard g(mu_);
    if (interval_ms == interval_ms_) return;
    interval_ms_ = interval_ms;
    ++interval_changes_;
  }
  cv_.notify_all();
}

void retention_task::stop() {
  {
    std::lock_guard g(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int retention_task::run_once() {
  int moves = 0;
  const int64_t now = clk_.now_ms();
  for (const auto& part : pm_.replicas().all()) {
    const auto cfg = part->config();
    if (!cfg.cleanup_delete) continue;
    auto& log = part->log();
    auto cut = retention_cutoff(log.segments(), log.log_start_offset(), part->high_watermark(), now,
                                cfg.retention_ms, cfg.retention_bytes);
    if (!cut) continue;
    const auto& tp = part->id();
    if (auto s = log.advance_log_start(*cut); !s.ok()) {
      SLUICE_LOG_WARN("retention of {}-{}: {}", tp.topic, tp.partition, s.err().message);
      continue;
    }
    SLUICE_LOG_INFO("retention: {}-{} log start offset moved to {}", tp.topic, tp.partition, cut->value());
    ++moves;
  }
  return moves;
}

}  // namespace sluice::cluster
