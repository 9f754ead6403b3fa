#include "kafka/delayed_ops.h"

#include <asio/post.hpp>

#include "base/thread_name.h"

namespace sluice::kafka {

std::function<void(bool)> delayed_ops::timer::take() {
  std::lock_guard g(mu_);
  auto fn = std::move(fn_);
  fn_ = nullptr;
  return fn;
}

void delayed_ops::timer::cancel() {
  if (auto fn = take()) fn(true);
}

delayed_ops::delayed_ops(sluice::clock& clk)
    : clk_(clk),
      work_(std::make_unique<asio::executor_work_guard<asio::io_context::executor_type>>(io_.get_executor())),
      wake_timer_(io_),
      thread_([this] {
        set_thread_name("delayed-ops");
        io_.run();
      }) {}

delayed_ops::~delayed_ops() { stop(); }

void delayed_ops::post(std::function<void()> fn) { asio::post(io_, std::move(fn)); }

std::shared_ptr<delayed_ops::timer> delayed_ops::after(std::chrono::milliseconds delay,
                                                       std::function<void(bool)> fn) {
  auto t = std::make_shared<timer>(clk_.monotonic_ms() + std::max<int64_t>(delay.count(), 0), std::move(fn));
  bool fire_now = false, kick = false;
  {
    std::lock_guard g(mu_);
    fire_now = draining_;
    if (!fire_now) {
      heap_.push({t->at_ms_, t});
      if (t->at_ms_ < wake_at_ms_) {
        wake_at_ms_ = t->at_ms_;
        kick = true;
      }
    }
  }
  // Not on this thread: the caller may hold a lock its function takes.
  if (fire_now) asio::post(io_, [t] { t->cancel(); });
  else if (kick) asio::post(io_, [this] { wake(); });
  return t;
}

void delayed_ops::wake() {
  std::vector<std::shared_ptr<timer>> due;
  int64_t next = INT64_MAX;
  {
    std::lock_guard g(mu_);
    const int64_t now = clk_.monotonic_ms();
    while (!heap_.empty() && heap_.top().at_ms <= now) {
      if (auto t = heap_.top().t.lock()) due.push_back(std::move(t));
      heap_.pop();
    }
    // Cancelled timers their owners dropped need not wait for their time.
    while (!heap_.empty() && heap_.top().t.expired()) heap_.pop();
    if (!heap_.empty()) next = heap_.top().at_ms;
    wake_at_ms_ = next;
  }
  for (auto& t : due)
    if (auto fn = t->take()) fn(false);
  if (next == INT64_MAX) return;  // after() posts a wake for the next timer
  // A later wake() (posted by after()) re-arms it sooner; this one's wait
  // then ends as aborted and looks again, which costs nothing.
  wake_timer_.expires_after(std::chrono::milliseconds(clk_.sleep_ms_until(next)));
  wake_timer_.async_wait([this](const std::error_code& ec) {
    if (ec != asio::error::operation_aborted) wake();
  });
}

void delayed_ops::drain() {
  std::vector<std::shared_ptr<timer>> timers;
  {
    std::lock_guard g(mu_);
    draining_ = true;
    while (!heap_.empty()) {
      if (auto t = heap_.top().t.lock()) timers.push_back(std::move(t));
      heap_.pop();
    }
  }
  for (const auto& t : timers) t->cancel();
}

void delayed_ops::stop() {
  {
    std::lock_guard g(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  drain();
  // The wake-up timer would keep run() going: cancel it on its thread.
  asio::post(io_, [this] { wake_timer_.cancel(); });
  work_.reset();  // run() returns once the queue and the cancelled wait are done
  if (thread_.joinable()) thread_.join();
}

}  // namespace sluice::kafka
