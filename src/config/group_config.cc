#include "config/group_config.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <limits>
#include <set>

#include "base/assert.h"
#include "base/limits.h"
#include "config/internal.h"

namespace sluice::config {
namespace {

constexpr int64_t i32_max = std::numeric_limits<int32_t>::max();

constexpr std::array<std::string_view, 2> isolation_levels = {"read_uncommitted", "read_committed"};

std::optional<std::string> check_auto_offset_reset(const config_value& v) {
  auto r = parse_share_auto_offset_reset(std::get<std::string>(v));
  if (!r.ok()) return r.err().message;
  return std::nullopt;
}

// Kafka's topic-name rules (partition/topic_names.h holds the same for
// topics; config/ sits below it): up to 249 of [a-zA-Z0-9._-], not "." or
// "..". Empty means "no dead-letter topic".
std::optional<std::string> check_dead_letter_topic(const config_value& v) {
  const auto& name = std::get<std::string>(v);
  if (name.empty()) return std::nullopt;
  if (name == "." || name == "..") return "\"" + name + "\" is not a legal topic name";
  if (name.size() > 249) return "a topic name is at most 249 characters long";
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return "\"" + name + "\" is not a legal topic name (ASCII letters, digits, '.', '_' and '-' only)";
    }
  }
  return std::nullopt;
}

group_setting int_key(std::string_view name, std::string_view def, int64_t kafka_min, std::string_view broker_default,
                      std::string_view broker_min, std::string_view broker_max, int64_t fallback_min,
                      int64_t fallback_max, std::string_view doc) {
  group_setting g{};
  g.row.name = name;
  g.row.type = value_type::int32;
  g.row.default_text = def;
  g.row.int_min = kafka_min;
  g.row.int_max = i32_max;
  g.row.doc = doc;
  g.broker_default = broker_default;
  g.broker_min = broker_min;
  g.broker_max = broker_max;
  g.fallback_min = fallback_min;
  g.fallback_max = fallback_max;
  return g;
}

group_setting text_key(std::string_view name, value_type type, std::string_view def,
                       std::span<const std::string_view> allowed, value_check check, std::string_view doc) {
  group_setting g{};
  g.row.name = name;
  g.row.type = type;
  g.row.default_text = def;
  g.row.allowed = allowed;
  g.row.check = check;
  g.row.doc = doc;
  return g;
}

// THE GROUP KEYS. Kafka's names, types, defaults and fixed lower bounds
// (Kafka 4.2's GroupConfig, with share.delivery.count.limit of KIP-1240 and
// the dead-letter keys of KIP-1191 from the releases after it); the broker
// settings each inherits from and is bounded by, as Kafka names them.
std::vector<group_setting> make_group_schema() {
  std::vector<group_setting> g;
  g.push_back(text_key("share.auto.offset.reset", value_type::string, "latest", {}, check_auto_offset_reset,
                       "Where a share-partition starts when the group has no state for it: latest, earliest, "
                       "or by_duration:<ISO-8601 duration> (the first record at most that old)."));
  g.push_back(int_key("share.record.lock.duration.ms", "30000", 1000, "group.share.record.lock.duration.ms",
                      "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms",
                      limits::min_share_record_lock_duration_ms, limits::max_share_record_lock_duration_ms,
                      "How long a share-group member holds the records it acquired before they can go to "
                      "another member."));
  g.push_back(int_key("share.delivery.count.limit", "5", 2, "group.share.delivery.count.limit",
                      "group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit",
                      limits::min_share_delivery_count_limit, limits::max_share_delivery_count_limit,
                      "Delivery attempts of a record to the share group before it is archived (or sent to "
                      "the dead-letter topic)."));
  g.push_back(text_key("share.isolation.level", value_type::enumeration, "read_uncommitted", isolation_levels,
                       nullptr,
                       "read_committed delivers only committed transactional records to the share group; "
                       "read_uncommitted delivers every record."));
  g.push_back(int_key("share.session.timeout.ms", "45000", 1, "group.share.session.timeout.ms",
                      "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms",
                      limits::min_share_session_timeout_ms, limits::max_share_session_timeout_ms,
                      "A share-group member silent this long leaves the group."));
  g.push_back(int_key("share.heartbeat.interval.ms", "5000", 1, "group.share.heartbeat.interval.ms",
                      "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms",
                      limits::min_share_heartbeat_interval_ms, limits::max_share_heartbeat_interval_ms,
                      "The heartbeat interval given to the members of a share group."));
  g.push_back(text_key("errors.deadletterqueue.topic.name", value_type::string, "", {}, check_dead_letter_topic,
                       "The topic records the share group gives up on are written to; empty: none."));
  {
    group_setting b{};
    b.row.name = "errors.deadletterqueue.copy.record.enable";
    b.row.type = value_type::boolean;
    b.row.default_text = "false";
    b.row.doc = "Whether a dead-letter record carries a copy of the original record, or only its context "
                "headers.";
    g.push_back(b);
  }
  g.push_back(int_key("consumer.session.timeout.ms", "45000", 1, "group.consumer.session.timeout.ms",
                      "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms",
                      limits::min_consumer_session_timeout_ms, limits::max_consumer_session_timeout_ms,
                      "A consumer-group member (KIP-848 protocol) silent this long leaves the group."));
  g.push_back(int_key("consumer.heartbeat.interval.ms", "5000", 1, "group.consumer.heartbeat.interval.ms",
                      "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
                      limits::min_consumer_heartbeat_interval_ms, limits::max_consumer_heartbeat_interval_ms,
                      "The heartbeat interval given to the members of a consumer group (KIP-848 protocol)."));
  return g;
}

