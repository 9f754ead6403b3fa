#pragma once

// An in-memory etcd for unit tests of code written against etcd::client
// (the controller, lease holders). Deterministic: no threads of its own, time
// from a manual_clock, revisions, versions and lease ids allocated in order.
//
// What it models, as etcd 3.4 does:
//   - one global revision, starting at 1; each put, each txn with writes and
//     each delete that deleted something (and each lease expiry or revoke
//     that deleted keys) makes it one larger; create_revision, mod_revision
//     and version per key; reads at an older revision (history is kept).
//   - txn compares exactly as etcd evaluates them (see client.h), the branch
//     checks (a key written twice in one branch is invalid_argument; a put
//     naming an unknown lease is not_found).
//   - leases with a TTL on the manual clock. A lease whose TTL has run out is
//     expired, deleting its keys in one revision (with delete events), when
//     the test calls expire_leases() or at the start of any call.
//   - compaction: compact(rev) forgets revisions below rev; a read or a watch
//     from an older revision gets offset_out_of_range or the `compacted`
//     notice.
//
// Watch delivery. Updates are delivered synchronously by the call that
// caused them (the put, txn, expire_leases(), set_unavailable(false), or the
// watch() that replays history), after that call has released the fake's
// lock, so a callback may call the fake again. Its own updates are then
// queued and delivered by the outer delivery loop when the callback
// returns, still in revision order. If another thread is delivering at that
// moment, that thread's loop delivers them (a call may then return before
// its updates arrive); single-threaded tests never see that.
//
// Faults:
//   set_unavailable(true)   every call fails with errc::unavailable, doing
//                           nothing; watches get `interrupted`, and
//                           `resumed` plus what they missed on
//                           set_unavailable(false).
//   set_no_leader(true)     the same, each call answered as a member that
//                           lost its quorum answers ("etcdserver: no
//                           leader"), which leaderless_within() reports;
//                           set_no_leader(false) then renews every lease
//                           for its TTL, as etcd's new leader does.
//   fail_next(n)            the next n calls fail with unavailable, doing nothing.
//   apply_then_fail_next(n) the next n writes (put, delete_range, txn) are
//                           applied, then report unavailable: the ambiguous
//                           write a timeout leaves behind. A put or txn marked
//                           retry_if_unknown is instead applied once more and
//                           answers with that second attempt, as grpc_client's
//                           retry would.
//
// Threads: every method may be called from any thread. Watch handles must
// be destroyed before the fake.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "base/clock.h"
#include "etcd/client.h"

namespace sluice::etcd {

class fake_client final : public client {
 public:
  explicit fake_client(manual_clock& clk);
  ~fake_client() override;
  fake_client(const fake_client&) = delete;
  fake_client& operator=(const fake_client&) = delete;

  result<range_result> range(const key_range& keys, range_options opts = {}) override;
  result<put_result> put(const std::string& key, const std::string& value,
                         put_options opts = {}) override;
  result<delete_result> delete_range(const key_range& keys, bool prev_kv = false) override;
  result<txn_result> txn(const txn_request& req) override;
  result<lease_grant_result> lease_grant(int64_t ttl_s) override;
  result<int64_t> lease_keepalive_once(int64_t lease_id, int64_t budget_ms) override;
  result<int64_t> lease_time_to_live(int64_t lease_id) override;
  status lease_revoke(int64_t lease_id) override;
  result<std::unique_ptr<watch_handle>> watch(const key_range& keys, int64_t start_revision,
                                              watch_callback cb) override;
  result<std::vector<endpoint_status>> endpoints_status() override;
  bool leaderless_within(int64_t window_ms) const override;

  // ---- Test controls (see the top of this file) ----
  void set_unavailable(bool on);
  void set_no_leader(bool on);
  void fail_next(int n);
  void apply_then_fail_next(int n);
  // Forgets revisions below `rev` (<= the current revision).
  status compact(int64_t rev);
  // Expires every lease whose TTL has run out on the clock; returns how many.
  size_t expire_leases();
  int64_t revision() const;
  size_t live_watches() const;
  size_t lease_count() const;

 private:
  struct watcher;
  class handle;
  struct lease {
    int64_t ttl_s = 0;
    int64_t expiry_ms = 0;  // on the clock's monotonic time
    std::set<std::string> keys;
  };
  // One revision's worth of changes being built by a write.
  struct pending_write {
    int64_t rev = 0;
    std::vector<watch_event> events;
  };

  status gate_locked();
  // Applies the ambiguous-write fault after a write that was applied.
  template <class T, class Again>
  result<T> after_write_locked(result<T> r, bool retry_if_unknown, Again&& again);
  result<txn_result> txn_once_locked(const txn_request& req);
  size_t expire_leases_locked();
  void put_locked(pending_write& w, const std::string& key, const std::string& value,
                  int64_t lease_id, std::optional<key_value>* prev);
  int64_t delete_locked(pending_write& w, const key_range& keys, std::vector<key_value>* prev);
  void commit_locked(pending_write& w);
  result<range_result> range_locked(const key_range& keys, const range_options& opts) const;
  status check_branch_locked(const std::vector<txn_op>& ops) const;
  bool compare_holds_locked(const compare& c) const;
  void replay_locked(const std::shared_ptr<watcher>& w);
  void unregister(const std::shared_ptr<watcher>& w);
  void deliver();

  manual_clock& clock_;
  mutable std::mutex mu_;
  std::condition_variable delivered_cv_;
  int64_t rev_ = 1;
  int64_t compacted_ = 0;
  std::map<std::string, key_value> kvs_;
  std::vector<std::pair<int64_t, watch_event>> history_;  // every event, in revision order
  std::map<int64_t, lease> leases_;
  int64_t next_lease_id_ = 0x5a1c'e000'0000'0001;
  std::map<uint64_t, std::shared_ptr<watcher>> watches_;
  uint64_t next_watch_id_ = 1;
  std::deque<std::pair<std::shared_ptr<watcher>, watch_update>> pending_;
  bool delivering_ = false;
  std::thread::id delivering_thread_;
  const watcher* in_callback_ = nullptr;
  bool unavailable_ = false;
  bool no_leader_ = false;
  int64_t no_leader_at_ms_ = -1;  // the last call answered "no leader"
  int fail_next_ = 0;
  int apply_then_fail_next_ = 0;
  size_t live_handles_ = 0;
};

}  // namespace sluice::etcd
