#include "kafka/delayed_ops.h"

#include <asio/post.hpp>

namespace sluice::kafka {

delayed_ops::delayed_ops()
    : work_(std::make_unique<asio::executor_work_guard<asio::io_context::executor_type>>(io_.get_executor())),
      thread_([this] { io_.run(); }) {}

delayed_ops::~delayed_ops() { stop(); }

void delayed_ops::post(std::function<void()> fn) { asio::post(io_, std::move(fn)); }

std::shared_ptr<asio::steady_timer> delayed_ops::after(std::chrono::milliseconds delay,
                                                       std::function<void(bool)> fn) {
  auto t = std::make_shared<asio::steady_timer>(io_, delay);
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
  t->async_wait([t, fn = std::move(fn)](const std::error_code& ec) { fn(ec == asio::error::operation_aborted); });
  if (fire_now) asio::post(io_, [t] { t->cancel(); });
  return t;
}

void delayed_ops::drain() {
  std::vector<std::weak_ptr<asio::steady_timer>> timers;
  {
    std::lock_guard g(mu_);
    draining_ = true;
    timers.swap(timers_);
  }
  asio::post(io_, [timers = std::move(timers)] {
    for (const auto& w : timers)
      if (auto t = w.lock()) t->cancel();
  });
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
