#pragma once

// Runs independent, blocking jobs (syncs of many small files) on a few
// short-lived threads. For work that waits on the device rather than the
// CPU: shutdown closing thousands of partition logs, start opening them.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace sluice {

// Calls fn(i) once for every i in [0, n), on up to `threads` threads, the
// calling thread among them, and returns when every call has returned.
// Calls run concurrently in no particular order: `fn` must be safe to call
// from several threads at once for different i. Starts no thread for n <= 1.
template <class Fn>
void parallel_for(size_t n, size_t threads, const Fn& fn) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
  };
  const size_t extra = std::min(threads, n) > 0 ? std::min(threads, n) - 1 : 0;
  std::vector<std::thread> pool;
  pool.reserve(extra);
  for (size_t t = 0; t < extra; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
}

}  // namespace sluice
