#include "broker/retention_watch.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "base/limits.h"
#include "maintenance/headroom.h"
#include "metrics/metrics.h"

namespace sluice::broker {

namespace {

using metrics::header;
using metrics::label_value;
using metrics::sample;

constexpr double inf = std::numeric_limits<double>::infinity();

cluster::retention_policy policy_of(const config::topic_config& c) {
  return {c.cleanup_delete, c.retention_ms, c.retention_bytes};
}

}  // namespace

retention_watch::retention_watch(cluster::partition_manager& pm, group::coordinator* coord,
                                 sluice::clock& clk, int64_t window_ms)
    : pm_(pm),
      coord_(coord),
      clk_(clk),
      window_ms_(std::clamp(window_ms, limits::min_write_rate_window_ms,
                            limits::max_write_rate_window_ms)) {}

retention_watch::~retention_watch() {
  stop();
}

void retention_watch::start() {
  sample_rates();
  const auto every = std::chrono::milliseconds(window_ms_ / limits::write_rate_samples_per_window);
  thread_ = std::thread([this, every] {
    std::unique_lock g(thread_mu_);
    while (!stopping_) {
      cv_.wait_for(g, every, [this] { return stopping_; });
      if (stopping_) break;
      g.unlock();
      sample_rates();
      g.lock();
    }
  });
}

void retention_watch::stop() {
  {
    std::lock_guard g(thread_mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void retention_watch::sample_rates() {
  struct reading {
    std::pair<std::string, int32_t> tp;
    const cluster::partition* identity;
    uint64_t bytes;
  };
  std::vector<reading> now_bytes;
  for (const auto& t : pm_.topics()) {
    for (int32_t p = 0; p < t.partitions; ++p) {
      auto part = pm_.get(t.name, p);
      if (part) now_bytes.push_back({{t.name, p}, part.get(), part->bytes_appended()});
    }
  }
  const int64_t now = clk_.monotonic_ms();
  std::lock_guard g(mu_);
  std::map<std::pair<std::string, int32_t>, rate_ring> next;
  for (auto& r : now_bytes) {
    auto it = rates_.find(r.tp);
    rate_ring ring;
    if (it != rates_.end() && it->second.identity == r.identity) {
      ring = std::move(it->second);
    } else if (last_sample_ms_ >= 0) {
      // A partition the previous sample did not see was opened since, with
      // its counter at 0: everything it holds was written after that sample.
      ring.samples.emplace_back(last_sample_ms_, 0);
    }
    ring.identity = r.identity;
    ring.samples.emplace_back(now, r.bytes);
    // Keep the newest sample at or before the window's start, so the rate
    // spans the whole window once the broker has run that long.
    while (ring.samples.size() > 2 && ring.samples[1].first <= now - window_ms_)
      ring.samples.erase(ring.samples.begin());
    next.emplace(std::move(r.tp), std::move(ring));
  }
  rates_ = std::move(next);
  last_sample_ms_ = now;
}

double retention_watch::write_rate(const cluster::partition& p, const std::string& topic,
                                   int32_t partition) {
  const uint64_t bytes = p.bytes_appended();
  const int64_t now = clk_.monotonic_ms();
  std::lock_guard g(mu_);
  auto it = rates_.find({topic, partition});
  int64_t t0 = last_sample_ms_;  // not sampled yet: opened since the last sample (see sample_rates)
  uint64_t b0 = 0;
  if (it != rates_.end() && it->second.identity == &p && !it->second.samples.empty()) {
    std::tie(t0, b0) = it->second.samples.front();
  }
  if (t0 < 0) return 0;
  if (now <= t0 || bytes < b0) return 0;
  return static_cast<double>(bytes - b0) * 1000.0 / static_cast<double>(now - t0);
}

void retention_watch::account(group_partition& gp, int64_t committed, int64_t log_start) {
  if (committed < 0 || committed >= log_start) return;
  const int64_t from = std::max(committed, gp.counted_below);
  if (log_start > from) gp.lost += log_start - from;
  gp.counted_below = std::max(gp.counted_below, log_start);
}

void retention_watch::on_offset_replaced(const std::string& group, const std::string& topic,
                                         int32_t partition, int64_t previous_offset) {
  auto part = pm_.get(topic, partition);
  if (!part || previous_offset < 0) return;
  const int64_t log_start = part->log_start_offset().value();
  std::lock_guard g(mu_);
  auto it = groups_.find({group, topic, partition});
  if (it == groups_.end()) {
    if (previous_offset >= log_start) return;  // nothing lost and nothing to remember
    it = groups_.emplace(key{group, topic, partition}, group_partition{}).first;
  }
  account(it->second, previous_offset, log_start);
}

int64_t retention_watch::lost(const std::string& group, const std::string& topic,
                              int32_t partition) const {
  std::lock_guard g(mu_);
  auto it = groups_.find({group, topic, partition});
  return it == groups_.end() ? 0 : it->second.lost;
}

void retention_watch::prune_locked(const std::map<key, bool>& live) {
  // Pairs whose offset has gone are kept only while they count a loss, and
  // only up to the limit.
  size_t orphans = 0;
  for (auto it = groups_.begin(); it != groups_.end();) {
    if (live.count(it->first)) {
      ++it;
    } else if (it->second.lost > 0 && orphans < limits::max_orphan_lost_series) {
      ++orphans;
      it->second.ts_offset = -1;
      ++it;
    } else {
      it = groups_.erase(it);
    }
  }
}

void retention_watch::render(std::string& out, const std::vector<partition_row>& rows) {
  const int64_t now_ms = clk_.now_ms();
  std::map<std::pair<std::string, int32_t>, const partition_row*> by_tp;
  for (const auto& r : rows) by_tp[{r.topic, r.partition}] = &r;

  // ---- Disk: bytes used against the bytes retention will hold.
  std::map<const partition_row*, double> rate;
  std::string rates_text, projected_text;
  double used_total = 0, projected_total = 0;
  for (const auto& r : rows) {
    const double w = write_rate(*r.part, r.topic, r.partition);
    rate[&r] = w;
    const auto proj = cluster::retention_projected_bytes(policy_of(r.part->config()), w);
    used_total += static_cast<double>(r.size_bytes);
    projected_total += proj ? *proj : inf;
    sample(rates_text, "sluice_log_write_rate_bytes_per_second", r.labels, w);
    sample(projected_text, "sluice_log_retention_projected_bytes", r.labels, proj ? *proj : inf);
  }
  header(out, "sluice_log_write_rate_bytes_per_second", "gauge",
         "Bytes appended per second over sluice.metrics.write.rate.window.ms, per partition.");
  out += rates_text;
  header(out, "sluice_log_retention_projected_bytes", "gauge",
         "Bytes retention will hold at the current write rate (rate x retention.ms, capped by "
         "retention.bytes).");
  out += projected_text;
  header(out, "sluice_disk_used_bytes", "gauge", "Bytes of segment files of every partition.");
  sample(out, "sluice_disk_used_bytes", "", used_total);
  header(out, "sluice_disk_retention_projected_bytes", "gauge",
         "Bytes retention will hold across every partition at the current write rates.");
  sample(out, "sluice_disk_retention_projected_bytes", "", projected_total);

  if (!coord_) return;
  const int64_t threshold_ms = pm_.broker_config()->retention_headroom_alert_ms;
  header(out, "sluice_retention_headroom_alert_threshold_seconds", "gauge",
         "sluice.retention.headroom.alert.ms in seconds.");
  sample(out, "sluice_retention_headroom_alert_threshold_seconds", "",
         static_cast<double>(threshold_ms) / 1000.0);

  // ---- Groups. Offsets are copied first; nothing below holds the
  // coordinator's mutex.
  struct line {
    key k;
    std::string labels;
    const partition_row* row;
    int64_t committed, log_start, hw;
    std::optional<int64_t> ts_ms;  // of the batch at the oldest unconsumed offset
  };
  std::vector<line> lines;
  std::map<key, bool> live;
  for (auto& c : coord_->committed_offsets()) {
    if (c.offset < 0) continue;
    auto it = by_tp.find({c.topic, c.partition});
    if (it == by_tp.end()) continue;
    const auto* r = it->second;
    line l{{c.group, c.topic, c.partition},
           "group=\"" + label_value(c.group) + "\"," + r->labels,
           r,
           c.offset,
           r->log_start,
           r->high_watermark,
           std::nullopt};
    live[l.k] = true;
    lines.push_back(std::move(l));
  }
  // Cached batch timestamps; the misses are read with no lock held.
  {
    std::lock_guard g(mu_);
    for (auto& l : lines) {
      auto it = groups_.find(l.k);
      const int64_t at = std::max(l.committed, l.log_start);
      if (it != groups_.end() && it->second.ts_offset == at) l.ts_ms = it->second.ts_ms;
    }
  }
  for (auto& l : lines) {
    const int64_t at = std::max(l.committed, l.log_start);
    if (!l.ts_ms && at < l.hw)
      l.ts_ms = l.row->part->batch_time_at(offset(at));  // lag in seconds runs from it
  }
  std::vector<int64_t> lost(lines.size());
  {
    std::lock_guard g(mu_);
    for (size_t i = 0; i < lines.size(); ++i) {
      auto& l = lines[i];
      auto& gp = groups_[l.k];
      account(gp, l.committed, l.log_start);
      lost[i] = gp.lost;
      if (l.ts_ms) {
        gp.ts_offset = std::max(l.committed, l.log_start);
        gp.ts_ms = *l.ts_ms;
      }
    }
    prune_locked(live);
  }

  std::string committed_t, lag_t, lag_s_t, headroom_t, alert_t, lost_t;
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto& l = lines[i];
    const auto* r = l.row;
    const int64_t lag = std::max<int64_t>(0, l.hw - l.committed);
    sample(committed_t, "sluice_group_committed_offset", l.labels,
           static_cast<double>(l.committed));
    sample(lag_t, "sluice_group_lag_messages", l.labels, static_cast<double>(lag));
    std::optional<int64_t> headroom_ms;  // nullopt: never
    if (lag == 0) {
      sample(lag_s_t, "sluice_group_lag_seconds", l.labels, 0);
    } else {
      if (l.ts_ms) {
        sample(lag_s_t, "sluice_group_lag_seconds", l.labels,
               static_cast<double>(std::max<int64_t>(0, now_ms - *l.ts_ms)) / 1000.0);
      }
      if (l.committed < l.log_start) {
        headroom_ms = 0;  // already lost
      } else {
        // The segment holding the committed offset: the first that ends
        // above it (compaction may leave gaps between segments).
        cluster::unconsumed_position pos;
        uint64_t after = 0;
        bool found = false;
        for (const auto& s : r->segments) {
          if (found) {
            after += s.size_bytes;
          } else if (s.next.value() > l.committed) {
            found = true;
            pos.segment_max_timestamp_ms = s.largest_time_ms;
          }
        }
        if (found) pos.bytes_after_segment = static_cast<int64_t>(after);
        headroom_ms =
            cluster::retention_headroom_ms(policy_of(r->part->config()), pos, now_ms, rate[r]);
      }
    }
    sample(headroom_t, "sluice_group_retention_headroom_seconds", l.labels,
           headroom_ms ? static_cast<double>(*headroom_ms) / 1000.0 : inf);
    sample(alert_t, "sluice_group_retention_headroom_alert", l.labels,
           headroom_ms && *headroom_ms < threshold_ms ? 1 : 0);
    sample(lost_t, "sluice_group_lost_messages_total", l.labels, static_cast<double>(lost[i]));
  }
  // Losses of pairs whose offset has gone since (a deleted group, an
  // expired offset) stay visible.
  {
    std::lock_guard g(mu_);
    for (const auto& [k, gp] : groups_) {
      if (live.count(k) || gp.lost == 0) continue;
      const auto& [grp, topic, p] = k;
      sample(lost_t, "sluice_group_lost_messages_total",
             "group=\"" + label_value(grp) + "\",topic=\"" + label_value(topic) +
                 "\",partition=\"" + std::to_string(p) + "\"",
             static_cast<double>(gp.lost));
    }
  }
  header(out, "sluice_group_committed_offset", "gauge",
         "Committed offset, per group and partition.");
  out += committed_t;
  header(out, "sluice_group_lag_messages", "gauge", "High watermark minus committed offset.");
  out += lag_t;
  header(out, "sluice_group_lag_seconds", "gauge",
         "Age of the oldest message the group has not consumed.");
  out += lag_s_t;
  header(out, "sluice_group_retention_headroom_seconds", "gauge",
         "Time before retention may delete the oldest message the group has not consumed (+Inf: "
         "never).");
  out += headroom_t;
  header(out, "sluice_group_retention_headroom_alert", "gauge",
         "1 when the headroom is under sluice.retention.headroom.alert.ms.");
  out += alert_t;
  header(out, "sluice_group_lost_messages_total", "counter",
         "Messages retention deleted before the group committed past them.");
  out += lost_t;
}

}  // namespace sluice::broker
