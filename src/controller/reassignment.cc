#include "controller/reassignment.h"

#include <algorithm>
#include <set>

#include "base/assert.h"

namespace sluice::controller {

namespace {

bool contains(const std::vector<int32_t>& v, int32_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// `from` less the members of `drop`, in `from`'s order.
std::vector<int32_t> without(const std::vector<int32_t>& from, const std::vector<int32_t>& drop) {
  std::vector<int32_t> out;
  for (int32_t b : from)
    if (!contains(drop, b)) out.push_back(b);
  return out;
}

// The partition moving from replicas `before` to `replicas`, with `leader`
// leading and `isr` in sync: the leader epoch one up when the leader
// changes, the partition epoch one up when the leader, the ISR or the
// replicas (or the reassignment's adding and removing) change (as Kafka bumps it for every change of the partition, so
// a leader's AlterPartition over the old replicas is stale).
reassignment_step step(const replica_set& before, replica_set replicas, const partition_state& state,
                       int32_t leader, std::vector<int32_t> isr) {
  reassignment_step s;
  s.replicas = std::move(replicas);
  s.state = state;
  if (leader != state.leader) {
    s.state.leader = leader;
    ++s.state.leader_epoch;
    s.leadership = leader_change::clean;
  }
  if (leader != state.leader || isr != state.isr || !(s.replicas == before)) ++s.state.partition_epoch;
  s.state.isr = std::move(isr);
  SLUICE_ASSERT(!s.state.isr.empty(), "the ISR is never empty");
  SLUICE_ASSERT(s.state.leader == partition_state::no_leader || contains(s.state.isr, s.state.leader),
                "the leader is in the ISR");
  for (int32_t b : s.state.isr) SLUICE_ASSERT(contains(s.replicas.replicas, b), "the ISR is within the replicas");
  return s;
}

}  // namespace

partition_assignment replica_set::original() const { return without(replicas, adding); }

partition_assignment replica_set::target() const { return without(replicas, removing); }

result<reassignment_step> start_reassignment(const replica_set& now, const partition_state& state,
                                             const partition_assignment& target, const broker_set& registered,
                                             const broker_set& live) {
  if (target.empty()) return error{errc::invalid_replica_assignment, "a reassignment names at least one replica"};
  std::set<int32_t> seen;
  for (int32_t b : target) {
    if (!seen.insert(b).second)
      return error{errc::invalid_replica_assignment, "broker " + std::to_string(b) + " is named twice"};
    if (!registered.count(b))
      return error{errc::invalid_replica_assignment, "broker " + std::to_string(b) + " is not registered"};
  }
  const partition_assignment original = now.original();
  replica_set next;
  next.adding = without(target, original);
  next.removing = without(original, target);
  next.replicas = target;
  next.replicas.insert(next.replicas.end(), next.removing.begin(), next.removing.end());
  // Replicas an earlier target was adding and this one drops leave the ISR.
  std::vector<int32_t> isr;
  for (int32_t b : state.isr)
    if (contains(next.replicas, b)) isr.push_back(b);
  if (isr.empty()) return error{errc::invalid_replica_assignment, "the reassignment would leave no replica in sync"};
  int32_t leader = state.leader;
  if (leader != partition_state::no_leader && !contains(next.replicas, leader)) {
    leader = partition_state::no_leader;
    for (int32_t b : next.replicas) {
      if (live.count(b) && contains(isr, b)) {
        leader = b;
        break;
      }
    }
    if (leader == partition_state::no_leader)
      return error{errc::invalid_replica_assignment, "the reassignment would leave no replica able to lead"};
  }
  return step(now, std::move(next), state, leader, std::move(isr));
}

std::optional<reassignment_step> complete_reassignment(const replica_set& now, const partition_state& state,
                                                       const broker_set& live) {
  if (!now.reassigning()) return std::nullopt;
  const partition_assignment target = now.target();
  for (int32_t b : target)
    if (!contains(state.isr, b)) return std::nullopt;  // still catching up
  int32_t leader = state.leader;
  if (leader == partition_state::no_leader || !contains(target, leader)) {
    leader = partition_state::no_leader;
    for (int32_t b : target) {
      if (live.count(b) && contains(state.isr, b)) {
        leader = b;
        break;
      }
    }
    if (leader == partition_state::no_leader) return std::nullopt;  // no one of the target can lead yet
  }
  replica_set done;
  done.replicas = target;
  return step(now, std::move(done), state, leader, without(state.isr, now.removing));
}

std::optional<reassignment_step> cancel_reassignment(const replica_set& now, const partition_state& state,
                                                     const broker_set& live) {
  SLUICE_ASSERT(now.reassigning(), "cancelling a reassignment that is in progress");
  const partition_assignment original = now.original();
  std::vector<int32_t> isr = without(state.isr, now.adding);
  if (isr.empty()) return std::nullopt;  // only added replicas are in sync: wait for an original one
  int32_t leader = state.leader;
  if (leader == partition_state::no_leader || !contains(original, leader)) {
    leader = partition_state::no_leader;
    for (int32_t b : original) {
      if (live.count(b) && contains(isr, b)) {
        leader = b;
        break;
      }
    }
    if (leader == partition_state::no_leader) return std::nullopt;
  }
  replica_set back;
  back.replicas = original;
  return step(now, std::move(back), state, leader, std::move(isr));
}

}  // namespace sluice::controller
