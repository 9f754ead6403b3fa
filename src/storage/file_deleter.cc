#include "storage/file_deleter.h"

#include <algorithm>
#include <chrono>

#include "base/log.h"

namespace sluice::storage {

file_deleter::file_deleter(io::filesystem& fs, sluice::clock& clk)
    : fs_(fs), clk_(clk), thread_([this] { run(); }) {}

file_deleter::~file_deleter() {
  stop();
}

void file_deleter::schedule(std::vector<std::string> paths, int64_t delay_ms) {
  {
    std::lock_guard g(mu_);
    if (!stopped_) {
      const int64_t at = clk_.monotonic_ms() + std::max<int64_t>(delay_ms, 0);
      for (auto& p : paths) due_.emplace(at, std::move(p));
      cv_.notify_one();
      return;
    }
  }
  remove_all(std::move(paths));
}

void file_deleter::remove_all(std::vector<std::string> paths) {
  for (const auto& p : paths) {
    if (!fs_.exists(p)) continue;  // its directory went with a deleted topic
    if (auto st = fs_.remove(p); !st.ok()) SLUICE_LOG_WARN("removing {}: {}", p, st.err().message);
  }
}

size_t file_deleter::run_due() {
  std::vector<std::string> now;
  {
    std::lock_guard g(mu_);
    const int64_t t = clk_.monotonic_ms();
    while (!due_.empty() && due_.begin()->first <= t) {
      now.push_back(std::move(due_.begin()->second));
      due_.erase(due_.begin());
    }
  }
  const size_t n = now.size();
  remove_all(std::move(now));
  return n;
}

void file_deleter::stop() {
  std::vector<std::string> rest;
  {
    std::lock_guard g(mu_);
    if (stopping_) return;
    stopping_ = true;
    cv_.notify_one();
  }
  thread_.join();
  {
    std::lock_guard g(mu_);
    stopped_ = true;
    for (auto& [at, p] : due_) rest.push_back(std::move(p));
    due_.clear();
  }
  remove_all(std::move(rest));
}

size_t file_deleter::pending() const {
  std::lock_guard g(mu_);
  return due_.size();
}

void file_deleter::run() {
  std::unique_lock lk(mu_);
  while (!stopping_) {
    // schedule() and stop() notify; the clock says how long a wait may be
    // (base/clock.h, "Waiting on a clock").
    if (due_.empty())
      cv_.wait(lk);
    else if (const int64_t wait = clk_.sleep_ms_until(due_.begin()->first); wait > 0)
      cv_.wait_for(lk, std::chrono::milliseconds(wait));
    if (stopping_) break;
    lk.unlock();
    run_due();
    lk.lock();
  }
}

}  // namespace sluice::storage
