#pragma once

// The partitions this broker hosts: one replica each, leader or follower as
// the metadata store's state says. The partition manager decides which
// partitions exist (topic lifecycle) and hands their opened logs here; the
// handlers, the group coordinator and log maintenance find a hosted
// partition through get(). With replication (issue 20) this class also
// owns the follower fetchers, one per source broker.
//
// A partition has a slot from the moment its topic records it until the
// topic is deleted; the slot is empty while the partition's log is being
// created (partition_manager's create_mode::background).
//
// Thread safety: every method is thread-safe. One shared mutex guards the
// slots; it is never held across file I/O or while calling into a
// partition other than apply_state (which takes only the partition's own
// locks). Lock order: the partition manager's change_mu_ and create_mu_,
// then this class's mutex.

#include <cstdint>
#include <map>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "cluster/metadata_store.h"
#include "cluster/partition.h"

namespace sluice::cluster {

class replica_manager {
 public:
  explicit replica_manager(int32_t node_id) : node_id_(node_id) {}

  int32_t node_id() const { return node_id_; }
  // Whether this broker holds one of `replicas`.
  bool hosts(const replica_list& replicas) const;

  // The topic's slot count (0: none).
  int32_t slot_count(const std::string& topic) const;
  // Gives `topic` `count` slots (never fewer than it has); new ones empty.
  void add_slots(const std::string& topic, int32_t count);
  // Publishes a partition whose log now exists, first applying the store's
  // assignment and state to it. `p` must be below the topic's slot count.
  void install(const std::string& topic, int32_t p, std::shared_ptr<partition> part,
               const replica_list& replicas, const partition_state& st);
  // Removes the topic's slots and returns the partitions that were in them
  // (the caller closes them and deletes their logs).
  std::vector<std::shared_ptr<partition>> remove_topic(const std::string& topic);
  // Applies a new state from the store to a hosted partition; false when
  // the partition is not hosted (yet) or the state is older than its own.
  bool apply(const std::string& topic, int32_t p, const replica_list& replicas, const partition_state& st);

  // The hosted partition, or nullptr when it is not hosted here or its log
  // is still being created.
  std::shared_ptr<partition> get(const std::string& topic, int32_t p) const;
  // Whether the partition has a slot whose log is still being created.
  bool being_created(const std::string& topic, int32_t p) const;
  // What a request for a partition get() did not return answers:
  // errc::not_leader while its log is being created (retriable), else
  // errc::not_found (and errc::invalid_topic for a name Kafka forbids).
  errc missing_partition_error(const std::string& topic, int32_t p) const;
  // Every hosted partition whose log exists; of one topic.
  std::vector<std::shared_ptr<partition>> all() const;
  std::vector<std::shared_ptr<partition>> of_topic(const std::string& topic) const;

 private:
  const int32_t node_id_;
  mutable std::shared_mutex mu_;
  std::map<std::string, std::vector<std::shared_ptr<partition>>, std::less<>> slots_;  // mu_
};

}  // namespace sluice::cluster
