#pragma once

// Replica placement: which brokers host the replicas of new partitions, and
// whether an explicit (manual) assignment from CreateTopics or
// CreatePartitions is acceptable.
//
// Contract: pure functions of their arguments. No I/O, no clock, no
// randomness; the same arguments give the same answer on every broker and
// every run, so a new controller recomputes exactly what an old one would
// have. Safe to call from any thread. Inputs are never modified.

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "controller/types.h"

namespace sluice::controller {

// Places `count` new partitions of replication factor `replication_factor`
// on `live` brokers. Element i of the result is the assignment of partition
// first_partition + i: `replication_factor` distinct broker ids, the
// preferred leader first.
//
// Rules, in order of priority (docs/controller.md has the reasoning):
//  1. A partition's replicas sit on distinct racks as far as racks allow
//     (when there are at least as many racks as replicas, always; with
//     fewer, every rack holds one). A broker without broker.rack counts as
//     one more rack, shared by every broker without one; Kafka refuses to
//     mix the two, Sluice places anyway. With no rack configured anywhere,
//     all brokers share that one rack and rule 1 has no effect.
//  2. Preferred leaders spread evenly: first over the partitions of this
//     call (so one topic's leaders do not all land on a fresh, empty
//     broker), then over the cluster as `load` describes it.
//  3. Among brokers equal by rule 2, the leader is the one with the fewest
//     replicas (`load` plus this call), then the one whose rack has led the
//     fewest partitions of this call, so leaders alternate between racks.
//     Followers go to the brokers with the fewest replicas (`load` plus this
//     call).
//  4. Remaining ties: leaders go to the lowest broker id, followers to the
//     next brokers after the leader in broker id order (a ring, as Kafka's
//     fresh cluster looks).
// Measured bound (placement_test): placing topics one after another with
// their load added, brokers' preferred leader counts differ by at most 1
// and replica counts by at most 2, without racks or with racks of equal
// size. Uneven racks force uneven replica counts (rule 1 wins).
// `first_partition` only names the result; the placement does not depend
// on it.
//
// Errors: invalid_replication_factor when replication_factor < 1 or more
// than the live brokers (Kafka's message); invalid_partitions when
// count < 1; invalid_argument for a negative first_partition, a negative
// or repeated broker id. The caller bounds `count` (the result holds
// count * replication_factor ids).
result<std::vector<partition_assignment>> assign_replicas(const std::vector<broker_desc>& live,
                                                          int32_t first_partition, int32_t count,
                                                          int16_t replication_factor,
                                                          const cluster_load& load);

// Adds the replicas and preferred leaders of `assignments` to `load`, as
// placing a topic after another needs.
void add_load(cluster_load& load, const std::vector<partition_assignment>& assignments);

// One partition of an explicit assignment, as CreateTopics carries it.
struct manual_assignment {
  int32_t partition = 0;
  partition_assignment replicas;
};

// Checks an explicit assignment of new partitions, Kafka's
// INVALID_REPLICA_ASSIGNMENT cases: no partitions at all; a partition with
// an empty replica list; a broker twice in one partition; a broker id that
// is not `registered`; replica counts that differ between partitions (or,
// when `replication_factor` is given, as for CreatePartitions on an
// existing topic, from it); a partition index given twice; partition
// indexes that are not first_partition, first_partition + 1, ... in some
// order. The first problem found is returned as
// errc::invalid_replica_assignment with a message for the client.
status validate_assignment(const std::vector<manual_assignment>& manual, int32_t first_partition,
                           const broker_set& registered,
                           std::optional<int16_t> replication_factor = std::nullopt);

}  // namespace sluice::controller
