#pragma once

// An etcd::client that times and counts every request it passes on to the
// real one, for /metrics (sluice_etcd_request_seconds,
// sluice_etcd_request_failures_total). A request is one call of the
// interface, retries inside the inner client included, so the latency is
// what the control plane waited. A failure is a call that returned an
// error (etcd unreachable, the retry budget spent, "outcome unknown", or
// refused); a transaction whose compares failed is an answer, not a
// failure. Opening a watch is counted; the stream's events are not.
//
// Thread safety: as the inner client's (every method from any thread);
// the counters are atomics. The inner client must outlive no watch handle
// it gave out, as usual; this wrapper owns it.

#include <atomic>
#include <memory>

#include "base/clock.h"
#include "etcd/client.h"
#include "metrics/metrics.h"

namespace sluice::broker {

class metered_etcd final : public etcd::client {
  // Runs one call of the inner client, timing it and counting its failure.
  // (Defined first: the overrides below deduce their results from it.)
  template <class F>
  auto time(F&& call) {
    const int64_t start = clk_.monotonic_ns();
    auto r = call();
    latency_.record_us(static_cast<uint64_t>(std::max<int64_t>(clk_.monotonic_ns() - start, 0) / 1000));
    if (!r.ok()) failures_.fetch_add(1, std::memory_order_relaxed);
    return r;
  }

 public:
  metered_etcd(std::unique_ptr<etcd::client> inner, const sluice::clock& clk)
      : inner_(std::move(inner)), clk_(clk) {}

  result<etcd::range_result> range(const etcd::key_range& keys, etcd::range_options opts = {}) override {
    return time([&] { return inner_->range(keys, opts); });
  }
  result<etcd::put_result> put(const std::string& key, const std::string& value,
                               etcd::put_options opts = {}) override {
    return time([&] { return inner_->put(key, value, opts); });
  }
  result<etcd::delete_result> delete_range(const etcd::key_range& keys, bool prev_kv = false) override {
    return time([&] { return inner_->delete_range(keys, prev_kv); });
  }
  result<etcd::txn_result> txn(const etcd::txn_request& req) override {
    return time([&] { return inner_->txn(req); });
  }
  result<etcd::lease_grant_result> lease_grant(int64_t ttl_s) override {
    return time([&] { return inner_->lease_grant(ttl_s); });
  }
  result<int64_t> lease_keepalive_once(int64_t lease_id, int64_t budget_ms) override {
    return time([&] { return inner_->lease_keepalive_once(lease_id, budget_ms); });
  }
  result<int64_t> lease_time_to_live(int64_t lease_id) override {
    return time([&] { return inner_->lease_time_to_live(lease_id); });
  }
  status lease_revoke(int64_t lease_id) override {
    return time([&] { return inner_->lease_revoke(lease_id); });
  }
  result<std::unique_ptr<etcd::watch_handle>> watch(const etcd::key_range& keys, int64_t start_revision,
                                                    etcd::watch_callback cb) override {
    return time([&] { return inner_->watch(keys, start_revision, std::move(cb)); });
  }
  result<std::vector<etcd::endpoint_status>> endpoints_status() override {
    return time([&] { return inner_->endpoints_status(); });
  }
  void wind_down(int64_t grace_ms) override { inner_->wind_down(grace_ms); }
  bool leaderless_within(int64_t window_ms) const override { return inner_->leaderless_within(window_ms); }

  const metrics::histogram& request_latency() const { return latency_; }
  uint64_t failures_total() const { return failures_.load(std::memory_order_relaxed); }
  // Appends both metrics in Prometheus text.
  void render(std::string& out) const;

 private:

  std::unique_ptr<etcd::client> inner_;
  const sluice::clock& clk_;
  metrics::histogram latency_;
  std::atomic<uint64_t> failures_{0};
};

}  // namespace sluice::broker
