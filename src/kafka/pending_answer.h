#pragma once

// A request whose answer waits for several partitions (Kafka's delayed
// operations: a Produce with acks=all waiting for its batches to commit, a
// DeleteRecords waiting for the low watermark). The last partition to
// finish, or the timeout, sends the answer, exactly once.
//
// Use: set `waiting` to the number of partitions plus one before any wait
// can finish (the extra count is released by the handler once every wait is
// set up, with done()), list every partition in `outstanding`, then arm the
// timeout with arm_timeout(); each partition's outcome is written under `mu`
// unless `answered`, erased from `outstanding`, and followed by done().
//
// Thread safety: every member but `req` and `resp`'s writing before the
// first wait is guarded by `mu`; done() and the timer may run on any thread.

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "kafka/delayed_ops.h"
#include "kafka/request.h"

namespace sluice::kafka {

template <class Response, class PartitionResult>
struct pending_answer : std::enable_shared_from_this<pending_answer<Response, PartitionResult>> {
  request req;
  Response resp;
  std::atomic<int> waiting{0};
  std::mutex mu;  // guards the partitions' results, `answered`, `timer` and `outstanding`
  bool answered = false;
  std::shared_ptr<delayed_ops::timer> timer;
  // Partitions still waiting (the timeout answers these).
  std::vector<PartitionResult*> outstanding;

  // One wait finished; the last one answers.
  void done() {
    if (waiting.fetch_sub(1) != 1) return;
    std::shared_ptr<delayed_ops::timer> t;
    {
      std::lock_guard g(mu);
      if (answered) return;
      answered = true;
      req.respond(resp);
      t = std::move(timer);
    }
    if (t) t->cancel();
  }

  // After `timeout`, answers at once with `expire` applied to every
  // partition still outstanding (under `mu`), unless answered by then.
  void arm_timeout(std::chrono::milliseconds timeout, std::function<void(PartitionResult&)> expire) {
    auto self = this->shared_from_this();
    auto t = req.svc->delayed->after(timeout, [self, expire = std::move(expire)](bool cancelled) {
      if (cancelled) return;
      std::lock_guard g(self->mu);
      if (self->answered) return;
      self->answered = true;
      for (auto* pr : self->outstanding) expire(*pr);
      self->req.respond(self->resp);
    });
    {
      std::lock_guard g(mu);
      if (!answered) {
        timer = std::move(t);
        return;
      }
    }
    t->cancel();
  }
};

}  // namespace sluice::kafka
