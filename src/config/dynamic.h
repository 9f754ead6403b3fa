#pragma once

// Topic configuration at runtime: effective values, CreateTopics /
// AlterConfigs / IncrementalAlterConfigs validation, and DescribeConfigs.
//
// A topic's overrides are a config_map keyed by topic key (`retention.ms`).
// Every function here is pure: it validates and returns a new value, and the
// caller persists it (overrides_file.h) and then publishes it. A failed call
// changes nothing. Errors are errc::invalid_config with a message naming the
// key, which the Kafka edge maps to INVALID_CONFIG; thread-safe.
//
// The broker runs these under cluster::partition_manager's change lock
// (alter_topic_overrides, alter_broker_config), which persists the result
// (overrides_file.h) and then applies it to the running partitions:
//
//   pm.alter_topic_overrides(T, [&](const broker_config& b, const config_map& cur) {
//     return config::alter_topic_overrides(b, cur, ops);  // validate; an error changes nothing
//   }, validate_only);

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "config/broker_config.h"
#include "config/schema.h"
#include "config/topic_config.h"

namespace sluice::config {

// The effective values of a topic: each override, else the broker's value
// for the synonym (dynamic broker, dynamic default, static, default).
// `overrides` must have come from this module (validated).
topic_config effective_topic_config(const broker_config& broker, const config_map& overrides);

// One key=value of CreateTopics' configs (a null value means "use the
// default" and is skipped, as Kafka does).
struct config_entry {
  std::string key;
  std::optional<std::string> value;
};

// Validates CreateTopics' configs and returns the topic's overrides.
// Also used for AlterConfigs (non-incremental), which replaces all of a
// topic's overrides with the given set. Duplicate keys are refused.
result<config_map> make_topic_overrides(const broker_config& broker,
                                        std::span<const config_entry> entries);

// IncrementalAlterConfigs operations, with Kafka's wire codes.
enum class alter_op : int8_t {
  set = 0,
  remove = 1,    // Kafka's DELETE: drop the override, fall back to the broker value
  append = 2,    // list settings only: add items not yet present
  subtract = 3,  // list settings only: remove items
};

struct alter_request {
  std::string key;
  alter_op op = alter_op::set;
  std::optional<std::string> value;  // required for set, append and subtract
};

// Applies the operations, in order, to a copy of `current` and validates the
// result. append and subtract start from the effective value (the override,
// else the broker's value). A key named twice is refused, as Kafka does.
result<config_map> alter_topic_overrides(const broker_config& broker, const config_map& current,
                                         std::span<const alter_request> ops);

// The same for the broker resource (IncrementalAlterConfigs). `cluster_default`
// true alters the cluster-wide default (resource name ""), false this node's
// dynamic values. append and subtract start from the value the resource
// has: this node's effective value, or for the cluster-wide default the
// value without the node's own level. The result is a new snapshot whose dynamic_*_values the
// caller persists (metadata/broker_configs.h) before publishing it.
//
// Errors, in Kafka's terms:
//  - errc::invalid_argument (INVALID_REQUEST) when a key names a setting
//    that is not dynamically updatable; the message is Kafka's "Cannot
//    update these configs dynamically: " followed by every such key.
//  - errc::invalid_config (INVALID_CONFIG) for an unknown key, a value
//    refused by the schema, or a combination refused by make_broker_config
//    (group.min.session.timeout.ms above the max), naming the key.
result<broker_config> alter_broker_config(const broker_config& broker, bool cluster_default,
                                          std::span<const alter_request> ops);

// AlterConfigs (non-incremental) on the broker resource: the level's whole
// set of dynamic values becomes `entries` (null values are skipped), as
// Kafka does. Same errors as alter_broker_config.
result<broker_config> replace_broker_config(const broker_config& broker, bool cluster_default,
                                            std::span<const config_entry> entries);

// Kafka's DescribeConfigs ConfigSource.
enum class config_source : int8_t {
  unknown = 0,
  dynamic_topic_config = 1,
  dynamic_broker_config = 2,
  dynamic_default_broker_config = 3,
  static_broker_config = 4,
  default_config = 5,
  dynamic_group_config = 8,  // a GROUP resource's own value (group_config.h)
};

std::string_view config_source_name(config_source s);  // "DYNAMIC_TOPIC_CONFIG", ...

struct config_synonym {
  std::string name;
  std::optional<std::string> value;  // null when sensitive
  config_source source = config_source::unknown;
};

struct described_config {
  std::string name;
  std::optional<std::string> value;  // null when sensitive
  config_source source = config_source::unknown;
  bool read_only = false;
  bool is_default = false;  // source is default_config (v0's is_default)
  bool sensitive = false;
  int8_t config_type = 0;  // kafka_config_type()
  std::string documentation;
  // Where the value comes from, highest priority first; the first entry is
  // the source of `value`. Always includes the DEFAULT_CONFIG entry.
  std::vector<config_synonym> synonyms;
};

// Every topic setting of a topic, or only `keys` when not empty (an unknown
// key is refused, naming it). Sorted by name.
result<std::vector<described_config>> describe_topic(const broker_config& broker,
                                                     const config_map& overrides,
                                                     std::span<const std::string> keys = {});

// Every broker setting, or only `keys`, as this node sees it (the broker
// resource named by its id). Settings not marked dynamic are read-only.
result<std::vector<described_config>> describe_broker(const broker_config& broker,
                                                      std::span<const std::string> keys = {});

// The cluster-wide default resource (broker resource name ""): only the
// settings given a dynamic default, each with source
// DYNAMIC_DEFAULT_BROKER_CONFIG and its lower levels as synonyms, as Kafka
// answers it. Empty when no default is set.
result<std::vector<described_config>> describe_broker_defaults(
    const broker_config& broker, std::span<const std::string> keys = {});

}  // namespace sluice::config
