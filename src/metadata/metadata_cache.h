#pragma once

// The read side of the metadata, as the broker answers clients: the live
// brokers and their endpoints, the controller, the cluster id, the topics
// and, per partition, its leader, leader epoch, replicas and in-sync
// replicas. The handlers that describe the cluster (Metadata,
// DescribeCluster, DescribeTopicPartitions, FindCoordinator) ask it rather
// than assemble these facts themselves.
//
// Topics, assignments and partition states come from the metadata store
// directly, and which partitions this broker hosts from the replica
// manager (no arrow up to the partition manager); the live brokers and the
// controller are set by the broker: a single broker sets itself once its
// listener's port is known, and in a cluster the registrations it follows
// in etcd set them on each change. The handlers stay as they are either
// way.
//
// A partition's description: replicas from the assignment; leader, leader
// epoch and ISR from the store's state; offline replicas are those not
// among the live brokers (once any are known). No leader is shown while the
// leader is not live, or is this broker and the partition's log is still
// being created.
//
// Thread safety: every method is thread-safe and returns copies.

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "metadata/metadata_store.h"
#include "replication/leadership_gate.h"

namespace sluice::cluster {

class replica_manager;

struct broker_endpoint {
  int32_t node_id = -1;
  std::string host;
  int32_t port = 0;
  std::optional<std::string> rack;
  // The broker epoch of this registration (KIP-903): the etcd mod revision
  // of its brokers/<id> record, new at every registration. -1: unknown
  // (a single node).
  int64_t epoch = -1;
  bool operator==(const broker_endpoint&) const = default;
};

// Who leads a partition, as Metadata describes it.
struct partition_leadership {
  bool has_leader = false;  // false while no replica leads (its log is still being created)
  int32_t leader_id = -1;
  int32_t leader_epoch = -1;
  std::vector<int32_t> replicas;
  std::vector<int32_t> isr;
  std::vector<int32_t> offline_replicas;
};

class metadata_cache {
 public:
  // `store` (the topics and partition states) and `replicas` (which
  // partitions this broker hosts, and their logs) must outlive the cache.
  // `node_id` is this broker's.
  metadata_cache(const metadata_store& store, const replica_manager& replicas, int32_t node_id,
                 std::string cluster_id);

  // Replaces the live brokers and the controller's id (-1: none known).
  void set_brokers(std::vector<broker_endpoint> brokers, int32_t controller_id);
  // In a cluster: asked at every answer (leadership_gate.h). While this
  // broker's session is lost the cluster counts it dead and elects other
  // leaders and maybe another controller, which this broker cannot see:
  // meanwhile the cache shows no controller (-1); and a partition this
  // broker leads whose leadership the gate refuses (session lost, or in
  // doubt with followers that stopped fetching) shows no leader, as one
  // still being elected, so no client is sent back to it at a stale leader
  // epoch. Set once, before the broker serves; `gate` must outlive the
  // cache.
  void set_leadership_gate(const leadership_gate* gate) { gate_ = gate; }

  std::vector<broker_endpoint> brokers() const;
  // The live broker with this id, or nullopt.
  std::optional<broker_endpoint> broker(int32_t node_id) const;
  // The broker epoch of the live broker with this id, or nullopt: what
  // every replica fetch checks, without copying the endpoint.
  std::optional<int64_t> broker_epoch(int32_t node_id) const;
  int32_t controller_id() const;
  int32_t node_id() const { return node_id_; }
  const std::string& cluster_id() const { return cluster_id_; }

  std::optional<topic_info> topic(const std::string& name) const;
  std::optional<topic_info> topic_by_id(const topic_id& id) const;
  std::vector<topic_info> topics() const;
  // Partition `partition` of `t`, which the caller found in topic() or
  // topics(): its replicas come from `t` (no second lookup of the topic per
  // partition); a partition the store no longer has: no leader, no replicas.
  partition_leadership leadership(const topic_info& t, int32_t partition) const;
  // The same by name (looks the topic up first).
  partition_leadership leadership(const std::string& topic, int32_t partition) const;

 private:
  const metadata_store& store_;
  const replica_manager& replicas_;
  const int32_t node_id_;
  const std::string cluster_id_;
  mutable std::mutex mu_;
  std::vector<broker_endpoint> brokers_;  // guarded by mu_
  int32_t controller_id_ = -1;            // guarded by mu_
  const leadership_gate* gate_ = nullptr;  // set before serving; then read-only
};

}  // namespace sluice::cluster
