#pragma once

// Per-group configuration: Kafka's GROUP config resources (ConfigResource
// type 32, KIP-848 for consumer groups, KIP-932 for share groups), set with
// IncrementalAlterConfigs and read with DescribeConfigs under the group id,
// as `kafka-configs --entity-type groups` does. A group's configs are a
// config_map keyed by group key (`share.record.lock.duration.ms`) holding
// only the keys set for it; a key not set takes the value the group
// inherits from the broker.
//
// The keys, Kafka's names, types and defaults (group_config.cc has the
// table; docs/configuration.md, "Group configs", lists it):
//   share.auto.offset.reset        latest | earliest | by_duration:<ISO-8601>
//   share.record.lock.duration.ms  int, bounded by the broker (15000..60000)
//   share.delivery.count.limit     int, bounded by the broker (2..10), KIP-1240
//   share.isolation.level          read_uncommitted | read_committed
//   share.session.timeout.ms       int, bounded by the broker (45000..60000)
//   share.heartbeat.interval.ms    int, bounded by the broker (5000..15000)
//   errors.deadletterqueue.topic.name         a topic name; "" = none (KIP-1191)
//   errors.deadletterqueue.copy.record.enable bool (KIP-1191)
//   consumer.session.timeout.ms    int, bounded by the broker (45000..60000)
//   consumer.heartbeat.interval.ms int, bounded by the broker (5000..15000)
//
// Where Kafka bounds a group value by broker settings
// (group.share.min.record.lock.duration.ms and its max, ...) and gives a
// group without the key the broker's value (group.share.record.lock.
// duration.ms), each row names those broker settings. While Sluice's schema
// (schema.cc) has no setting of that name, the row's own default and
// Kafka's default bounds (limits.h, *_share_* and *_consumer_*) stand in,
// so the values behave as on a Kafka broker with default settings; a
// setting added to the schema later is picked up here without a change.
//
// Validation happens here and only here, as in dynamic.h: every function is
// pure (it returns a new value; the caller persists it,
// metadata/group_configs.h), thread-safe, and a refusal is an error value:
// errc::invalid_config (INVALID_CONFIG on the wire) with a message naming
// the key. Values are checked as Kafka's GroupConfig.validate checks them:
// type and Kafka's fixed lower bounds, the broker's bounds, and each session
// timeout above its heartbeat interval (with the inherited value for the
// key not set).

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "config/broker_config.h"
#include "config/dynamic.h"
#include "config/schema.h"

