#include "storage/flusher.h"

#include <algorithm>

#include "storage/log.h"

namespace sluice::storage {

flusher::flusher(int threads) {
  running_ = std::max(threads, 1);
  for (int i = 0; i < running_; ++i) threads_.emplace_back([this] { run(); });
}

flusher::~flusher() { stop(); }

void flusher::request(std::shared_ptr<log> l) {
  {
    std::lock_guard g(mu_);
    if (!stopped_) {
      if (std::find(queue_.begin(), queue_.end(), l) == queue_.end()) queue_.push_back(std::move(l));
      cv_.notify_one();
      return;
    }
  }
  l->flush_for_waiters();
}

void flusher::stop() {
  {
    std::lock_guard g(mu_);
    if (stopping_) return;
    stopping_ = true;
    cv_.notify_all();
  }
  for (auto& t : threads_) t.join();
}

void flusher::run() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping and drained
    std::shared_ptr<log> l = std::move(queue_.front());
    queue_.pop_front();
    lk.unlock();
    l->flush_for_waiters();
    l.reset();  // the last owner may be us; destroy outside the lock
    lk.lock();
  }
  // Requests after the last thread leaves are served by their callers.
  if (--running_ == 0) stopped_ = true;
}

}  // namespace sluice::storage
