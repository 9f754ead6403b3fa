#pragma once

// Keeps one etcd lease alive, and says once when it is lost.
//
// A lease_keeper renews its lease every TTL/3 from a thread of its own,
// through any etcd::client (the real one, or the fake for tests). It calls
// `on_lost` exactly once, from that thread, when etcd answers that the lease
// no longer exists (it expired, or someone revoked it), or answers the
// renewal with another error than "unavailable".
//
// A whole TTL without a successful renewal (counted from the moment the
// last one was SENT: etcd restarts the TTL when it receives it, never
// earlier) is not a loss by itself: etcd that lost its quorum expires no
// lease, and extends them all when it elects a leader again, so the keeper
// keeps asking (an etcd outage longer than a session must cost no broker
// its registration). The holder must still assume, from
// then on, that etcd may have expired the lease and deleted its keys: it
// knows by on_renewed's "good until" times, on its own clock, and fences
// itself until a renewal succeeds again (or etcd's verdict comes).
// After on_lost the keeper stops; a new lease needs a new keeper.
//
// `on_renewed`, when given, is called from the keeper's thread after every
// successful renewal with the time the lease is good until for certain:
// the renewal's send time plus the TTL etcd granted (on the keeper's clock).
// The holder can then tell, at any moment and without the keeper's thread
// having run (a process resumed after SIGSTOP), that the lease may be gone.
//
// Time is read from the given sluice::clock (a manual_clock in tests: the
// keeper's waits then follow the test's advances, see base/clock.h).
//
// Threads: the constructor starts the thread; stop() and the destructor stop
// it and may be called from any thread, also from inside on_lost (then they
// return without waiting for the thread). When stop() returns on another
// thread, on_lost is not running and will not be called. Neither revokes the
// lease: call client::lease_revoke() to give it up at once.

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "base/clock.h"
#include "base/result.h"
#include "etcd/client.h"

namespace sluice::etcd {

class lease_keeper {
 public:
  using lost_callback = std::function<void(const error& why)>;
  using renewed_callback = std::function<void(int64_t good_until_ms)>;

  // Construct right after granting the lease: its TTL is counted from here.
  lease_keeper(client& c, int64_t lease_id, int64_t ttl_s, lost_callback on_lost,
               const clock& clk, renewed_callback on_renewed = nullptr);
  ~lease_keeper();
  lease_keeper(const lease_keeper&) = delete;
  lease_keeper& operator=(const lease_keeper&) = delete;

  void stop();
  bool lost() const { return lost_.load(); }
  int64_t lease_id() const { return lease_id_; }
  // Successful renewals so far (for tests and metrics).
  int64_t renewals() const { return renewals_.load(); }

 private:
  void run();
  // Waits until `deadline_ms` on the clock or stop(); false if stopped.
  bool wait_until(int64_t deadline_ms);

  client& client_;
  const int64_t lease_id_;
  int64_t ttl_ms_;
  lost_callback on_lost_;
  renewed_callback on_renewed_;
  const clock& clock_;
  const int64_t start_ms_;  // when the keeper was made (the TTL counts from here)
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::atomic<bool> lost_{false};
  std::atomic<int64_t> renewals_{0};
  std::thread thread_;
};

}  // namespace sluice::etcd