namespace sluice::config {

// Every group's configs, by group id (only groups with at least one key set).
using group_config_table = std::map<std::string, config_map, std::less<>>;

// One group key. `row` carries what every setting has (name = the group
// key, type, default text, Kafka's fixed bounds, allowed values, a shape
// check, the doc line); parse_value() checks a value against it.
struct group_setting {
  setting row;
  // The broker setting whose value a group without the key inherits, in
  // Kafka ("group.share.record.lock.duration.ms"); used when the schema has it.
  std::string_view broker_default;
  // Integer keys: the broker settings bounding the value (inclusive), and
  // the bounds used while the schema lacks them (Kafka's defaults, limits.h).
  std::string_view broker_min;
  std::string_view broker_max;
  int64_t fallback_min = 0;
  int64_t fallback_max = 0;
};

// Every group key, in the order docs/configuration.md lists them.
std::span<const group_setting> all_group_settings();
const group_setting* find_group_setting(std::string_view key);

// Parses one value as a client sends it: type, Kafka's fixed bounds and
// shape (not the broker's bounds, which may change: see
// validate_group_configs). Values longer than
// limits::max_group_config_value_bytes are refused.
result<config_value> parse_group_value(const group_setting& g, std::string_view text);

// The value a group without the key has, and where it comes from: the
// broker setting `broker_default` at its level (DYNAMIC_BROKER_CONFIG,
// DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG or DEFAULT_CONFIG) when
// the schema has it, else the row's default (DEFAULT_CONFIG).
struct inherited_group_value {
  config_value value;
  config_source source = config_source::default_config;
};
inherited_group_value inherited_value(const broker_config& b, const group_setting& g);

// The inclusive bounds the broker puts on an integer key's value, with the
// names of the settings they come from (for messages).
struct group_bounds {
  int64_t min = 0;
  int64_t max = 0;
  std::string_view min_name;
  std::string_view max_name;
};
group_bounds value_bounds(const broker_config& b, const group_setting& g);

// Checks a group's whole set of configs against the broker: every key
// known, each integer within value_bounds(), and each session timeout above
// its heartbeat interval (a key not set counts with its inherited value).
status validate_group_configs(const broker_config& b, const config_map& configs);

// IncrementalAlterConfigs on a GROUP resource: the operations, in order, on
// a copy of `current`, then validate_group_configs() on the result. set
// parses the value; remove (Kafka's DELETE) drops the key, whether it was
// set or not; append and subtract are refused (INVALID_CONFIG, Kafka's
// "Can't APPEND to key K because its type is not LIST.": every group key
// is a scalar). A key named twice, or unknown, is refused.
result<config_map> alter_group_configs(const broker_config& b, const config_map& current,
                                       std::span<const alter_request> ops);

// AlterConfigs (the legacy API) on a GROUP resource: the group's whole set
// becomes `entries`, as Kafka's controller replaces it; a null value is
// refused ("Null value not supported for group configs"), as Kafka refuses
// it for groups.
result<config_map> replace_group_configs(const broker_config& b, std::span<const config_entry> entries);

// DescribeConfigs of a group: every group key (or only `keys`, unknown ones
// left out as Kafka leaves them out), sorted by name, each with its value
// and source: DYNAMIC_GROUP_CONFIG for a key set for the group, else its
// inherited_value(); synonyms highest priority first, the inherited ones
// after the group's own. None is read-only or sensitive.
std::vector<described_config> describe_group(const broker_config& b, const config_map& configs,
                                             std::span<const std::string> keys = {});

// ---- Typed views for the coordinators --------------------------------------

// share.auto.offset.reset, parsed. by_duration resets to the first offset
// whose timestamp is at or after now minus `duration_ms`.
struct share_auto_offset_reset {
  enum class strategy : uint8_t { latest, earliest, by_duration };
  strategy kind = strategy::latest;
  int64_t duration_ms = 0;  // by_duration only; never negative
  bool operator==(const share_auto_offset_reset&) const = default;
};
// Accepts Kafka's spellings: "latest", "earliest" (any case) and
// "by_duration:<d>" where <d> is an ISO-8601 duration as Java's
// Duration.parse reads it (PnDTnHnMn.nS: days, hours, minutes, seconds with
// up to nine decimals, each optionally signed, a sign before the P), not
// negative in total and at most int64 milliseconds. errc::invalid_config
// otherwise, the message without the key.
result<share_auto_offset_reset> parse_share_auto_offset_reset(std::string_view text);

// Every share-group value of one group, resolved: the group's own value,
// else its inherited_value(); integer values clamped into value_bounds() (a
// value stored when the broker's bounds were wider, as Kafka 4.2 evaluates
// group configs).
struct share_group_config {
  share_auto_offset_reset auto_offset_reset;
  int32_t record_lock_duration_ms = 30'000;
  int32_t delivery_count_limit = 5;
  bool read_committed = false;  // share.isolation.level
  int32_t session_timeout_ms = 45'000;
  int32_t heartbeat_interval_ms = 5'000;
  std::string dead_letter_topic;  // errors.deadletterqueue.topic.name; empty: none
  bool dead_letter_copy_record = false;
  bool operator==(const share_group_config&) const = default;
};
share_group_config effective_share_group_config(const broker_config& b, const config_map& configs);

// The same for a consumer group of the KIP-848 protocol.
struct consumer_group_config {
  int32_t session_timeout_ms = 45'000;
  int32_t heartbeat_interval_ms = 5'000;
  bool operator==(const consumer_group_config&) const = default;
};
consumer_group_config effective_consumer_group_config(const broker_config& b, const config_map& configs);

}  // namespace sluice::config
