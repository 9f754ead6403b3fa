#include "etcd/lease_keeper.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "base/assert.h"
#include "base/limits.h"
#include "base/log.h"

namespace sluice::etcd {

lease_keeper::lease_keeper(client& c, int64_t lease_id, int64_t ttl_s, lost_callback on_lost,
                           const clock& clk, renewed_callback on_renewed)
    : client_(c),
      lease_id_(lease_id),
      ttl_ms_(ttl_s * 1000),
      on_lost_(std::move(on_lost)),
      on_renewed_(std::move(on_renewed)),
      clock_(clk),
      start_ms_(clk.monotonic_ms()) {
  SLUICE_ASSERT(ttl_s > 0, "lease_keeper needs a positive TTL");
  SLUICE_ASSERT(on_lost_ != nullptr, "lease_keeper needs an on_lost callback");
  thread_ = std::thread([this] { run(); });
}

lease_keeper::~lease_keeper() {
  stop();
}

void lease_keeper::stop() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();  // called from on_lost: run() returns right after it
    return;
  }
  thread_.join();
}

bool lease_keeper::wait_until(int64_t deadline_ms) {
  std::unique_lock lk(mu_);
  while (!stopping_ && clock_.monotonic_ms() < deadline_ms) {
    cv_.wait_for(lk, std::chrono::milliseconds(clock_.sleep_ms_until(deadline_ms)));
  }
  return !stopping_;
}

void lease_keeper::run() {
  // The TTL runs from the last renewal etcd received; we only know when we
  // sent it, which is no later, so counting from the send is safe.
  // Counted from construction, not from when this thread first runs.
  int64_t last_sent_ok_ms = start_ms_;
  int64_t next_ms = last_sent_ok_ms + ttl_ms_ / 3;
  auto lose = [&](error why) {
    {
      std::lock_guard lk(mu_);
      if (stopping_) return;
      lost_ = true;
    }
    on_lost_(why);
  };
  bool doubtful = false;  // a whole TTL passed without a renewal
  while (wait_until(next_ms)) {
    const int64_t sent_ms = clock_.monotonic_ms();
    const int64_t left_ms = last_sent_ok_ms + ttl_ms_ - sent_ms;
    if (left_ms <= 0 && !doubtful) {
      doubtful = true;
      SLUICE_LOG_WARN("lease {}: no renewal succeeded within its TTL; it may have expired (asking etcd on)",
                      lease_id_);
    }
    // Past the TTL each try gets the retry interval; etcd's answer decides.
    auto r = client_.lease_keepalive_once(
        lease_id_, left_ms > 0 ? left_ms : std::min<int64_t>(limits::etcd_keepalive_retry_ms, ttl_ms_ / 3 + 1));
    if (r.ok() && *r > 0) {
      if (doubtful) SLUICE_LOG_INFO("lease {}: renewed again; etcd kept it", lease_id_);
      doubtful = false;
      last_sent_ok_ms = sent_ms;
      ttl_ms_ = *r * 1000;
      renewals_++;
      if (on_renewed_) on_renewed_(sent_ms + ttl_ms_);
      next_ms = sent_ms + ttl_ms_ / 3;
      continue;
    }
    if (r.ok()) {
      return lose(make_error(errc::not_found, "lease " + std::to_string(lease_id_) +
                                                  " expired or was revoked at etcd"));
    }
    if (r.code() != errc::unavailable) {
      // Anything but "cannot reach etcd" is an answer about the lease.
      return lose(r.err());
    }
    // Unreachable for now: try again soon, past the TTL too (the holder's
    // own clock says the lease may be gone meanwhile: on_renewed's times).
    const int64_t now_ms = clock_.monotonic_ms();
    next_ms = now_ms + std::min<int64_t>(limits::etcd_keepalive_retry_ms, ttl_ms_ / 3);
    if (!doubtful) next_ms = std::min(next_ms, last_sent_ok_ms + ttl_ms_);
  }
}

}  // namespace sluice::etcd
