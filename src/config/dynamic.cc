#include "config/dynamic.h"

#include <algorithm>
#include <set>
#include <string>

#include "config/internal.h"

namespace sluice::config {
namespace detail {

sourced_value broker_value(const broker_config& b, const setting& s) {
  if (const auto* v = b.dynamic_broker_values.find(s.name)) {
    return {v, config_source::dynamic_broker_config};
  }
  if (const auto* v = b.dynamic_default_values.find(s.name)) {
    return {v, config_source::dynamic_default_broker_config};
  }
  if (const auto* v = b.static_values.find(s.name)) return {v, config_source::static_broker_config};
  return {&default_value(s), config_source::default_config};
}

status check_topic_consistency(const topic_config& t, bool topic_level) {
  if (t.min_compaction_lag_ms > t.max_compaction_lag_ms) {
    const char* min_key =
        topic_level ? "min.compaction.lag.ms" : "log.cleaner.min.compaction.lag.ms";
    const char* max_key =
        topic_level ? "max.compaction.lag.ms" : "log.cleaner.max.compaction.lag.ms";
    return status(errc::invalid_config,
                  std::string(min_key) + ": " + std::to_string(t.min_compaction_lag_ms) +
                      " is above " + max_key + " " + std::to_string(t.max_compaction_lag_ms));
  }
  return {};
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string suggestion(std::string_view key, bool topic) {
  // A key from the other level is the likeliest mistake: say so plainly.
  if (topic) {
    if (const setting* s = find_broker_setting(key)) {
      if (s->is_topic_setting()) {
        return " (that is the broker default; the topic config is " + std::string(s->topic_name) +
               ")";
      }
      return " (that is a broker setting)";
    }
  } else if (const setting* s = find_topic_setting(key)) {
    return " (that is a topic config; its broker default is " + std::string(s->name) + ")";
  }
  std::string_view best;
  size_t best_distance = 4;  // more than three edits away is not a typo
  for (const auto& s : all_settings()) {
    std::string_view candidate = topic ? s.topic_name : s.name;
    if (candidate.empty()) continue;
    size_t d = edit_distance(key, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  if (best.empty()) return "";
  return " (did you mean " + std::string(best) + "?)";
}

status check_no_duplicates(std::span<const alter_request> ops) {
  std::set<std::string_view> seen;
  for (const auto& op : ops) {
    if (!seen.insert(op.key).second) {
      return status(errc::invalid_config, op.key + ": named twice in one request");
    }
  }
  return {};
}

described_config describe_one(const setting& s, std::string name, std::vector<config_synonym> chain,
                              bool read_only) {
  SLUICE_ASSERT(!chain.empty(), "a setting always has a default");
  described_config d;
  d.name = std::move(name);
  d.value = chain.front().value;
  d.source = chain.front().source;
  d.read_only = read_only;
  d.is_default = d.source == config_source::default_config;
  d.sensitive = s.sensitive;
  d.config_type = kafka_config_type(s.type);
  d.documentation = std::string(s.doc);
  d.synonyms = std::move(chain);
  return d;
}

// The broker levels of a setting, highest priority first.
std::vector<config_synonym> broker_chain(const broker_config& b, const setting& s) {
  auto shown = [&](const config_value& v) -> std::optional<std::string> {
    if (s.sensitive) return std::nullopt;
    return format_value(v);
  };
  std::vector<config_synonym> chain;
  const std::string name(s.name);
  if (const auto* v = b.dynamic_broker_values.find(s.name)) {
    chain.push_back({name, shown(*v), config_source::dynamic_broker_config});
  }
  if (const auto* v = b.dynamic_default_values.find(s.name)) {
    chain.push_back({name, shown(*v), config_source::dynamic_default_broker_config});
  }
  if (const auto* v = b.static_values.find(s.name)) {
    chain.push_back({name, shown(*v), config_source::static_broker_config});
  }
  chain.push_back({name, shown(default_value(s)), config_source::default_config});
  return chain;
}

}  // namespace detail

namespace {

error unknown_topic_key(std::string_view key) {
  return error{errc::invalid_config,
               std::string(key) + ": unknown topic config" + detail::suggestion(key, true)};
}

int64_t as_int(const config_value& v) {
  return std::get<int64_t>(v);
}
int32_t as_int32(const config_value& v) {
  return static_cast<int32_t>(std::get<int64_t>(v));
}

template <class Lookup>
topic_config build_topic_config(const Lookup& get) {
  topic_config t;
  const auto& policy = std::get<std::vector<std::string>>(get("cleanup.policy"));
  t.cleanup_delete = std::find(policy.begin(), policy.end(), "delete") != policy.end();
  t.cleanup_compact = std::find(policy.begin(), policy.end(), "compact") != policy.end();
  const auto& codec = std::get<std::string>(get("compression.type"));
  for (auto c : {compression_type::producer, compression_type::uncompressed, compression_type::gzip,
                 compression_type::snappy, compression_type::lz4, compression_type::zstd}) {
    if (codec == compression_type_name(c)) t.compression = c;
  }
  t.delete_retention_ms = as_int(get("delete.retention.ms"));
  t.file_delete_delay_ms = as_int(get("file.delete.delay.ms"));
  t.flush_messages = as_int(get("flush.messages"));
  t.flush_ms = as_int(get("flush.ms"));
  t.index_interval_bytes = as_int32(get("index.interval.bytes"));
  t.max_compaction_lag_ms = as_int(get("max.compaction.lag.ms"));
  t.max_message_bytes = as_int32(get("max.message.bytes"));
  t.message_timestamp_type = std::get<std::string>(get("message.timestamp.type")) == "LogAppendTime"
                                 ? timestamp_type::log_append_time
                                 : timestamp_type::create_time;
  t.min_cleanable_dirty_ratio = std::get<double>(get("min.cleanable.dirty.ratio"));
  t.min_compaction_lag_ms = as_int(get("min.compaction.lag.ms"));
  t.min_insync_replicas = as_int32(get("min.insync.replicas"));
  t.retention_bytes = as_int(get("retention.bytes"));
  t.retention_ms = as_int(get("retention.ms"));
  t.segment_bytes = as_int32(get("segment.bytes"));
  t.segment_index_bytes = as_int32(get("segment.index.bytes"));
  t.segment_ms = as_int(get("segment.ms"));
  t.unclean_leader_election_enable = std::get<bool>(get("unclean.leader.election.enable"));
  t.fsync_enable = std::get<bool>(get("sluice.fsync.enable"));
  return t;
}

// The value an append or subtract starts from.
std::vector<std::string> list_base(const config_value* current) {
  return std::get<std::vector<std::string>>(*current);
}

// Applies one operation to `target`. `effective` is the value the key has
// now (for append and subtract).
status apply_op(const setting& s, const alter_request& op, const config_value& effective,
                config_map& target, std::string key) {
  switch (op.op) {
    case alter_op::remove:
      target.erase(key);
      return {};
    case alter_op::set: {
      if (!op.value) return status(errc::invalid_config, key + ": set without a value");
      SLUICE_ASSIGN_OR_RETURN(auto v, parse_value(s, key, *op.value));
      target.set(std::move(key), std::move(v));
      return {};
    }
    case alter_op::append:
    case alter_op::subtract: {
      if (s.type != value_type::list) {
        return status(errc::invalid_config,
                      key + ": append and subtract apply to list configs only, this is " +
                          std::string(value_type_name(s.type)));
      }
      if (!op.value) return status(errc::invalid_config, key + ": append/subtract without a value");
      // Items are checked for shape only; the combined list is checked below.
      std::vector<std::string> items;
      {
        std::string_view rest = *op.value;
        while (!rest.empty()) {
          size_t comma = rest.find(',');
          std::string_view item = rest.substr(0, comma);
          while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
          while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
          if (!item.empty()) items.emplace_back(item);
          if (comma == std::string_view::npos) break;
          rest.remove_prefix(comma + 1);
        }
      }
      std::vector<std::string> out = list_base(&effective);
      for (const auto& item : items) {
        auto it = std::find(out.begin(), out.end(), item);
        if (op.op == alter_op::append && it == out.end()) out.push_back(item);
        if (op.op == alter_op::subtract && it != out.end()) out.erase(it);
      }
      config_value v = std::move(out);
      SLUICE_TRY(check_value(s, key, v));
      target.set(std::move(key), std::move(v));
      return {};
    }
  }
  return status(errc::invalid_config,
                key + ": unknown operation " + std::to_string(static_cast<int>(op.op)));
}

// Refuses a key the schema does not know (INVALID_CONFIG, naming it) and,
// all named in one message as Kafka does, keys that cannot change at
// runtime (INVALID_REQUEST).
status check_dynamic_broker_keys(std::span<const std::string_view> keys) {
  std::string fixed;
  for (auto k : keys) {
    const setting* s = find_broker_setting(k);
    if (s == nullptr) {
      return status(errc::invalid_config,
                    std::string(k) + ": unknown broker setting" + detail::suggestion(k, false));
    }
    if (s->dynamic) continue;
    if (!fixed.empty()) fixed += ", ";
    fixed += k;
  }
  if (fixed.empty()) return {};
  return status(errc::invalid_argument, "Cannot update these configs dynamically: " + fixed +
                                            " (set them in the config file and restart)");
}

}  // namespace

std::string_view compression_type_name(compression_type c) {
  switch (c) {
    case compression_type::producer:
      return "producer";
    case compression_type::uncompressed:
      return "uncompressed";
    case compression_type::gzip:
      return "gzip";
    case compression_type::snappy:
      return "snappy";
    case compression_type::lz4:
      return "lz4";
    case compression_type::zstd:
      return "zstd";
  }
  return "unknown";
}

std::string_view timestamp_type_name(timestamp_type t) {
  return t == timestamp_type::log_append_time ? "LogAppendTime" : "CreateTime";
}

std::string_view config_source_name(config_source s) {
  switch (s) {
    case config_source::unknown:
      return "UNKNOWN";
    case config_source::dynamic_topic_config:
      return "DYNAMIC_TOPIC_CONFIG";
    case config_source::dynamic_broker_config:
      return "DYNAMIC_BROKER_CONFIG";
    case config_source::dynamic_default_broker_config:
      return "DYNAMIC_DEFAULT_BROKER_CONFIG";
    case config_source::static_broker_config:
      return "STATIC_BROKER_CONFIG";
    case config_source::default_config:
      return "DEFAULT_CONFIG";
    case config_source::dynamic_group_config:
      return "DYNAMIC_GROUP_CONFIG";
  }
  return "UNKNOWN";
}

topic_config effective_topic_config(const broker_config& broker, const config_map& overrides) {
  return build_topic_config([&](std::string_view topic_key) -> const config_value& {
    const setting* s = find_topic_setting(topic_key);
    SLUICE_ASSERT(s != nullptr, "topic key missing from the schema");
    if (const auto* v = overrides.find(topic_key)) return *v;
    return *detail::broker_value(broker, *s).value;
  });
}

result<config_map> make_topic_overrides(const broker_config& broker,
                                        std::span<const config_entry> entries) {
  config_map out;
  std::set<std::string_view> seen;
  for (const auto& e : entries) {
    const setting* s = find_topic_setting(e.key);
    if (s == nullptr) return unknown_topic_key(e.key);
    if (!seen.insert(e.key).second) {
      return error{errc::invalid_config, e.key + ": named twice in one request"};
    }
    if (!e.value) continue;
    SLUICE_ASSIGN_OR_RETURN(auto v, parse_value(*s, e.key, *e.value));
    out.set(e.key, std::move(v));
  }
  SLUICE_TRY(detail::check_topic_consistency(effective_topic_config(broker, out), true));
  return out;
}

result<config_map> alter_topic_overrides(const broker_config& broker, const config_map& current,
                                         std::span<const alter_request> ops) {
  SLUICE_TRY(detail::check_no_duplicates(ops));
  config_map next = current;
  for (const auto& op : ops) {
    const setting* s = find_topic_setting(op.key);
    if (s == nullptr) return unknown_topic_key(op.key);
    const config_value* now = next.find(op.key);
    if (now == nullptr) now = detail::broker_value(broker, *s).value;
    // apply_op may replace the entry `now` points into; it copies first.
    const config_value effective = *now;
    SLUICE_TRY(apply_op(*s, op, effective, next, op.key));
  }
  SLUICE_TRY(detail::check_topic_consistency(effective_topic_config(broker, next), true));
  return next;
}

result<broker_config> alter_broker_config(const broker_config& broker, bool cluster_default,
                                          std::span<const alter_request> ops) {
  SLUICE_TRY(detail::check_no_duplicates(ops));
  std::vector<std::string_view> keys;
  for (const auto& op : ops) keys.push_back(op.key);
  SLUICE_TRY(check_dynamic_broker_keys(keys));
  config_map node = broker.dynamic_broker_values;
  config_map cluster = broker.dynamic_default_values;
  config_map& target = cluster_default ? cluster : node;
  // append and subtract start from the value the altered resource has:
  // this node's effective value, or for the cluster-wide default the value
  // without any node's own (default level, else static, else default).
  broker_config view = broker;
  if (cluster_default) view.dynamic_broker_values = {};
  for (const auto& op : ops) {
    const setting* s = find_broker_setting(op.key);
    const config_value* now = target.find(op.key);
    const config_value effective = now != nullptr ? *now : *detail::broker_value(view, *s).value;
    SLUICE_TRY(apply_op(*s, op, effective, target, op.key));
  }
  return make_broker_config(broker.static_values, std::move(cluster), std::move(node));
}

result<broker_config> replace_broker_config(const broker_config& broker, bool cluster_default,
                                            std::span<const config_entry> entries) {
  std::set<std::string_view> seen;
  std::vector<std::string_view> keys;
  for (const auto& e : entries) {
    if (!seen.insert(e.key).second) {
      return error{errc::invalid_config, e.key + ": named twice in one request"};
    }
    keys.push_back(e.key);
  }
  SLUICE_TRY(check_dynamic_broker_keys(keys));
  config_map level;
  for (const auto& e : entries) {
    if (!e.value) continue;
    SLUICE_ASSIGN_OR_RETURN(auto v, parse_value(*find_broker_setting(e.key), e.key, *e.value));
    level.set(e.key, std::move(v));
  }
  if (cluster_default) {
    return make_broker_config(broker.static_values, std::move(level), broker.dynamic_broker_values);
  }
  return make_broker_config(broker.static_values, broker.dynamic_default_values, std::move(level));
}

result<std::vector<described_config>> describe_topic(const broker_config& broker,
                                                     const config_map& overrides,
                                                     std::span<const std::string> keys) {
  for (const auto& k : keys) {
    if (find_topic_setting(k) == nullptr) return unknown_topic_key(k);
  }
  std::vector<described_config> out;
  for (const auto& s : all_settings()) {
    if (!s.is_topic_setting()) continue;
    if (!keys.empty() && std::find(keys.begin(), keys.end(), s.topic_name) == keys.end()) continue;
    std::vector<config_synonym> chain;
    if (const auto* v = overrides.find(s.topic_name)) {
      chain.push_back({std::string(s.topic_name),
                       s.sensitive ? std::nullopt : std::optional(format_value(*v)),
                       config_source::dynamic_topic_config});
    }
    for (auto& syn : detail::broker_chain(broker, s)) chain.push_back(std::move(syn));
    out.push_back(detail::describe_one(s, std::string(s.topic_name), std::move(chain), false));
  }
  std::sort(out.begin(), out.end(),
            [](const described_config& a, const described_config& b) { return a.name < b.name; });
  return out;
}

result<std::vector<described_config>> describe_broker(const broker_config& broker,
                                                      std::span<const std::string> keys) {
  for (const auto& k : keys) {
    if (find_broker_setting(k) == nullptr) {
      return error{errc::invalid_config,
                   k + ": unknown broker setting" + detail::suggestion(k, false)};
    }
  }
  std::vector<described_config> out;
  for (const auto& s : all_settings()) {
    if (!keys.empty() && std::find(keys.begin(), keys.end(), s.name) == keys.end()) continue;
    out.push_back(detail::describe_one(s, std::string(s.name), detail::broker_chain(broker, s), !s.dynamic));
  }
  std::sort(out.begin(), out.end(),
            [](const described_config& a, const described_config& b) { return a.name < b.name; });
  return out;
}

result<std::vector<described_config>> describe_broker_defaults(const broker_config& broker,
                                                               std::span<const std::string> keys) {
  for (const auto& k : keys) {
    if (find_broker_setting(k) == nullptr) {
      return error{errc::invalid_config,
                   k + ": unknown broker setting" + detail::suggestion(k, false)};
    }
  }
  std::vector<described_config> out;
  for (const auto& s : all_settings()) {
    if (broker.dynamic_default_values.find(s.name) == nullptr) continue;
    if (!keys.empty() && std::find(keys.begin(), keys.end(), s.name) == keys.end()) continue;
    // The node's own level is not part of the cluster-wide resource.
    std::vector<config_synonym> chain = detail::broker_chain(broker, s);
    std::erase_if(chain, [](const config_synonym& c) {
      return c.source == config_source::dynamic_broker_config;
    });
    out.push_back(detail::describe_one(s, std::string(s.name), std::move(chain), !s.dynamic));
  }
  std::sort(out.begin(), out.end(),
            [](const described_config& a, const described_config& b) { return a.name < b.name; });
  return out;
}

}  // namespace sluice::config
