#pragma once

// The cluster's metadata as it lives in etcd: the keys under the cluster's
// prefix and the text of their values. docs/metadata_format.md ("Cluster
// metadata in etcd") gives both as a grammar; this file is that grammar in
// code, and nothing else reads or writes the values.
//
// Every value starts with a header line naming its kind and format version
// ("sluice-topic v1"), then one "field value" line per fact, in a fixed
// order where the grammar says so. Text, so `etcdctl get --prefix /sluice/`
// shows an operator what the cluster holds. A value that does not parse is
// errc::corrupt_data with a message naming the line; readers never guess.
//
// Contract: pure functions; encode(decode(v)) == v for every value encode
// produced, and decode(encode(r)) == r for every record. Thread-safe.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/types.h"
#include "controller/types.h"

namespace sluice::controller {

// Topic-level or broker-level config overrides as text, by key (validated
// by the broker against its schema when it applies them).
using config_text = std::map<std::string, std::string>;

// A live broker, written by itself under its session lease.
struct broker_record {
  int32_t id = -1;
  std::string incarnation;  // new at every process start (32 hex digits)
  std::string host;         // advertised.listeners
  int32_t port = 0;
  std::optional<std::string> rack;  // broker.rack
  bool operator==(const broker_record&) const = default;
};

// The controller, written by the broker that won the election under its
// session lease. The controller epoch is the key's create revision.
struct controller_record {
  int32_t id = -1;
  std::string incarnation;
  bool operator==(const controller_record&) const = default;
};

// A topic: its id and, per partition, the replica assignment; its config
// overrides. Written by the controller.
struct topic_record {
  topic_id id{};
  std::vector<partition_assignment> assignment;  // one per partition
  config_text configs;
  bool operator==(const topic_record&) const = default;
};

// A partition's leadership, written by the controller. `topic` names the
// topic (by id) the partition belongs to, so a partition record left by a
// deleted topic is never taken for one of a topic created again under the
// same name.
struct partition_record {
  topic_id topic{};
  partition_state state;
  bool operator==(const partition_record&) const = default;
};

// The cluster-wide dynamic broker configs (Kafka's default-broker level).
struct broker_configs_record {
  config_text configs;
  bool operator==(const broker_configs_record&) const = default;
};

// One group's configs (a GROUP config resource, config/group_config.h),
// written by the controller; the group id is in the key. A group without
// configs has no record. At least one config.
struct group_configs_record {
  config_text configs;
  bool operator==(const group_configs_record&) const = default;
};

std::string encode(const broker_record& r);
std::string encode(const controller_record& r);
std::string encode(const topic_record& r);
std::string encode(const partition_record& r);
std::string encode(const broker_configs_record& r);
std::string encode(const group_configs_record& r);

result<broker_record> decode_broker(std::string_view value);
result<controller_record> decode_controller(std::string_view value);
result<topic_record> decode_topic(std::string_view value);
result<partition_record> decode_partition(std::string_view value);
result<broker_configs_record> decode_broker_configs(std::string_view value);
result<group_configs_record> decode_group_configs(std::string_view value);

// The keys under one cluster's prefix (sluice.etcd.prefix, "/sluice/" by
// default; it starts and ends with '/').
class key_layout {
 public:
  explicit key_layout(std::string prefix) : prefix_(std::move(prefix)) {}
  const std::string& prefix() const { return prefix_; }

  std::string cluster_id() const { return prefix_ + "cluster_id"; }
  std::string controller() const { return prefix_ + "controller"; }
  std::string broker_configs() const { return prefix_ + "configs/brokers"; }
  // Every group's configs: "<prefix>configs/groups/<group id, percent-encoded>"
  // (base/percent_encoding.h), since a group id may hold any byte.
  std::string group_configs() const { return prefix_ + "configs/groups/"; }
  std::string group_configs(std::string_view group) const;
  // The next producer id no broker has reserved (decimal text).
  std::string producer_ids() const { return prefix_ + "producer_ids"; }
  std::string brokers() const { return prefix_ + "brokers/"; }
  std::string broker(int32_t id) const { return brokers() + std::to_string(id); }
  std::string topics() const { return prefix_ + "topics/"; }
  std::string topic(std::string_view name) const { return topics() + std::string(name); }
  std::string partitions() const { return prefix_ + "partitions/"; }
  // Every partition record of one topic: "<prefix>partitions/<topic>/".
  std::string partitions_of(std::string_view topic) const {
    return partitions() + std::string(topic) + "/";
  }
  std::string partition(std::string_view topic, int32_t p) const {
    return partitions_of(topic) + std::to_string(p);
  }

  // What a key under the prefix is.
  struct parsed {
    enum class kind { cluster_id, controller, broker_configs, broker, topic, partition, group_configs, unknown };
    kind type = kind::unknown;
    int32_t id = -1;        // broker: its node id; partition: its index
    std::string topic;      // topic, partition
    std::string group;      // group_configs: the group id, decoded
  };
  // unknown for keys outside the prefix or of no kind above (a newer
  // version's keys: ignored, never an error).
  parsed parse(std::string_view key) const;

 private:
  std::string prefix_;
};

}  // namespace sluice::controller
