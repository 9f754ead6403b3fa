#include "kafka/delayed_ops.h"

#include <asio/post.hpp>

namespace sluice::kafka {

void delayed_ops::timer::cancel() {
  cancelled_ = true;
  // The asio timer belongs to the delayed-ops thread; cancel it there.
  if (auto self = self_.lock()) asio::post(t_.get_executor(), [self] { self->t_.cancel(); });
}

delayed_ops::delayed_ops(sluice::clock& clk)
    : clk_(clk),
      work_(std::make_unique<asio::executor_work_guard<asio::io_context::executor_type>>(io_.get_executor())),
      thread_([this] { io_.run(); }) {}

delayed_ops::~delayed_ops() { stop(); }

void delayed_ops::post(std::function<void()> fn) { asio::post(io_, std::move(fn)); }

std::shared_ptr<delayed_ops::timer> delayed_ops::after(std::chrono::milliseconds delay,
                                                       std::function<void(bool)> fn) {
  auto t = std::make_shared<timer>(io_);
  t->self_ = t;
  t->at_ms_ = clk_.monotonic_ms() + std::max<int64_t>(delay.count(), 0);
  t->fn_ = std::move(fn);
  bool fire_now;
  {
    std::lock_guard g(mu_);
    fire_now = draining_;
    if (!fire_now) {
      // Forget timers that are gone, so the list stays as long as the
      // number of waiting requests.
      std::erase_if(timers_, [](const auto& w) { return w.expired(); });
      timers_.push_back(t);
    }
  }
  // Armed on the delayed-ops thread, like every later use of the asio timer.
  asio::post(io_, [this, t] { arm(t); });
  if (fire_now) t->cancel();
  return t;
}

void delayed_ops::arm(std::shared_ptr<timer> t) {
  if (!t->fn_) return;  // ran already
  const bool cancelled = t->cancelled_;
  if (!cancelled && clk_.monotonic_ms() < t->at_ms_) {
    // Sleep toward the deadline, then look at the clock again; cancel()
    // cuts the sleep short.
    t->t_.expires_after(std::chrono::milliseconds(clk_.sleep_ms_until(t->at_ms_)));
    t->t_.async_wait([this, t](const std::error_code&) { arm(t); });
    return;
  }
  auto fn = std::move(t->fn_);
  t->fn_ = nullptr;
  fn(cancelled);
}

void delayed_ops::drain() {
  std::vector<std::weak_ptr<timer>> timers;
  {
    std::lock_guard g(mu_);
    draining_ = true;
    timers.swap(timers_);
  }
  for (const auto& w : timers)
    if (auto t = w.lock()) t->cancel();
}

void delayed_ops::stop() {
  {
    std::lock_guard g(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  drain();
  work_.reset();  // run() returns once the queue and the cancelled timers are done
  if (thread_.joinable()) thread_.join();
}

}  // namespace sluice::kafka
