#pragma once

// The broker's "purgatory": one thread with an asio io_context where
// requests that wait (long-polling fetches) park until data arrives or their
// time runs out. Work is posted from any thread; timers fire here.
//
// Thread safety: post(), after() and drain() are thread-safe. Everything
// posted runs on the delayed-ops thread, one task at a time.

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>

namespace sluice::kafka {

class delayed_ops {
 public:
  delayed_ops();
  ~delayed_ops();  // stop()s
  delayed_ops(const delayed_ops&) = delete;
  delayed_ops& operator=(const delayed_ops&) = delete;

  // Runs `fn` on the delayed-ops thread.
  void post(std::function<void()> fn);
  // Calls `fn(false)` on the delayed-ops thread after `delay`, or `fn(true)`
  // earlier if the returned timer is cancelled or the broker drains.
  std::shared_ptr<asio::steady_timer> after(std::chrono::milliseconds delay, std::function<void(bool cancelled)> fn);

  // Shutdown, step 1: fires every pending timer now (cancelled) and makes
  // later after() calls fire at once, so waiting requests are answered
  // promptly while the server drains.
  void drain();
  // Shutdown, step 2: runs what is queued and joins the thread. Idempotent.
  void stop();

 private:
  asio::io_context io_;
  std::unique_ptr<asio::executor_work_guard<asio::io_context::executor_type>> work_;
  std::thread thread_;
  std::mutex mu_;  // guards timers_, draining_, stopped_
  std::vector<std::weak_ptr<asio::steady_timer>> timers_;
  bool draining_ = false;
  bool stopped_ = false;
};

}  // namespace sluice::kafka