const std::vector<group_setting>& group_schema() {
  static const std::vector<group_setting> rows = make_group_schema();
  return rows;
}

// The parsed default of a row; a default that fails its own row is a bug in
// the table above and stops the process at the first lookup.
const config_value& group_default(const group_setting& g) {
  static const std::vector<config_value> defaults = [] {
    std::vector<config_value> out;
    for (const auto& row : group_schema()) {
      auto v = parse_value(row.row, row.row.name, row.row.default_text);
      if (!v.ok()) {
        std::fprintf(stderr, "group config schema: bad default: %s\n", v.err().message.c_str());
        SLUICE_ASSERT(false, "group schema default fails validation");
      }
      out.push_back(std::move(v).value());
    }
    return out;
  }();
  const auto& rows = group_schema();
  SLUICE_ASSERT(&g >= rows.data() && &g < rows.data() + rows.size(), "group setting not in the schema");
  return defaults[static_cast<size_t>(&g - rows.data())];
}

bool is_int(const group_setting& g) {
  return g.row.type == value_type::int16 || g.row.type == value_type::int32 || g.row.type == value_type::int64;
}

bool same_kind(const config_value& a, const config_value& b) {
  return a.index() == b.index();
}

error unknown_group_key(std::string_view key) {
  std::string hint;
  for (const auto& g : group_schema()) {
    if (key == g.broker_default || key == g.broker_min || key == g.broker_max) {
      hint = " (that is a broker setting; the group config is " + std::string(g.row.name) + ")";
    }
  }
  if (!hint.empty()) {
    // named above
  } else if (find_broker_setting(key) != nullptr) {
    hint = " (that is a broker setting)";
  } else if (find_topic_setting(key) != nullptr) {
    hint = " (that is a topic config)";
  } else {
    std::string_view best;
    size_t best_distance = 4;  // more than three edits away is not a typo
    for (const auto& g : group_schema()) {
      const size_t d = detail::edit_distance(key, g.row.name);
      if (d < best_distance) {
        best_distance = d;
        best = g.row.name;
      }
    }
    if (!best.empty()) hint = " (did you mean " + std::string(best) + "?)";
  }
  return error{errc::invalid_config, std::string(key) + ": unknown group config" + hint};
}

// The value of `g` for a group: its own, else the inherited one.
config_value value_of(const broker_config& b, const group_setting& g, const config_map& configs) {
  if (const auto* v = configs.find(g.row.name)) return *v;
  return inherited_value(b, g).value;
}

int32_t clamped_int(const broker_config& b, const config_map& configs, std::string_view key) {
  const group_setting* g = find_group_setting(key);
  SLUICE_ASSERT(g != nullptr && is_int(*g), "an integer group key");
  const auto bounds = value_bounds(b, *g);
  const int64_t v = std::clamp(std::get<int64_t>(value_of(b, *g, configs)), bounds.min, bounds.max);
  return static_cast<int32_t>(std::clamp<int64_t>(v, 0, i32_max));
}

