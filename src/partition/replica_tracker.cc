#include "partition/replica_tracker.h"

#include <algorithm>

#include "base/assert.h"

namespace sluice::cluster {

namespace {

bool contains(const std::vector<int32_t>& v, int32_t id) { return std::find(v.begin(), v.end(), id) != v.end(); }

}  // namespace

bool replica_fetch_trusted(int64_t fetch_epoch, std::optional<int64_t> registered_epoch) {
  return fetch_epoch >= 0 && registered_epoch.has_value() && *registered_epoch == fetch_epoch;
}

void replica_tracker::become_leader(int32_t self, const std::vector<int32_t>& replicas,
                                    const std::vector<int32_t>& isr, offset hw, offset leader_end,
                                    int64_t now_ms) {
  SLUICE_ASSERT(contains(isr, self), "a leader outside its ISR");
  self_ = self;
  replicas_ = replicas;
  isr_ = isr;
  pending_.clear();
  followers_.clear();
  for (int32_t id : replicas)
    if (id != self) followers_.push_back({id, offset(-1), now_ms, now_ms, offset(-1)});
  hw_ = std::min(hw, leader_end);
  leader_end_ = leader_end;
  epoch_start_ = leader_end;
  advance(leader_end);
}

bool replica_tracker::set_isr(const std::vector<int32_t>& replicas, const std::vector<int32_t>& isr,
                              offset leader_end, int64_t now_ms) {
  // Followers that stay keep what the leader knows of them; new ones start
  // unknown and caught up now (as at become_leader).
  std::vector<follower_progress> next;
  for (int32_t id : replicas) {
    if (id == self_) continue;
    if (auto* f = find(id))
      next.push_back(*f);
    else
      next.push_back({id, offset(-1), now_ms, now_ms, offset(-1)});
  }
  SLUICE_ASSERT(contains(isr, self_), "a leader outside its ISR");
  followers_ = std::move(next);
  replicas_ = replicas;
  isr_ = isr;
  // Every store change moves the partition epoch, and every proposal made
  // before it names the old one, which the controller refuses from now on:
  // a pending addition the store now shows is done, one it does not show
  // can no longer happen. The next proposal adds it again if it is caught
  // up.
  pending_.clear();
  return advance(leader_end);
}

bool replica_tracker::on_fetch(int32_t id, offset fetch_offset, offset leader_end, int64_t now_ms,
                               int64_t broker_epoch, offset log_start) {
  follower_progress* f = find(id);
  if (!f) return false;
  f->broker_epoch = broker_epoch;
  if (log_start.value() >= 0) f->log_start = log_start;
  // Caught up now, or to where the leader was at the previous fetch.
  if (fetch_offset >= leader_end) {
    f->last_caught_up_ms = now_ms;
  } else if (f->leader_end_at_last_fetch.value() >= 0 && fetch_offset >= f->leader_end_at_last_fetch) {
    f->last_caught_up_ms = std::max(f->last_caught_up_ms, f->last_fetch_ms);
  }
  f->log_end = fetch_offset;
  f->last_fetch_ms = now_ms;
  f->leader_end_at_last_fetch = leader_end;
  return advance(leader_end);
}

bool replica_tracker::on_leader_end(offset leader_end) { return advance(leader_end); }

offset replica_tracker::low_watermark(offset leader_start) const {
  offset low = leader_start;
  for (const auto& f : followers_) {
    if (!contains(isr_, f.id)) continue;
    if (f.log_start.value() < 0) return offset(-1);
    low = std::min(low, f.log_start);
  }
  return low;
}

bool replica_tracker::counted(int32_t id) const { return contains(isr_, id) || contains(pending_, id); }

bool replica_tracker::advance(offset leader_end) {
  leader_end_ = leader_end;
  offset candidate = leader_end;
  for (const auto& f : followers_) {
    if (!counted(f.id)) continue;
    if (f.log_end.value() < 0) return false;  // not heard from since this leadership began
    candidate = std::min(candidate, f.log_end);
  }
  if (candidate <= hw_) return false;
  // The smallest log end over what is counted, the leader's own included.
  SLUICE_ASSERT(candidate <= leader_end_, "the high watermark passed the leader's log end");
  hw_ = candidate;
  return true;
}

bool replica_tracker::caught_up(const follower_progress& f) const {
  return f.log_end.value() >= 0 && f.log_end >= hw_ && f.log_end >= epoch_start_;
}

std::optional<std::vector<int32_t>> replica_tracker::propose_isr(int64_t now_ms, int64_t lag_max_ms) {
  std::vector<int32_t> next;
  for (int32_t id : isr_) {
    if (id == self_) {
      next.push_back(id);
      continue;
    }
    const follower_progress* f = find(id);
    if (!f) continue;  // no longer assigned
    if (now_ms - f->last_caught_up_ms > lag_max_ms) continue;
    next.push_back(id);
  }
  // A pending addition that lags again is not proposed again, but it stays
  // counted for the high watermark until the store moves on (set_isr): the
  // proposal that added it may still be written. Meanwhile the store's ISR
  // as it is is proposed, a withdrawal, so that the partition epoch moves
  // and the old proposal is refused if it has not been written yet.
  const bool withdraw = std::any_of(pending_.begin(), pending_.end(), [&](int32_t id) {
    const follower_progress* f = find(id);
    return !f || now_ms - f->last_caught_up_ms > lag_max_ms;
  });
  for (const auto& f : followers_) {
    if (contains(next, f.id) || contains(isr_, f.id)) continue;
    if (!caught_up(f) || now_ms - f.last_caught_up_ms > lag_max_ms) continue;
    next.push_back(f.id);
    if (!contains(pending_, f.id)) pending_.push_back(f.id);
  }
  if (!contains(next, self_)) next.insert(next.begin(), self_);
  // A leader never asks to leave its own ISR, so it never asks for an
  // empty one.
  SLUICE_ASSERT(!next.empty() && contains(next, self_), "an ISR proposal without its leader");
  // The store's order for members that stay, additions after them.
  std::vector<int32_t> a = next, b = isr_;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  if (a == b && !withdraw) return std::nullopt;
  return next;
}

bool replica_tracker::isr_following(int64_t now_ms, int64_t lag_max_ms) const {
  for (int32_t id : isr_) {
    if (id == self_) continue;
    const follower_progress* f = find(id);
    if (f && now_ms - f->last_caught_up_ms > lag_max_ms) return false;
  }
  return true;
}

follower_progress* replica_tracker::find(int32_t id) {
  for (auto& f : followers_)
    if (f.id == id) return &f;
  return nullptr;
}

const follower_progress* replica_tracker::find(int32_t id) const {
  for (const auto& f : followers_)
    if (f.id == id) return &f;
  return nullptr;
}

}  // namespace sluice::cluster
