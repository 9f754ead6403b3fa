#pragma once

// Plain data the controller decides over. Nothing here touches etcd, the
// network or a clock: the controller's decisions (placement.h, election.h)
// are pure functions of these values, so tests can drive them exhaustively.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace sluice::controller {

// A registered broker as placement sees it.
struct broker_desc {
  int32_t id = -1;
  std::optional<std::string> rack;  // broker.rack; absent when not configured
};

// The replicas of one partition, preferred leader first. Order matters: the
// first replica is the preferred leader, and elections walk this order.
using partition_assignment = std::vector<int32_t>;

// Broker ids, for example the live (registered and not fenced) brokers.
using broker_set = std::set<int32_t>;

// The leader and ISR of one partition, as the controller records them.
//
// Kafka's words: the leader epoch grows by one on every change of leader
// (including to no leader and back); the partition epoch grows by one on
// every change of leader or ISR, and fences stale AlterPartition requests.
struct partition_state {
  static constexpr int32_t no_leader = -1;

  int32_t leader = no_leader;  // -1: offline, no replica may serve
  int32_t leader_epoch = 0;
  std::vector<int32_t> isr;  // never empty once the partition exists
  int32_t partition_epoch = 0;

  bool operator==(const partition_state&) const = default;
};

// What is already placed on one broker, cluster-wide.
struct broker_load {
  int32_t replicas = 0;  // replicas of any partition hosted on the broker
  int32_t leaders = 0;   // partitions whose preferred leader is the broker
};

// Load per broker id; a broker absent from the map has no load.
using cluster_load = std::map<int32_t, broker_load>;

}  // namespace sluice::controller
