#pragma once

// The schema of every Sluice setting, written down once (schema.cc), and the
// typed values settings hold.
//
// Each row of the schema is one broker setting under Kafka's broker key name
// (`log.retention.ms`). A row that also names a topic key (`retention.ms`) is
// a broker default for a topic setting: the broker value is the default of
// every topic that does not override the topic key, exactly as in Kafka, and
// DescribeConfigs reports the broker key as the topic key's synonym.
// Settings Kafka does not have start with `sluice.`.
//
// Values are validated here and only here: by type, range or allowed values,
// and list length. Every function is pure and thread-safe.

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/result.h"

namespace sluice::config {

enum class value_type : uint8_t {
  boolean,
  int16,
  int32,
  int64,
  float64,  // Kafka's DOUBLE
  string,
  list,         // comma-separated strings on the wire and the command line
  enumeration,  // one string out of `allowed`
};

std::string_view value_type_name(value_type t);  // "bool", "int32", ... as shown in --help

// Kafka's DescribeConfigs ConfigType (v3+) for a value type.
int8_t kafka_config_type(value_type t);

// A setting's value. Integers of every width are held as int64_t (range
// checks keep them inside their declared width); enumerations as their
// canonical string.
using config_value = std::variant<bool, int64_t, double, std::string, std::vector<std::string>>;

// Kafka's textual form of a value: "true", "604800000", "0.5", "compact,delete".
std::string format_value(const config_value& v);

// Custom check for values whose shape the type alone does not capture
// (host:port addresses). Returns an explanation on failure, without the key.
using value_check = std::optional<std::string> (*)(const config_value& v);

struct setting {
  std::string_view name;        // Kafka's broker key, e.g. "log.retention.ms"
  std::string_view topic_name;  // Kafka's topic key, e.g. "retention.ms"; empty: broker only
  value_type type;
  std::string_view default_text;  // the default in Kafka's textual form, parsed like any input
  // Bounds, inclusive: int_* for the integer types, float_* for float64.
  int64_t int_min = 0;
  int64_t int_max = 0;
  double float_min = 0;
  double float_max = 0;
  // enumeration: the allowed values; list: the allowed items (empty: any).
  std::span<const std::string_view> allowed = {};
  // list: bounds on the number of items.
  size_t min_items = 0;
  size_t max_items = 0;
  // May change at runtime through AlterConfigs on the broker resource (topic
  // settings also change per topic, whatever this flag). Mark a setting only
  // when every reader takes the broker's current snapshot at use or is told
  // of the change (docs/configuration.md says when each one applies);
  // otherwise the broker setting is read-only in DescribeConfigs and an
  // AlterConfigs naming it is refused.
  bool dynamic = false;
  bool sensitive = false;  // value hidden in DescribeConfigs (no setting is, yet)
  value_check check = nullptr;
  std::string_view doc;  // one line

  bool is_topic_setting() const { return !topic_name.empty(); }
};

// Every setting, in the order `sluice serve --help` lists them.
std::span<const setting> all_settings();

// Lookup by broker key (`log.retention.ms`) or by topic key (`retention.ms`).
const setting* find_broker_setting(std::string_view name);
const setting* find_topic_setting(std::string_view topic_name);

// The parsed default of a setting (the schema's default_text, validated once).
const config_value& default_value(const setting& s);

// Parses and validates a value given as text (command line, Kafka's wire
// strings, the overrides file). `key` is the name the caller used, for the
// message. Errors are errc::invalid_config with a message naming the key.
result<config_value> parse_value(const setting& s, std::string_view key, std::string_view text);

// Validates an already typed value (from TOML) against type and range.
status check_value(const setting& s, std::string_view key, const config_value& v);

// Validated values given explicitly at one level (file, command line, topic
// overrides, dynamic broker configs), keyed by the name used at that level:
// broker keys for broker levels, topic keys for topic overrides.
class config_map {
 public:
  using map_type = std::map<std::string, config_value, std::less<>>;

  const config_value* find(std::string_view key) const;
  void set(std::string key, config_value v) { values_[std::move(key)] = std::move(v); }
  bool erase(std::string_view key);
  bool empty() const { return values_.empty(); }
  size_t size() const { return values_.size(); }
  const map_type& entries() const { return values_; }
  bool operator==(const config_map&) const = default;

 private:
  map_type values_;
};

}  // namespace sluice::config
