#pragma once

// One worker thread per key (a remote broker), each running its own queue
// of blocking jobs in order: a destination that does not answer holds up
// only the jobs addressed to it. Threads start on a key's first job and
// are joined by stop(); jobs still queued then are dropped (their owners
// must not wait for them), a job in progress returns first.
//
// Thread safety: submit() and stop() may be called from any thread.

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace sluice {

template <class Key>
class keyed_workers {
 public:
  keyed_workers() = default;
  keyed_workers(const keyed_workers&) = delete;
  keyed_workers& operator=(const keyed_workers&) = delete;
  ~keyed_workers() { stop(); }

  // Queues `job` for `key`'s worker; false (and `job` dropped) after stop().
  bool submit(const Key& key, std::function<void()> job) {
    std::lock_guard g(mu_);
    if (stopping_) return false;
    auto& w = workers_[key];
    w.queue.push_back(std::move(job));
    if (!w.thread.joinable()) w.thread = std::thread([this, key] { run(key); });
    cv_.notify_all();
    return true;
  }

  void stop() {
    {
      std::lock_guard g(mu_);
      stopping_ = true;
      cv_.notify_all();
    }
    std::lock_guard j(join_mu_);
    for (auto& [k, w] : workers_)
      if (w.thread.joinable()) w.thread.join();
  }

 private:
  struct worker {
    std::deque<std::function<void()>> queue;
    std::thread thread;
  };

  void run(Key key) {
    std::unique_lock g(mu_);
    for (;;) {
      auto& w = workers_[key];  // map nodes are stable: the reference stays valid
      cv_.wait(g, [&] { return stopping_ || !w.queue.empty(); });
      if (stopping_) {
        w.queue.clear();
        return;
      }
      auto job = std::move(w.queue.front());
      w.queue.pop_front();
      g.unlock();
      job();
      g.lock();
    }
  }

  std::mutex mu_;
  std::mutex join_mu_;
  std::condition_variable cv_;
  std::map<Key, worker> workers_;
  bool stopping_ = false;
};

}  // namespace sluice