// Session timeout above heartbeat interval, checked when the group sets
// either (a key not set counts with its inherited value).
status check_session_above_heartbeat(const broker_config& b, const config_map& configs,
                                     std::string_view session_key, std::string_view heartbeat_key) {
  if (!configs.find(session_key) && !configs.find(heartbeat_key)) return {};
  const int64_t session = std::get<int64_t>(value_of(b, *find_group_setting(session_key), configs));
  const int64_t heartbeat = std::get<int64_t>(value_of(b, *find_group_setting(heartbeat_key), configs));
  if (session > heartbeat) return {};
  return status(errc::invalid_config, std::string(session_key) + ": " + std::to_string(session) +
                                          " must be greater than " + std::string(heartbeat_key) + " (" +
                                          std::to_string(heartbeat) + ")");
}

// ---- ISO-8601 durations as java.time.Duration.parse reads them -------------

using i128 = __int128;
constexpr i128 nanos_per_second = 1'000'000'000;

// One "<sign><digits>[<fraction>]<unit>" part from `s` at `pos`.
struct duration_part {
  char unit = 0;  // upper case: D, H, M or S
  i128 nanos = 0;
};
std::optional<duration_part> read_part(std::string_view s, size_t& pos) {
  size_t p = pos;
  bool negative = false;
  if (p < s.size() && (s[p] == '+' || s[p] == '-')) negative = s[p++] == '-';
  const size_t digits_at = p;
  while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) ++p;
  if (p == digits_at) return std::nullopt;
  int64_t whole = 0;
  auto [end, ec] = std::from_chars(s.data() + digits_at, s.data() + p, whole);
  if (ec != std::errc() || end != s.data() + p) return std::nullopt;  // beyond int64, as Java refuses it
  i128 fraction_nanos = 0;
  bool fraction = false;
  if (p < s.size() && (s[p] == '.' || s[p] == ',')) {
    fraction = true;
    ++p;
    int n = 0;
    while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) {
      if (++n > 9) return std::nullopt;
      fraction_nanos = fraction_nanos * 10 + (s[p] - '0');
      ++p;
    }
    for (; n < 9; ++n) fraction_nanos *= 10;
  }
  if (p >= s.size()) return std::nullopt;
  const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(s[p])));
  if (unit != 'D' && unit != 'H' && unit != 'M' && unit != 'S') return std::nullopt;
  if (fraction && unit != 'S') return std::nullopt;
  const i128 scale = unit == 'D' ? 86'400 * nanos_per_second
                     : unit == 'H' ? 3'600 * nanos_per_second
                     : unit == 'M' ? 60 * nanos_per_second
                                   : nanos_per_second;
  i128 nanos = static_cast<i128>(whole) * scale + fraction_nanos;
  if (negative) nanos = -nanos;
  pos = p + 1;
  return duration_part{unit, nanos};
}

// The duration in nanoseconds, or nullopt when `s` is not one.
std::optional<i128> parse_iso_duration(std::string_view s) {
  size_t pos = 0;
  bool negative = false;
  if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) negative = s[pos++] == '-';
  if (pos >= s.size() || std::toupper(static_cast<unsigned char>(s[pos])) != 'P') return std::nullopt;
  ++pos;
  i128 total = 0;
  int parts = 0;
  // Units in their order, each at most once: D, then after T: H, M, S.
  const std::string_view order = "DHMS";
  size_t next_unit = 0;
  bool in_time = false;
  int time_parts = 0;
  while (pos < s.size()) {
    if (std::toupper(static_cast<unsigned char>(s[pos])) == 'T') {
      if (in_time) return std::nullopt;
      in_time = true;
      next_unit = std::max<size_t>(next_unit, 1);
      ++pos;
      continue;
    }
    auto part = read_part(s, pos);
    if (!part) return std::nullopt;
    const size_t index = order.find(part->unit);
    if (index < next_unit || (index == 0) == in_time) return std::nullopt;  // out of order, or D after T
    next_unit = index + 1;
    total += part->nanos;
    ++parts;
    if (in_time) ++time_parts;
  }
  if (parts == 0 || (in_time && time_parts == 0)) return std::nullopt;
  return negative ? -total : total;
}

}  // namespace

std::span<const group_setting> all_group_settings() {
  return group_schema();
}

const group_setting* find_group_setting(std::string_view key) {
  for (const auto& g : group_schema()) {
    if (g.row.name == key) return &g;
  }
  return nullptr;
}

result<config_value> parse_group_value(const group_setting& g, std::string_view text) {
  if (text.size() > limits::max_group_config_value_bytes) {
    return error{errc::invalid_config, std::string(g.row.name) + ": value longer than " +
                                           std::to_string(limits::max_group_config_value_bytes) + " bytes"};
  }
  return parse_value(g.row, g.row.name, text);
}

