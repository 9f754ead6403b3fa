#pragma once

// Partition reassignment (Kafka's KIP-455, AlterPartitionReassignments): the
// controller's decisions about moving a partition's replicas to a target
// set, as pure functions in the style of election.h.
//
// A reassignment in progress is recorded with the partition: its replicas
// are the target's, in the target's order, followed by those leaving (so
// every broker that holds or will hold the partition is a replica, and
// fetches or serves while the move runs); `adding` are the target's
// replicas that were not replicas before it began, `removing` the former
// replicas the target drops. The original replicas are therefore
// `replicas` less `adding`, in the order of that merged list (as in Kafka,
// a cancelled move may leave another replica first, the preferred leader).
//
// The steps:
//  1. start_reassignment: the replicas grow to target + removing; nothing
//     else changes (leader, ISR, epochs), so no one stops serving.
//  2. The new replicas fetch from the leader and join the ISR the usual
//     way (the leader's AlterPartition).
//  3. complete_reassignment, once every target replica is in the ISR: the
//     replicas become the target; the ISR keeps only target members; a
//     leader the target drops hands over to the first target replica in
//     the target's order that is live and in the ISR. The ISR never shrinks
//     below the target (all of it is in the ISR then), so a move never
//     takes a partition under min.insync.replicas that it was not already
//     under.
//  4. The removed brokers stop being replicas and delete their logs.
// cancel_reassignment goes back to the original replicas from any point
// before step 3.
//
// Contract: no I/O, no clock; inputs never modified; every next state keeps
// election.h's invariants (the ISR never empty and within the replicas, the
// leader in the ISR or -1, epochs that only grow, leader_epoch by one when
// the leader changes, partition_epoch by one on any change of leader or
// ISR), and the partition epoch also goes up by one when the replicas (or
// the adding and removing sets) change. Safe from any thread.

#include <cstdint>
#include <optional>
#include <vector>

#include "base/result.h"
#include "controller/election.h"
#include "controller/types.h"

namespace sluice::controller {

// A partition's replicas with the reassignment they are part of (none:
// `adding` and `removing` empty).
struct replica_set {
  partition_assignment replicas;
  std::vector<int32_t> adding;
  std::vector<int32_t> removing;

  bool reassigning() const { return !adding.empty() || !removing.empty(); }
  // The replicas before the reassignment began: `replicas` less `adding`.
  partition_assignment original() const;
  // The replicas once it is done: `replicas` less `removing`.
  partition_assignment target() const;
  bool operator==(const replica_set&) const = default;
};

struct reassignment_step {
  replica_set replicas;
  partition_state state;
  leader_change leadership = leader_change::none;
};

// AlterPartitionReassignments of one partition in `state` to `target`,
// from `now` (which may already be reassigning: the new target replaces the
// old one, measured from the original replicas, as Kafka does).
// `registered` are the brokers that exist, `live` those that may lead.
// Usually only the replicas change; when a new target drops replicas an
// earlier one was adding, they leave the ISR too, and one that led hands
// over to the first remaining replica in order that is live and in sync.
// A target equal to the original replicas ends any reassignment (nothing
// to add or remove). Errors (invalid_replica_assignment): an empty target,
// a broker named twice, a broker that is not registered, or a change that
// would leave no replica in sync or none able to lead.
result<reassignment_step> start_reassignment(const replica_set& now, const partition_state& state,
                                             const partition_assignment& target, const broker_set& registered,
                                             const broker_set& live);

// Step 3: when every target replica is in the ISR, the finished partition
// (replicas = the target, no adding or removing), its ISR less the removed
// replicas, and a new leader when the target drops the current one: the
// first target replica, in the target's order, that is live and in the
// ISR. nullopt while a target replica is not yet in the ISR, when there is
// no reassignment, or when the leader must move and no target replica can
// take it (it waits for one to be live).
std::optional<reassignment_step> complete_reassignment(const replica_set& now, const partition_state& state,
                                                       const broker_set& live);

// Cancelling (AlterPartitionReassignments with null replicas): back to the
// original replicas, the added ones leaving the ISR (unless that would
// empty it: then the ISR is kept until an original replica catches up, and
// the cancellation waits: nullopt), and a leader among the added ones
// handing over to the first original replica in the ISR and live (none:
// nullopt, the cancellation waits). Requires now.reassigning(): the caller
// answers NO_REASSIGNMENT_IN_PROGRESS for a partition that is not.
std::optional<reassignment_step> cancel_reassignment(const replica_set& now, const partition_state& state,
                                                     const broker_set& live);

}  // namespace sluice::controller
