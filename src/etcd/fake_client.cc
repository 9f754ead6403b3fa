#include "etcd/fake_client.h"

#include <algorithm>

#include "base/assert.h"

namespace sluice::etcd {

struct fake_client::watcher {
  uint64_t id = 0;
  key_range keys;
  int64_t next_rev = 0;  // the oldest revision not yet queued for it
  watch_callback cb;
  bool ended = false;  // cancelled, or compacted
};

class fake_client::handle final : public watch_handle {
 public:
  handle(fake_client* f, std::shared_ptr<watcher> w) : f_(f), w_(std::move(w)) {}
  ~handle() override {
    cancel();
    std::lock_guard lk(f_->mu_);
    --f_->live_handles_;
  }
  void cancel() override { f_->unregister(w_); }

 private:
  fake_client* f_;
  std::shared_ptr<watcher> w_;
};

namespace {

error unavailable_error(std::string_view why) {
  return make_error(errc::unavailable, "etcd (fake) unavailable: " + std::string(why));
}

bool compare_numbers(int64_t have, compare_op op, int64_t want) {
  switch (op) {
    case compare_op::equal:
      return have == want;
    case compare_op::not_equal:
      return have != want;
    case compare_op::less:
      return have < want;
    case compare_op::greater:
      return have > want;
  }
  return false;
}

bool compare_bytes(const std::string& have, compare_op op, const std::string& want) {
  int c = have.compare(want);  // bytes as unsigned, like Go's bytes.Compare
  switch (op) {
    case compare_op::equal:
      return c == 0;
    case compare_op::not_equal:
      return c != 0;
    case compare_op::less:
      return c < 0;
    case compare_op::greater:
      return c > 0;
  }
  return false;
}

}  // namespace

fake_client::fake_client(manual_clock& clk) : clock_(clk) {}

fake_client::~fake_client() {
  std::lock_guard lk(mu_);
  SLUICE_ASSERT(live_handles_ == 0, "fake_client destroyed before its watch handles");
}

// ---- Faults ------------------------------------------------------------------

status fake_client::gate_locked() {
  if (unavailable_ && no_leader_) {
    no_leader_at_ms_ = clock_.monotonic_ms();
    return unavailable_error("etcdserver: no leader");
  }
  if (unavailable_) return unavailable_error("set_unavailable(true)");
  if (fail_next_ > 0) {
    --fail_next_;
    return unavailable_error("fail_next");
  }
  expire_leases_locked();
  return {};
}

template <class T, class Again>
result<T> fake_client::after_write_locked(result<T> r, bool retry_if_unknown, Again&& again) {
  if (r.ok() && apply_then_fail_next_ > 0) {
    --apply_then_fail_next_;
    // What grpc_client does after a timeout with an unknown outcome:
    // repeat the write if the caller marked it safe, else report it.
    if (retry_if_unknown) return again();
    return unavailable_error(
        "apply_then_fail_next: the write was applied, outcome unknown to the caller");
  }
  return r;
}

void fake_client::set_unavailable(bool on) {
  {
    std::lock_guard lk(mu_);
    if (on == unavailable_) return;
    unavailable_ = on;
    for (auto& [id, w] : watches_) {
      if (on) {
        watch_update u{watch_update::kind::interrupted, {}, w->next_rev, "set_unavailable(true)"};
        pending_.emplace_back(w, std::move(u));
      } else {
        pending_.emplace_back(w, watch_update{watch_update::kind::resumed, {}, w->next_rev, {}});
        replay_locked(w);
      }
    }
  }
  deliver();
}

void fake_client::set_no_leader(bool on) {
  {
    std::lock_guard lk(mu_);
    no_leader_ = on;
    if (on) no_leader_at_ms_ = clock_.monotonic_ms();
    // A leader elected again renews every lease for its whole TTL (etcd's
    // lessor Promote), so none expires for the time without a quorum.
    if (!on)
      for (auto& [_, l] : leases_) l.expiry_ms = std::max(l.expiry_ms, clock_.monotonic_ms() + l.ttl_s * 1000);
  }
  set_unavailable(on);
}

bool fake_client::leaderless_within(int64_t window_ms) const {
  std::lock_guard lk(mu_);
  // While set, every call would answer "no leader": as if one had just now.
  return no_leader_ ||
         (no_leader_at_ms_ >= 0 && clock_.monotonic_ms() - no_leader_at_ms_ <= window_ms);
}

void fake_client::fail_next(int n) {
  std::lock_guard lk(mu_);
  fail_next_ = n;
}

void fake_client::apply_then_fail_next(int n) {
  std::lock_guard lk(mu_);
  apply_then_fail_next_ = n;
}

// ---- Writes ------------------------------------------------------------------

void fake_client::put_locked(pending_write& w, const std::string& key, const std::string& value,
                             int64_t lease_id, std::optional<key_value>* prev) {
  auto it = kvs_.find(key);
  key_value kv;
  kv.key = key;
  kv.value = value;
  kv.lease = lease_id;
  kv.mod_revision = w.rev;
  if (it == kvs_.end()) {
    kv.create_revision = w.rev;
    kv.version = 1;
  } else {
    if (prev) *prev = it->second;
    kv.create_revision = it->second.create_revision;
    kv.version = it->second.version + 1;
    if (it->second.lease != 0 && it->second.lease != lease_id) {
      auto l = leases_.find(it->second.lease);
      if (l != leases_.end()) l->second.keys.erase(key);
    }
  }
  if (lease_id != 0) leases_.at(lease_id).keys.insert(key);
  kvs_[key] = kv;
  w.events.push_back(watch_event{watch_event::kind::put, kv});
}

int64_t fake_client::delete_locked(pending_write& w, const key_range& keys,
                                   std::vector<key_value>* prev) {
  std::vector<std::string> doomed;
  for (auto it = kvs_.lower_bound(keys.key); it != kvs_.end() && keys.contains(it->first); ++it) {
    doomed.push_back(it->first);
  }
  for (const auto& k : doomed) {
    auto it = kvs_.find(k);
    if (prev) prev->push_back(it->second);
    if (it->second.lease != 0) {
      auto l = leases_.find(it->second.lease);
      if (l != leases_.end()) l->second.keys.erase(k);
    }
    key_value gone;
    gone.key = k;
    gone.mod_revision = w.rev;
    w.events.push_back(watch_event{watch_event::kind::del, std::move(gone)});
    kvs_.erase(it);
  }
  return static_cast<int64_t>(doomed.size());
}

void fake_client::commit_locked(pending_write& w) {
  if (w.events.empty()) return;  // nothing changed: the revision stays
  SLUICE_ASSERT(w.rev == rev_ + 1, "fake etcd: writes out of order");
  rev_ = w.rev;
  for (const auto& e : w.events) history_.emplace_back(w.rev, e);
  if (unavailable_) return;  // watchers catch up on set_unavailable(false)
  for (auto& [id, wt] : watches_) {
    if (wt->ended || wt->next_rev > w.rev) continue;
    watch_update u{watch_update::kind::events, {}, w.rev, {}};
    for (const auto& e : w.events) {
      if (wt->keys.contains(e.kv.key)) u.events.push_back(e);
    }
    wt->next_rev = w.rev + 1;
    if (!u.events.empty()) pending_.emplace_back(wt, std::move(u));
  }
}

result<put_result> fake_client::put(const std::string& key, const std::string& value,
                                    put_options opts) {
  result<put_result> r = [&]() -> result<put_result> {
    std::lock_guard lk(mu_);
    SLUICE_TRY(gate_locked());
    if (key.empty()) return make_error(errc::invalid_argument, "etcd: key is not provided");
    auto once = [&]() -> result<put_result> {
      if (opts.lease != 0 && !leases_.contains(opts.lease)) {
        return make_error(errc::not_found, "etcd: requested lease not found");
      }
      pending_write w{rev_ + 1, {}};
      put_result out;
      put_locked(w, key, value, opts.lease, opts.prev_kv ? &out.prev_kv : nullptr);
      commit_locked(w);
      out.header_revision = rev_;
      return out;
    };
    return after_write_locked(once(), opts.retry_if_unknown, once);
  }();
  deliver();
  return r;
}

result<delete_result> fake_client::delete_range(const key_range& keys, bool prev_kv) {
  result<delete_result> r = [&]() -> result<delete_result> {
    std::lock_guard lk(mu_);
    SLUICE_TRY(gate_locked());
    if (keys.key.empty()) return make_error(errc::invalid_argument, "etcd: key is not provided");
    pending_write w{rev_ + 1, {}};
    delete_result out;
    out.deleted = delete_locked(w, keys, prev_kv ? &out.prev_kvs : nullptr);
    commit_locked(w);
    out.header_revision = rev_;
    // A delete is never marked safe to repeat (a repeat could delete a key
    // re-created meanwhile), so there is no retry to model.
    auto no_retry = [] { return result<delete_result>(delete_result{}); };
    return after_write_locked(result<delete_result>(std::move(out)), false, no_retry);
  }();
  deliver();
  return r;
}

// ---- Reads -------------------------------------------------------------------

result<range_result> fake_client::range_locked(const key_range& keys,
                                               const range_options& opts) const {
  if (keys.key.empty()) return make_error(errc::invalid_argument, "etcd: key is not provided");
  if (opts.revision > rev_) {
    return make_error(errc::offset_out_of_range,
                      "etcd: mvcc: required revision is a future revision");
  }
  if (opts.revision > 0 && opts.revision < compacted_) {
    return make_error(errc::offset_out_of_range,
                      "etcd: mvcc: required revision has been compacted");
  }
  // The store as of the revision asked for: the live map, or the history
  // replayed up to that revision.
  std::map<std::string, key_value> at;
  const std::map<std::string, key_value>* view = &kvs_;
  if (opts.revision > 0 && opts.revision < rev_) {
    for (const auto& [rev, e] : history_) {
      if (rev > opts.revision) break;
      if (e.type == watch_event::kind::put) {
        at[e.kv.key] = e.kv;
      } else {
        at.erase(e.kv.key);
      }
    }
    view = &at;
  }
  range_result out;
  out.header_revision = rev_;
  for (auto it = view->lower_bound(keys.key); it != view->end() && keys.contains(it->first); ++it) {
    ++out.count;
    if (opts.limit > 0 && static_cast<int64_t>(out.kvs.size()) >= opts.limit) {
      out.more = true;
      continue;
    }
    out.kvs.push_back(it->second);
  }
  return out;
}

result<range_result> fake_client::range(const key_range& keys, range_options opts) {
  result<range_result> r = [&]() -> result<range_result> {
    std::lock_guard lk(mu_);
    SLUICE_TRY(gate_locked());
    return range_locked(keys, opts);
  }();
  deliver();  // a lease may have expired on the way in
  return r;
}

// ---- Txn ---------------------------------------------------------------------

bool fake_client::compare_holds_locked(const compare& c) const {
  auto it = kvs_.find(c.key);
  if (it == kvs_.end()) {
    // etcd: a value compare on an absent key always fails; the other
    // targets see an absent key as all zeros.
    if (c.target == compare_target::value) return false;
    return compare_numbers(0, c.op, c.number);
  }
  const key_value& kv = it->second;
  switch (c.target) {
    case compare_target::value:
      return compare_bytes(kv.value, c.op, c.value);
    case compare_target::version:
      return compare_numbers(kv.version, c.op, c.number);
    case compare_target::create_revision:
      return compare_numbers(kv.create_revision, c.op, c.number);
    case compare_target::mod_revision:
      return compare_numbers(kv.mod_revision, c.op, c.number);
    case compare_target::lease:
      return compare_numbers(kv.lease, c.op, c.number);
  }
  return false;
}

status fake_client::check_branch_locked(const std::vector<txn_op>& ops) const {
  // etcd refuses a branch that writes one key twice: two puts of it, or a
  // put of a key that a delete in the same branch covers.
  std::set<std::string> put_keys;
  std::vector<const key_range*> deletes;
  for (const auto& op : ops) {
    if (const auto* p = std::get_if<put_op>(&op)) {
      if (p->key.empty()) return status(errc::invalid_argument, "etcd: key is not provided");
      if (!put_keys.insert(p->key).second) {
        return status(errc::invalid_argument, "etcd: duplicate key given in txn request");
      }
    } else if (const auto* d = std::get_if<delete_op>(&op)) {
      if (d->keys.key.empty()) return status(errc::invalid_argument, "etcd: key is not provided");
      deletes.push_back(&d->keys);
    } else {
      const auto& rg = std::get<range_op>(op);
      if (rg.keys.key.empty()) return status(errc::invalid_argument, "etcd: key is not provided");
      if (rg.options.revision > rev_ ||
          (rg.options.revision > 0 && rg.options.revision < compacted_)) {
        return status(errc::offset_out_of_range,
                      "etcd: mvcc: required revision is compacted or in the future");
      }
    }
  }
  for (const auto* d : deletes) {
    for (const auto& k : put_keys) {
      if (d->contains(k))
        return status(errc::invalid_argument, "etcd: duplicate key given in txn request");
    }
  }
  return {};
}

result<txn_result> fake_client::txn(const txn_request& req) {
  result<txn_result> r = [&]() -> result<txn_result> {
    std::lock_guard lk(mu_);
    SLUICE_TRY(gate_locked());
    SLUICE_TRY(check_branch_locked(req.then_ops));
    SLUICE_TRY(check_branch_locked(req.else_ops));
    return after_write_locked(txn_once_locked(req), req.retry_if_unknown,
                              [&] { return txn_once_locked(req); });
  }();
  deliver();
  return r;
}

result<txn_result> fake_client::txn_once_locked(const txn_request& req) {
  txn_result out;
  out.succeeded = std::all_of(req.compares.begin(), req.compares.end(),
                              [&](const compare& c) { return compare_holds_locked(c); });
  const auto& ops = out.succeeded ? req.then_ops : req.else_ops;
  // etcd checks the leases of the branch that runs before applying any of it.
  for (const auto& op : ops) {
    if (const auto* p = std::get_if<put_op>(&op);
        p && p->options.lease != 0 && !leases_.contains(p->options.lease)) {
      return make_error(errc::not_found, "etcd: requested lease not found");
    }
  }
  pending_write w{rev_ + 1, {}};
  for (const auto& op : ops) {
    if (const auto* p = std::get_if<put_op>(&op)) {
      put_result pr;
      put_locked(w, p->key, p->value, p->options.lease, p->options.prev_kv ? &pr.prev_kv : nullptr);
      pr.header_revision = w.rev;
      out.results.emplace_back(std::move(pr));
    } else if (const auto* d = std::get_if<delete_op>(&op)) {
      delete_result dr;
      dr.deleted = delete_locked(w, d->keys, d->prev_kv ? &dr.prev_kvs : nullptr);
      out.results.emplace_back(std::move(dr));
    } else {
      const auto& rg = std::get<range_op>(op);
      // A range sees the branch's earlier writes: they are already in
      // kvs_. check_branch_locked made sure it cannot fail halfway.
      auto rr = range_locked(rg.keys, rg.options);
      SLUICE_ASSERT(rr.ok(), "fake etcd: a txn range failed after its checks");
      out.results.emplace_back(std::move(rr).value());
    }
  }
  commit_locked(w);
  out.header_revision = rev_;
  for (auto& res : out.results) {
    std::visit([&](auto& x) { x.header_revision = rev_; }, res);
  }
  return out;
}

// ---- Leases ------------------------------------------------------------------

size_t fake_client::expire_leases_locked() {
  const int64_t now = clock_.monotonic_ms();
  std::vector<int64_t> gone;
  for (const auto& [id, l] : leases_) {
    if (l.expiry_ms <= now) gone.push_back(id);
  }
  for (int64_t id : gone) {
    const auto keys = leases_.at(id).keys;
    leases_.erase(id);
    pending_write w{rev_ + 1, {}};
    for (const auto& k : keys) delete_locked(w, key_range::one(k), nullptr);
    commit_locked(w);
  }
  return gone.size();
}

size_t fake_client::expire_leases() {
  size_t n;
  {
    std::lock_guard lk(mu_);
    n = expire_leases_locked();
  }
  deliver();
  return n;
}

result<lease_grant_result> fake_client::lease_grant(int64_t ttl_s) {
  result<lease_grant_result> r = [&]() -> result<lease_grant_result> {
    std::lock_guard lk(mu_);
    SLUICE_TRY(gate_locked());
    if (ttl_s <= 0) return make_error(errc::invalid_argument, "lease ttl must be > 0");
    const int64_t id = next_lease_id_++;
    leases_[id] = lease{ttl_s, clock_.monotonic_ms() + ttl_s * 1000, {}};
    return lease_grant_result{id, ttl_s};
  }();
  deliver();
  return r;
}

result<int64_t> fake_client::lease_keepalive_once(int64_t lease_id, int64_t) {
  result<int64_t> r = [&]() -> result<int64_t> {
    std::lock_guard lk(mu_);
    SLUICE_TRY(gate_locked());
    auto it = leases_.find(lease_id);
    if (it == leases_.end()) return int64_t{0};
    it->second.expiry_ms = clock_.monotonic_ms() + it->second.ttl_s * 1000;
    return it->second.ttl_s;
  }();
  deliver();
  return r;
}

result<int64_t> fake_client::lease_time_to_live(int64_t lease_id) {
  result<int64_t> r = [&]() -> result<int64_t> {
    std::lock_guard lk(mu_);
    SLUICE_TRY(gate_locked());
    auto it = leases_.find(lease_id);
    if (it == leases_.end()) return int64_t{0};
    return (it->second.expiry_ms - clock_.monotonic_ms() + 999) / 1000;
  }();
  deliver();
  return r;
}

status fake_client::lease_revoke(int64_t lease_id) {
  status s = [&]() -> status {
    std::lock_guard lk(mu_);
    SLUICE_TRY(gate_locked());
    auto it = leases_.find(lease_id);
    if (it == leases_.end()) return status(errc::not_found, "etcd: requested lease not found");
    const auto keys = it->second.keys;
    leases_.erase(it);
    pending_write w{rev_ + 1, {}};
    for (const auto& k : keys) delete_locked(w, key_range::one(k), nullptr);
    commit_locked(w);
    return {};
  }();
  deliver();
  return s;
}

size_t fake_client::lease_count() const {
  std::lock_guard lk(mu_);
  return leases_.size();
}

// ---- Watches -----------------------------------------------------------------

void fake_client::replay_locked(const std::shared_ptr<watcher>& w) {
  // Queues every kept revision from w->next_rev on, one update per revision.
  watch_update u{watch_update::kind::events, {}, 0, {}};
  auto flush = [&] {
    if (!u.events.empty()) pending_.emplace_back(w, std::move(u));
    u = watch_update{watch_update::kind::events, {}, 0, {}};
  };
  auto it = std::lower_bound(history_.begin(), history_.end(), w->next_rev,
                             [](const auto& h, int64_t rev) { return h.first < rev; });
  for (; it != history_.end(); ++it) {
    if (it->first != u.revision) {
      flush();
      u.revision = it->first;
    }
    if (w->keys.contains(it->second.kv.key)) u.events.push_back(it->second);
  }
  flush();
  w->next_rev = rev_ + 1;
}

result<std::unique_ptr<watch_handle>> fake_client::watch(const key_range& keys,
                                                         int64_t start_revision,
                                                         watch_callback cb) {
  std::unique_ptr<watch_handle> h;
  {
    std::lock_guard lk(mu_);
    if (fail_next_ > 0) {
      --fail_next_;
      return unavailable_error("fail_next");
    }
    if (keys.key.empty()) return make_error(errc::invalid_argument, "etcd: key is not provided");
    if (!cb) return make_error(errc::invalid_argument, "watch without a callback");
    auto w = std::make_shared<watcher>();
    w->id = next_watch_id_++;
    w->keys = keys;
    w->cb = std::move(cb);
    w->next_rev = start_revision > 0 ? start_revision : rev_ + 1;
    ++live_handles_;
    h = std::make_unique<handle>(this, w);
    if (start_revision > 0 && start_revision < compacted_) {
      // etcd cancels such a watcher at once with the compact revision.
      w->ended = true;
      pending_.emplace_back(w, watch_update{watch_update::kind::compacted,
                                            {},
                                            compacted_,
                                            "etcd: mvcc: required revision has been compacted"});
    } else {
      watches_[w->id] = w;
      if (unavailable_) {
        pending_.emplace_back(
            w, watch_update{
                   watch_update::kind::interrupted, {}, w->next_rev, "set_unavailable(true)"});
      } else {
        replay_locked(w);
      }
    }
  }
  deliver();
  return h;
}

void fake_client::unregister(const std::shared_ptr<watcher>& w) {
  std::unique_lock lk(mu_);
  w->ended = true;
  watches_.erase(w->id);
  // When cancel() returns the callback must not be running, unless we are
  // that callback's own thread.
  delivered_cv_.wait(lk, [&] {
    return in_callback_ != w.get() || delivering_thread_ == std::this_thread::get_id();
  });
}

size_t fake_client::live_watches() const {
  std::lock_guard lk(mu_);
  return watches_.size();
}

void fake_client::deliver() {
  std::unique_lock lk(mu_);
  if (delivering_) return;  // that loop delivers what we queued, in order
  delivering_ = true;
  delivering_thread_ = std::this_thread::get_id();
  while (!pending_.empty()) {
    auto [w, u] = std::move(pending_.front());
    pending_.pop_front();
    // An ended watcher still gets the update that ended it (compacted).
    if (w->ended && u.type != watch_update::kind::compacted) continue;
    in_callback_ = w.get();
    lk.unlock();
    w->cb(u);
    lk.lock();
    in_callback_ = nullptr;
    delivered_cv_.notify_all();
  }
  delivering_ = false;
  delivering_thread_ = {};
}

// ---- Status ------------------------------------------------------------------

status fake_client::compact(int64_t rev) {
  std::lock_guard lk(mu_);
  if (rev > rev_)
    return status(errc::offset_out_of_range, "etcd: mvcc: required revision is a future revision");
  if (rev <= compacted_)
    return status(errc::offset_out_of_range, "etcd: mvcc: required revision has been compacted");
  compacted_ = rev;
  return {};
}

int64_t fake_client::revision() const {
  std::lock_guard lk(mu_);
  return rev_;
}

result<std::vector<endpoint_status>> fake_client::endpoints_status() {
  std::lock_guard lk(mu_);
  endpoint_status s;
  s.endpoint = "fake://etcd";
  s.reachable = !unavailable_;
  if (unavailable_) {
    s.error = "set_unavailable(true)";
  } else {
    s.member_id = 1;
    s.leader_id = 1;
    s.raft_term = 1;
    s.version = "fake";
  }
  return std::vector<endpoint_status>{s};
}

}  // namespace sluice::etcd