inherited_group_value inherited_value(const broker_config& b, const group_setting& g) {
  if (!g.broker_default.empty()) {
    if (const setting* s = find_broker_setting(g.broker_default)) {
      const auto sv = detail::broker_value(b, *s);
      // A broker setting of another type than the group key (not Kafka's)
      // is not taken.
      if (same_kind(*sv.value, group_default(g))) return {*sv.value, sv.source};
    }
  }
  return {group_default(g), config_source::default_config};
}

group_bounds value_bounds(const broker_config& b, const group_setting& g) {
  group_bounds out{g.row.int_min, g.row.int_max, {}, {}};
  if (!is_int(g)) return out;
  auto bound = [&](std::string_view name, int64_t fallback) -> int64_t {
    if (const setting* s = find_broker_setting(name)) {
      const auto sv = detail::broker_value(b, *s);
      if (const auto* v = std::get_if<int64_t>(sv.value)) return *v;
    }
    return fallback;
  };
  if (!g.broker_min.empty()) {
    out.min = std::max(out.min, bound(g.broker_min, g.fallback_min));
    out.min_name = g.broker_min;
  }
  if (!g.broker_max.empty()) {
    out.max = std::min(out.max, bound(g.broker_max, g.fallback_max));
    out.max_name = g.broker_max;
  }
  return out;
}

status validate_group_configs(const broker_config& b, const config_map& configs) {
  for (const auto& [key, v] : configs.entries()) {
    const group_setting* g = find_group_setting(key);
    if (g == nullptr) return unknown_group_key(key);
    SLUICE_TRY(check_value(g->row, key, v));
    if (!is_int(*g)) continue;
    const int64_t i = std::get<int64_t>(v);
    const auto bounds = value_bounds(b, *g);
    if (i < bounds.min) {
      return status(errc::invalid_config, key + ": " + std::to_string(i) + " must be at least " +
                                              std::to_string(bounds.min) + " (" + std::string(bounds.min_name) +
                                              ")");
    }
    if (i > bounds.max) {
      return status(errc::invalid_config, key + ": " + std::to_string(i) + " must be at most " +
                                              std::to_string(bounds.max) + " (" + std::string(bounds.max_name) +
                                              ")");
    }
  }
  SLUICE_TRY(check_session_above_heartbeat(b, configs, "share.session.timeout.ms", "share.heartbeat.interval.ms"));
  SLUICE_TRY(
      check_session_above_heartbeat(b, configs, "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"));
  return {};
}

result<config_map> alter_group_configs(const broker_config& b, const config_map& current,
                                       std::span<const alter_request> ops) {
  SLUICE_TRY(detail::check_no_duplicates(ops));
  config_map next = current;
  for (const auto& op : ops) {
    const group_setting* g = find_group_setting(op.key);
    if (g == nullptr) return unknown_group_key(op.key);
    switch (op.op) {
      case alter_op::set: {
        if (!op.value) return error{errc::invalid_config, op.key + ": set without a value"};
        SLUICE_ASSIGN_OR_RETURN(auto v, parse_group_value(*g, *op.value));
        next.set(op.key, std::move(v));
        break;
      }
      case alter_op::remove:
        next.erase(op.key);
        break;
      case alter_op::append:
      case alter_op::subtract:
        // Kafka's controller answer, word for word: no group key is a list.
        return error{errc::invalid_config, std::string("Can't ") +
                                               (op.op == alter_op::append ? "APPEND" : "SUBTRACT") +
                                               " to key " + op.key + " because its type is not LIST."};
      default:
        return error{errc::invalid_config,
                     op.key + ": unknown operation " + std::to_string(static_cast<int>(op.op))};
    }
  }
  SLUICE_TRY(validate_group_configs(b, next));
  return next;
}

result<config_map> replace_group_configs(const broker_config& b, std::span<const config_entry> entries) {
  std::set<std::string_view> seen;
  std::string nulls;
  for (const auto& e : entries) {
    if (!seen.insert(e.key).second) return error{errc::invalid_config, e.key + ": named twice in one request"};
    if (find_group_setting(e.key) == nullptr) return unknown_group_key(e.key);
    if (!e.value) nulls += (nulls.empty() ? "" : ",") + e.key;
  }
  if (!nulls.empty()) return error{errc::invalid_config, "Null value not supported for group configs: " + nulls};
  config_map next;
  for (const auto& e : entries) {
    SLUICE_ASSIGN_OR_RETURN(auto v, parse_group_value(*find_group_setting(e.key), *e.value));
    next.set(e.key, std::move(v));
  }
  SLUICE_TRY(validate_group_configs(b, next));
  return next;
}

