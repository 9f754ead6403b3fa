#include "net/server_detail.h"

namespace sluice::net {
namespace detail {

// ---- request_budget and completion_link ----------------------------------------

bool request_budget::acquire_or_wait(uint64_t n, bool small,
                                     const std::shared_ptr<connection>& waiter) {
  std::lock_guard lock(mu_);
  const bool queue_ahead = !small && large_waiters_ > 0;
  if (!queue_ahead && used_ + n <= limit_for(small)) {
    used_ += n;
    publish_locked();
    return true;
  }
  waiters_.push_back({waiter, waiter.get(), n, small});
  if (!small) ++large_waiters_;
  publish_locked();
  return false;
}

void request_budget::admit_waiters_locked() {
  bool large_blocked = false;
  for (auto it = waiters_.begin(); it != waiters_.end() && used_ < limit_bytes_;) {
    const bool behind_large = !it->small && large_blocked;
    if (behind_large || used_ + it->need > limit_for(it->small)) {
      if (!it->small) large_blocked = true;
      ++it;
      continue;
    }
    if (auto c = it->conn.lock()) {
      used_ += it->need;
      auto ex = c->executor();
      asio::post(ex, [c = std::move(c), n = it->need] { c->on_budget_granted(n); });
    }
    if (!it->small) --large_waiters_;
    it = waiters_.erase(it);
  }
}

void request_budget::release(uint64_t n) {
  if (n == 0) return;
  std::shared_lock gate_lock(gate_->mu);
  std::lock_guard lock(mu_);
  SLUICE_ASSERT(n <= used_, "request budget released more than it holds");
  used_ -= n;
  // Once the gate is closed no connection waits any more (stop closed
  // them all first), and none could be told.
  if (gate_->open) admit_waiters_locked();
  publish_locked();
}

void request_budget::cancel_wait(const connection* c) {
  std::shared_lock gate_lock(gate_->mu);
  std::lock_guard lock(mu_);
  for (auto it = waiters_.begin(); it != waiters_.end(); ++it) {
    if (it->key == c) {
      if (!it->small) --large_waiters_;
      waiters_.erase(it);
      break;
    }
  }
  // A large waiter at the head may have held back others that fit.
  if (gate_->open) admit_waiters_locked();
  publish_locked();
}

void completion_link::deliver(uint64_t seq, completion c, uint64_t frame_bytes) {
  if (sink_) {
    sink_(std::move(c));
    return;
  }
  // Before the gate: release() takes the gate itself to wake waiters.
  budget_->release(frame_bytes);
  std::shared_lock lock(gate_->mu);
  if (!gate_->open) return;
  std::shared_ptr<connection> conn = conn_.lock();
  if (!conn) return;
  auto ex = conn->executor();
  asio::post(ex, [conn = std::move(conn), seq, c = std::move(c)]() mutable {
    conn->on_completion(seq, std::move(c));
  });
}

}  // namespace detail
}  // namespace sluice::net
