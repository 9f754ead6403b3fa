#pragma once

// The cluster's metadata as one broker knows it: every record under the
// cluster's prefix in etcd (records.h), decoded, with the etcd revisions a
// writer compares before it writes. Built by load() from a read of the
// whole prefix, then kept current by apply() with each watch event, in
// revision order; so every broker that has applied the same revision holds
// the same image, and the controller decides over it.
//
// A value that does not decode is logged by the caller and left out of the
// image (apply returns the error; the record it replaced is dropped, never
// guessed at): a broker serves what it can read, and a controller does not
// decide over a record it cannot read.
//
// Thread safety: none; the owner serialises access (one thread applies the
// watch, readers take the owner's lock or a copy).

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "controller/records.h"
#include "etcd/client.h"

namespace sluice::controller {

struct broker_entry {
  broker_record record;
  int64_t lease = 0;
  int64_t mod_revision = 0;
};

struct controller_entry {
  controller_record record;
  int64_t epoch = 0;  // the key's create revision
  int64_t lease = 0;
};

struct topic_entry {
  topic_record record;
  int64_t mod_revision = 0;
};

struct partition_entry {
  partition_record record;
  int64_t mod_revision = 0;
};

struct group_configs_entry {
  group_configs_record record;
  int64_t mod_revision = 0;
};

// What one applied event changed, for whoever follows the image.
struct image_change {
  key_layout::parsed::kind kind = key_layout::parsed::kind::unknown;
  std::string topic;  // topic, partition
  int32_t id = -1;    // broker id, partition index
  bool deleted = false;
  // group_configs: the group whose record changed; empty after a reload
  // (every group's may have).
  std::string group;
};

class metadata_image {
 public:
  explicit metadata_image(key_layout keys) : keys_(std::move(keys)) {}

  const key_layout& keys() const { return keys_; }
  // The etcd revision the image reflects.
  int64_t revision() const { return revision_; }

  // Replaces the image with `kvs`, a read of the whole prefix at
  // `revision`. Records that do not decode are left out; their errors are
  // returned (the rest is loaded).
  std::vector<error> load(const std::vector<etcd::key_value>& kvs, int64_t revision);
  // Applies one watch event. Events at or below the revision load() read,
  // or older than the last applied (a watch replaying what the image has),
  // change nothing and return nullopt, as do keys of no known kind.
  result<std::optional<image_change>> apply(const etcd::watch_event& ev);

  const std::optional<std::string>& cluster_id() const { return cluster_id_; }
  const std::optional<controller_entry>& controller() const { return controller_; }
  const std::map<int32_t, broker_entry>& brokers() const { return brokers_; }
  const std::map<std::string, topic_entry>& topics() const { return topics_; }
  const std::optional<broker_configs_record>& broker_configs() const { return broker_configs_; }
  int64_t broker_configs_revision() const { return broker_configs_revision_; }
  // Every group's configs record, by group id (decoded).
  const std::map<std::string, group_configs_entry, std::less<>>& group_configs() const { return group_configs_; }
  const group_configs_entry* group_configs(std::string_view group) const;
  const topic_entry* topic(const std::string& name) const;
  const partition_entry* partition(const std::string& topic, int32_t p) const;
  // The partitions of `topic` that have a record, by index.
  std::vector<std::pair<int32_t, const partition_entry*>> partitions_of(const std::string& topic) const;
  // Every partition record, by (topic, index).
  const std::map<std::pair<std::string, int32_t>, partition_entry>& partitions() const { return partitions_; }
  // Ids of the registered (live) brokers.
  broker_set live_brokers() const;

 private:
  // Puts or removes one key's record; the caller has checked the revision.
  result<std::optional<image_change>> set(const etcd::key_value& kv, bool deleted);

  key_layout keys_;
  int64_t revision_ = 0;
  int64_t loaded_revision_ = 0;  // of the last load()
  std::optional<std::string> cluster_id_;
  std::optional<controller_entry> controller_;
  std::map<int32_t, broker_entry> brokers_;
  std::map<std::string, topic_entry> topics_;
  std::map<std::pair<std::string, int32_t>, partition_entry> partitions_;
  std::optional<broker_configs_record> broker_configs_;
  int64_t broker_configs_revision_ = 0;
  std::map<std::string, group_configs_entry, std::less<>> group_configs_;
};

}  // namespace sluice::controller
