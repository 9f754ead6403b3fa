#pragma once

// Where a broker's topic metadata lives: each topic's name, id (KIP-516),
// partition count, config overrides and replica assignment, and each
// partition's state (leader, leader epoch, in-sync replicas). The partition
// manager reads and changes topics, and the metadata cache and replica
// manager read partition states, only through this interface, so the store
// behind it can change without the rest of the broker noticing:
//
//   - a single broker: topic_table, files under <data_dir>/meta/;
//   - a cluster: the controller's records in etcd (etcd_store), where a write
//     is a transaction the controller makes and a broker follows its watch;
//   - tests: any implementation, such as an in-memory one, driven
//     deterministically.
//
// Contract for every implementation:
//   - A mutation returns only once it is durable (written and synced, or
//     committed by the quorum); on an error nothing changed.
//   - Errors are errc values: already_exists (create of a present name),
//     not_found (a name that is not there), invalid_argument (a name or
//     count Kafka does not allow, a count that would shrink),
//     invalid_replication_factor (an assignment the store cannot hold: a
//     single broker's store holds only itself), and the store's own I/O
//     errors.
//   - Partition states are written by whoever elects leaders (the
//     controller), never through this interface; a store without
//     a controller has fixed states (see topic_table).
//   - A topic's id is new each time a topic is created, so a topic deleted
//     and created again under its name is told apart by its id; never all
//     zero.
//   - Readers see a mutation once it has returned.
// Thread safety: every method may be called from any thread.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/types.h"
#include "config/group_config.h"
#include "config/schema.h"
#include "controller/types.h"
#include "partition/state.h"
#include "partition/topic_names.h"

namespace sluice::cluster {

using sluice::topic_id;

// New partitions a creation or growth asks for: `count` partitions of
// `replication_factor` replicas each, placed by the store (the controller,
// in a cluster) unless `assignment` names the replicas of each (one entry
// per new partition, as CreateTopics' explicit assignments do).
struct partition_request {
  int32_t count = 0;
  int16_t replication_factor = 1;
  std::vector<replica_list> assignment;
};

struct topic_info {
  std::string name;
  topic_id id{};
  int32_t partitions = 0;
  config::config_map overrides;  // topic keys -> values, validated
  std::vector<replica_list> assignment;  // one per partition: size() == partitions
};

class metadata_store {
 public:
  virtual ~metadata_store() = default;

  virtual std::optional<topic_info> get(const std::string& name) const = 0;
  // The topic with this id, or nullopt: an id of a deleted topic finds
  // nothing, even when a topic of the same name exists again.
  virtual std::optional<topic_info> get_by_id(const topic_id& id) const = 0;
  virtual std::vector<topic_info> list() const = 0;
  virtual size_t size() const = 0;

  // Whether create() or add_partitions() could place `req` now (the
  // replication factor against the brokers there are, an explicit
  // assignment's brokers): errc::invalid_replication_factor with Kafka's
  // message, or ok. For validate_only requests; create() checks it again.
  virtual status check_request(const partition_request& req) const = 0;
  // Adds a topic with a new id and `req.count` partitions
  // (1..limits::max_partitions_per_topic).
  virtual result<topic_info> create(const std::string& name, const partition_request& req,
                                    const config::config_map& overrides) = 0;
  virtual status remove(const std::string& name) = 0;
  // Adds `req.count` partitions after the last (the count never shrinks).
  virtual status add_partitions(const std::string& name, const partition_request& req) = 0;
  // Replaces the topic's overrides.
  virtual status set_overrides(const std::string& name, const config::config_map& overrides) = 0;

  // The partition's state, or nullopt when its topic or the partition does
  // not exist.
  virtual std::optional<partition_state> state(const std::string& topic, int32_t partition) const = 0;
  // A partition's replicas and state, or nullopt as state() answers: one
  // partition's worth, where get() copies the whole topic's assignment.
  // Applying a change of each of a topic's N partitions through get() cost
  // N squared; stores that can, answer it directly.
  struct placed_partition {
    replica_list replicas;
    partition_state state;
  };
  virtual std::optional<placed_partition> placed(const std::string& topic, int32_t partition) const {
    auto t = get(topic);
    auto st = state(topic, partition);
    if (!t || !st || partition < 0 || partition >= t->partitions) return std::nullopt;
    return placed_partition{t->assignment[static_cast<size_t>(partition)], *st};
  }

  // True when a controller makes the store's changes and they reach this
  // broker through the store (a cluster): the partition manager then
  // creates and deletes logs when the store tells it
  // (partition_manager::on_store_change), not when it asks for a change.
  virtual bool follows_controller() const { return false; }

  // The cluster-wide dynamic broker defaults (AlterConfigs on the broker
  // resource named ""), when the store keeps them: a cluster keeps them in
  // etcd (configs/brokers), so every broker applies the same. nullopt when
  // the store does not: a single broker keeps them in a local file
  // (metadata/broker_configs.h). Keys the schema does not know, or no longer
  // lets change at runtime, are left out (logged).
  virtual std::optional<config::config_map> broker_defaults() const { return std::nullopt; }
  // Replaces them; only for a store whose broker_defaults() is not nullopt.
  virtual status set_broker_defaults(const config::config_map& /*defaults*/) {
    return status(errc::invalid_argument, "this store does not keep broker defaults");
  }

  // Per-group configs (GROUP config resources, config/group_config.h),
  // when the store keeps them: a cluster keeps them in etcd
  // (configs/groups/<id>), so every broker serves the same. False: a single
  // broker keeps them in a local file (metadata/group_configs.h).
  virtual bool keeps_group_configs() const { return false; }
  // Every group's configs (empty when the store does not keep them). Keys
  // the schema does not know, or values it refuses, are left out (logged).
  virtual config::group_config_table group_configs() const { return {}; }
  // Replaces one group's configs (validated by the caller); empty removes
  // them. Only for a store that keeps_group_configs(); errc::invalid_config
  // for a group beyond limits::max_groups_with_configs.
  virtual status set_group_configs(const std::string& /*group*/, const config::config_map& /*configs*/) {
    return status(errc::invalid_argument, "this store does not keep group configs");
  }
};

}  // namespace sluice::cluster
