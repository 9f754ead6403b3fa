#pragma once

// Leader election and ISR changes: the controller's decisions about one
// partition's leader and ISR, Kafka's rules (KRaft's ReplicationControl).
//
// Contract: pure functions of their arguments. No I/O, no clock, no
// randomness; inputs are never modified. Each decision returns the
// partition's next state, or std::nullopt when nothing changes (so the
// caller writes nothing). Safe to call from any thread.
//
// Invariants every next state keeps, given a state that keeps them:
//  - the ISR is never empty and is a subset of the assignment;
//  - the leader is -1 or a member of the ISR and of the assignment;
//  - leader_epoch grows by one exactly when the leader changes (including
//    to -1 and back), partition_epoch by one on any change of leader or ISR;
//    neither ever decreases;
//  - a clean election only picks an ISR member; only an unclean one
//    (unclean.leader.election.enable) picks a replica outside it, and then
//    the ISR becomes that replica alone.

#include <cstdint>
#include <optional>
#include <vector>

#include "base/result.h"
#include "controller/types.h"

namespace sluice::controller {

// What happened to the leadership in a change.
enum class leader_change : uint8_t {
  none,     // same leader; only the ISR changed
  clean,    // a new leader from the ISR
  unclean,  // a new leader from outside the ISR; records may be lost
  offline,  // the partition lost its leader and has none (-1)
};

struct partition_change {
  partition_state next;
  leader_change leadership = leader_change::none;
};

// Brokers died or came back (`live` is the set now). Dead brokers leave the
// ISR, except that the ISR never empties: when no member is live, it stays
// as it was, so any of them can come back and lead cleanly. When the
// leader is dead (or -1), the first replica in assignment order that is
// live and in the ISR leads; with none, and `unclean_allowed`, the first
// live replica in assignment order leads with the ISR set to itself alone;
// otherwise the partition is offline (-1).
std::optional<partition_change> on_brokers_changed(const partition_state& state,
                                                   const partition_assignment& assignment,
                                                   const broker_set& live, bool unclean_allowed);

// Broker `leaving` asked to shut down (controlled shutdown). If it leads,
// leadership moves to the first replica in assignment order that is live,
// in the ISR and not `leaving`; with none, the partition goes offline (-1)
// rather than stay on a broker about to stop. `leaving` leaves the ISR
// unless it is the last member. Leadership is never given to `leaving`.
std::optional<partition_change> controlled_shutdown(const partition_state& state,
                                                    const partition_assignment& assignment,
                                                    const broker_set& live, int32_t leaving);

// Preferred leader election: the first replica of the assignment leads if
// it is live, in the ISR and not already the leader.
std::optional<partition_change> elect_preferred(const partition_state& state,
                                                const partition_assignment& assignment,
                                                const broker_set& live);

// Elections an operator asks for (ElectLeaders), one partition each. They
// differ from the ones above in saying why nothing changes:
//  - preferred (ElectLeaders type 0): elect_preferred's change, or
//    election_not_needed when the preferred replica already leads, or
//    preferred_leader_not_available when it is not live or not in the ISR.
//  - unclean (type 1): election_not_needed while the leader is live and in
//    the ISR. Otherwise the first live ISR member in assignment order leads
//    (a clean change); with none, the first live replica, with the ISR
//    set to itself alone (unclean), whatever the topic's
//    unclean.leader.election.enable says: the operator asked for it. With
//    no live replica, eligible_leaders_not_available. Dead brokers leave the
//    ISR as on_brokers_changed has them leave it.
enum class requested_election : uint8_t { preferred, unclean };
result<partition_change> elect_on_request(requested_election kind, const partition_state& state,
                                          const partition_assignment& assignment, const broker_set& live);

// One partition as the rebalance check sees it.
struct partition_view {
  partition_assignment assignment;
  partition_state state;
};

// Kafka's default leader.imbalance.per.broker.percentage.
inline constexpr int32_t default_leader_imbalance_percentage = 10;

// auto.leader.rebalance.enable: for each broker, its imbalance ratio is the
// number of partitions it is preferred leader of but does not lead, over
// the number it is preferred leader of. For every broker whose ratio is
// above `imbalance_percentage` percent, the partitions it should lead and
// could (elect_preferred would move them) are returned, as indexes into
// `partitions` in increasing order.
std::vector<size_t> should_rebalance(
    const std::vector<partition_view>& partitions, const broker_set& live,
    int32_t imbalance_percentage = default_leader_imbalance_percentage);

// An AlterPartition request from broker `requester`, which believes it
// leads at `requester_leader_epoch` and read the ISR at `partition_epoch`,
// asking for `new_isr`. `eligible` are the brokers that may join an ISR
// (live, not shutting down). Checks, in Kafka's order:
//  - not_controller: the request's leader or partition epoch is newer than
//    `state` (this controller's view is stale);
//  - fenced_leader_epoch: the request's leader epoch is older, or
//    `requester` does not lead (Kafka answers the latter INVALID_REQUEST;
//    a deposed leader is fenced here, which tells it to refresh metadata);
//  - invalid_update_version: the request's partition epoch is older;
//  - invalid_argument (INVALID_REQUEST): `new_isr` repeats a broker, names
//    one outside the assignment, or lacks the leader;
//  - ineligible_replica: `new_isr` names a broker that is not `eligible`
//    (KIP-841: a fenced or shutting-down broker may not be in the ISR).
status validate_isr_change(const partition_state& state, int32_t requester,
                           int32_t requester_leader_epoch, int32_t partition_epoch,
                           const std::vector<int32_t>& new_isr,
                           const partition_assignment& assignment, const broker_set& eligible);

// The state after an accepted AlterPartition: the new ISR, the partition
// epoch one higher, leader and leader epoch unchanged.
partition_state apply_isr_change(const partition_state& state, const std::vector<int32_t>& new_isr);

}  // namespace sluice::controller