std::vector<described_config> describe_group(const broker_config& b, const config_map& configs,
                                             std::span<const std::string> keys) {
  std::vector<described_config> out;
  for (const auto& g : group_schema()) {
    if (!keys.empty() && std::find(keys.begin(), keys.end(), g.row.name) == keys.end()) continue;
    std::vector<config_synonym> chain;
    const std::string name(g.row.name);
    if (const auto* v = configs.find(g.row.name)) {
      chain.push_back({name, format_value(*v), config_source::dynamic_group_config});
    }
    // The levels the group inherits from: the broker setting's, when the
    // schema has it, else the key's own default.
    const setting* broker = g.broker_default.empty() ? nullptr : find_broker_setting(g.broker_default);
    if (broker != nullptr && same_kind(default_value(*broker), group_default(g))) {
      for (auto& syn : detail::broker_chain(b, *broker)) chain.push_back(std::move(syn));
    } else {
      chain.push_back({name, format_value(group_default(g)), config_source::default_config});
    }
    out.push_back(detail::describe_one(g.row, name, std::move(chain), false));
  }
  std::sort(out.begin(), out.end(),
            [](const described_config& x, const described_config& y) { return x.name < y.name; });
  return out;
}

result<share_auto_offset_reset> parse_share_auto_offset_reset(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "latest") return share_auto_offset_reset{share_auto_offset_reset::strategy::latest, 0};
  if (lower == "earliest") return share_auto_offset_reset{share_auto_offset_reset::strategy::earliest, 0};
  constexpr std::string_view by_duration = "by_duration:";
  if (lower.rfind(by_duration, 0) != 0) {
    return error{errc::invalid_config, "\"" + std::string(text) +
                                           "\" is not latest, earliest or by_duration:<ISO-8601 duration>"};
  }
  const std::string_view d = text.substr(by_duration.size());
  const auto nanos = parse_iso_duration(d);
  if (!nanos) {
    return error{errc::invalid_config, "\"" + std::string(d) +
                                           "\" is not an ISO-8601 duration such as PT1H or P1DT12H30M"};
  }
  if (*nanos < 0) return error{errc::invalid_config, "\"" + std::string(d) + "\": a negative duration"};
  const i128 ms = *nanos / 1'000'000;
  if (ms > std::numeric_limits<int64_t>::max()) {
    return error{errc::invalid_config, "\"" + std::string(d) + "\" is longer than int64 milliseconds"};
  }
  return share_auto_offset_reset{share_auto_offset_reset::strategy::by_duration, static_cast<int64_t>(ms)};
}

share_group_config effective_share_group_config(const broker_config& b, const config_map& configs) {
  share_group_config out;
  const auto reset = std::get<std::string>(value_of(b, *find_group_setting("share.auto.offset.reset"), configs));
  // Stored values were validated; a default that no longer parses is the
  // broker's to report, and a share group then starts at latest, Kafka's default.
  if (auto r = parse_share_auto_offset_reset(reset); r.ok()) out.auto_offset_reset = *r;
  out.record_lock_duration_ms = clamped_int(b, configs, "share.record.lock.duration.ms");
  out.delivery_count_limit = clamped_int(b, configs, "share.delivery.count.limit");
  out.read_committed =
      std::get<std::string>(value_of(b, *find_group_setting("share.isolation.level"), configs)) == "read_committed";
  out.session_timeout_ms = clamped_int(b, configs, "share.session.timeout.ms");
  out.heartbeat_interval_ms = clamped_int(b, configs, "share.heartbeat.interval.ms");
  out.dead_letter_topic =
      std::get<std::string>(value_of(b, *find_group_setting("errors.deadletterqueue.topic.name"), configs));
  out.dead_letter_copy_record =
      std::get<bool>(value_of(b, *find_group_setting("errors.deadletterqueue.copy.record.enable"), configs));
  return out;
}

consumer_group_config effective_consumer_group_config(const broker_config& b, const config_map& configs) {
  consumer_group_config out;
  out.session_timeout_ms = clamped_int(b, configs, "consumer.session.timeout.ms");
  out.heartbeat_interval_ms = clamped_int(b, configs, "consumer.heartbeat.interval.ms");
  return out;
}

}  // namespace sluice::config
