#include "storage/flusher.h"

#include <algorithm>
#include <chrono>

#include "base/limits.h"
#include "base/thread_name.h"
#include "storage/log.h"

namespace sluice::storage {

flusher::flusher(sluice::clock& clk, int threads) : clk_(clk) {
  running_ = std::max(threads, 1);
  for (int i = 0; i < running_; ++i)
    threads_.emplace_back([this] {
      set_thread_name("flusher");
      run();
    });
  preparer_ = std::thread([this] {
    set_thread_name("prepare-tails");
    run_preparing();
  });
}

void flusher::request_prepare(std::shared_ptr<log> l) {
  std::lock_guard g(mu_);
  if (stopping_) return;  // a tail is an optimisation: none is needed to stop
  to_prepare_.push_back(std::move(l));
  prepare_cv_.notify_one();
}

void flusher::run_preparing() {
  std::unique_lock lk(mu_);
  for (;;) {
    prepare_cv_.wait(lk, [&] { return stopping_ || !to_prepare_.empty(); });
    if (stopping_) break;
    std::shared_ptr<log> l = to_prepare_.front().lock();
    to_prepare_.pop_front();
    if (!l) {  // dropped meanwhile
      if (idle_locked()) idle_cv_.notify_all();
      continue;
    }
    preparing_ = true;
    lk.unlock();
    l->prepare_tail();
    l.reset();  // the last owner may be us; destroyed outside the lock
    lk.lock();
    preparing_ = false;
    if (idle_locked()) idle_cv_.notify_all();
  }
  to_prepare_.clear();
  idle_cv_.notify_all();
}

flusher::~flusher() { stop(); }

void flusher::request(std::shared_ptr<log> l) {
  {
    std::lock_guard g(mu_);
    if (!stopped_) {
      if (std::none_of(queue_.begin(), queue_.end(), [&](const job& j) { return j.l == l; }))
        queue_.push_back({std::move(l), false});
      cv_.notify_one();
      return;
    }
  }
  l->flush_for_waiters();
}

void flusher::request_after(std::shared_ptr<log> l, int64_t ms) {
  {
    std::lock_guard g(mu_);
    if (!stopped_) {
      const int64_t at = clk_.monotonic_ms() + std::clamp<int64_t>(ms, 0, limits::max_flush_timer_ms);
      timers_.push({at, std::move(l)});
      cv_.notify_one();  // a waiting thread may need an earlier wake-up
      return;
    }
  }
  l->flush_on_timer();
}

void flusher::run_task(std::function<void()> fn) {
  {
    std::lock_guard g(mu_);
    if (!stopped_) {
      tasks_.push_back(std::move(fn));
      cv_.notify_one();
      return;
    }
  }
  fn();
}

void flusher::promote_due_locked() {
  if (timers_.empty()) return;  // the usual case: no clock read per job
  const int64_t now = clk_.monotonic_ms();
  while (!timers_.empty() && timers_.top().at_ms <= now) {
    std::shared_ptr<log> l = timers_.top().l.lock();
    timers_.pop();
    if (!l) continue;  // the log is gone
    auto it = std::find_if(queue_.begin(), queue_.end(), [&](const job& j) { return j.l == l; });
    if (it != queue_.end())
      it->timer = true;
    else
      queue_.push_back({std::move(l), true});
  }
}

void flusher::wait_idle() {
  std::unique_lock lk(mu_);
  idle_cv_.wait(lk, [&] { return stopped_ || idle_locked(); });
}

void flusher::stop() {
  {
    std::lock_guard g(mu_);
    if (stopping_) return;
    stopping_ = true;
    cv_.notify_all();
    prepare_cv_.notify_all();
  }
  for (auto& t : threads_) t.join();
  if (preparer_.joinable()) preparer_.join();
}

void flusher::run() {
  std::unique_lock lk(mu_);
  for (;;) {
    promote_due_locked();
    if (!tasks_.empty()) {
      auto fn = std::move(tasks_.front());
      tasks_.pop_front();
      ++busy_;
      lk.unlock();
      fn();
      fn = nullptr;  // what it holds goes outside the lock
      lk.lock();
      --busy_;
      if (idle_locked()) idle_cv_.notify_all();
      continue;
    }
    if (queue_.empty()) {
      // Timers not yet due are dropped at stop: closing a log syncs it.
      if (stopping_) break;
      if (timers_.empty())
        cv_.wait(lk);
      else
        cv_.wait_for(lk, std::chrono::milliseconds(clk_.sleep_ms_until(timers_.top().at_ms)));
      continue;
    }
    // A round takes every log queued once the round before it is done:
    // one group commit for all of them.
    lk.unlock();
    std::unique_lock r(round_mu_);
    lk.lock();
    if (queue_.empty()) continue;  // another thread's round took them
    std::vector<std::shared_ptr<log>> round;
    round.reserve(queue_.size());
    for (job& j : queue_) {
      if (j.timer) j.l->timer_fired();
      round.push_back(std::move(j.l));
    }
    queue_.clear();
    const int n = static_cast<int>(round.size());
    busy_ += n;
    lk.unlock();
    log::flush_together(round);
    r.unlock();
    for (auto& l : round) l->seal_after_flush().ignore();
    round.clear();  // the last owner may be us; destroyed outside the lock
    lk.lock();
    busy_ -= n;
    if (idle_locked()) idle_cv_.notify_all();
  }
  // Requests after the last thread leaves are served by their callers.
  if (--running_ == 0) {
    stopped_ = true;
    timers_ = {};
    // Tasks asked between this thread's last look and now: run here.
    auto late = std::move(tasks_);
    tasks_.clear();
    lk.unlock();
    for (auto& fn : late) fn();
    lk.lock();
    idle_cv_.notify_all();
  }
}

}  // namespace sluice::storage
