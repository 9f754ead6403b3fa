#include "config/broker_config.h"

#include <algorithm>
#include <set>
#include <string>
#include <thread>

#include <toml++/toml.h>

#include "base/limits.h"
#include "config/dynamic.h"
#include "config/internal.h"
#include "io/file.h"

namespace sluice::config {
namespace {

error bad(std::string message) {
  return error{errc::invalid_config, std::move(message)};
}

error unknown_broker_key(std::string_view where, std::string_view key) {
  return bad(std::string(where) + "unknown setting \"" + std::string(key) + "\"" +
             detail::suggestion(key, false) + "; `sluice serve --help` lists them");
}

std::string node_kind(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::table:
      return "a table";
    case toml::node_type::array:
      return "an array";
    case toml::node_type::string:
      return "a string";
    case toml::node_type::integer:
      return "an integer";
    case toml::node_type::floating_point:
      return "a float";
    case toml::node_type::boolean:
      return "a bool";
    case toml::node_type::date:
      return "a date";
    case toml::node_type::time:
      return "a time";
    case toml::node_type::date_time:
      return "a date-time";
    case toml::node_type::none:
      return "nothing";
  }
  return "something else";
}

// Converts one TOML value to the setting's type; strings are accepted for
// lists (comma-separated, as on the command line) but for nothing else: a
// quoted number in a TOML file is a mistake worth reporting.
result<config_value> from_toml(const setting& s, const std::string& key, const toml::node& n) {
  auto wrong = [&]() {
    return bad(key + ": expected " + std::string(value_type_name(s.type)) + ", got " +
               node_kind(n));
  };
  config_value v;
  switch (s.type) {
    case value_type::boolean:
      if (!n.is_boolean()) return wrong();
      v = n.as_boolean()->get();
      break;
    case value_type::int16:
    case value_type::int32:
    case value_type::int64:
      if (!n.is_integer()) return wrong();
      v = n.as_integer()->get();
      break;
    case value_type::float64:
      if (n.is_floating_point()) {
        v = n.as_floating_point()->get();
      } else if (n.is_integer()) {
        v = static_cast<double>(n.as_integer()->get());
      } else {
        return wrong();
      }
      break;
    case value_type::string:
    case value_type::enumeration:
      if (!n.is_string()) return wrong();
      v = n.as_string()->get();
      break;
    case value_type::list:
      if (n.is_string()) return parse_value(s, key, n.as_string()->get());
      if (!n.is_array()) return wrong();
      {
        std::vector<std::string> items;
        for (const auto& item : *n.as_array()) {
          if (!item.is_string()) {
            return bad(key + ": expected a list of strings, got " + node_kind(item) + " in it");
          }
          items.push_back(item.as_string()->get());
        }
        v = std::move(items);
      }
      break;
  }
  SLUICE_TRY(check_value(s, key, v));
  return v;
}

std::string where(std::string_view origin, const toml::node& n) {
  return std::string(origin) + ":" + std::to_string(n.source().begin.line) + ": ";
}

// Walks nested tables, joining keys with dots: `[log] retention.ms = 1`,
// `log.retention.ms = 1` and `"log.retention.ms" = 1` all name the same key.
status flatten(const toml::table& t, const std::string& prefix, std::string_view origin,
               config_map& out) {
  for (const auto& [k, node] : t) {
    const std::string key =
        prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (node.is_table()) {
      SLUICE_TRY(flatten(*node.as_table(), key, origin, out));
      continue;
    }
    const setting* s = find_broker_setting(key);
    if (s == nullptr) return unknown_broker_key(where(origin, node), key);
    if (out.find(key) != nullptr) return bad(where(origin, node) + key + ": set twice");
    auto v = from_toml(*s, key, node);
    if (!v.ok()) return bad(where(origin, node) + v.err().message);
    out.set(key, std::move(v).value());
  }
  return {};
}

// "[PLAINTEXT://]host:port" (already validated by the schema's check).
host_port to_host_port(std::string_view s) {
  size_t scheme = s.find("://");
  if (scheme != std::string_view::npos) s.remove_prefix(scheme + 3);
  size_t colon = s.rfind(':');
  std::string_view host = s.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  host_port hp;
  hp.host = host.empty() ? "0.0.0.0" : std::string(host);
  hp.port = static_cast<uint16_t>(std::stoi(std::string(s.substr(colon + 1))));
  return hp;
}

status check_level(const config_map& m, std::string_view level) {
  for (const auto& [key, v] : m.entries()) {
    const setting* s = find_broker_setting(key);
    if (s == nullptr) return unknown_broker_key(std::string(level) + ": ", key);
    SLUICE_TRY(check_value(*s, key, v));
  }
  return {};
}

// Checks between the cluster's settings and the others, each valid alone.
// They hold only in cluster mode: a single node does not use them.
status check_cluster_settings(const broker_config& b) {
  if (!b.cluster_mode()) return {};
  // The default 0 on every broker would make them one node in etcd.
  if (b.static_values.find("node.id") == nullptr) {
    return bad(
        "sluice.etcd.endpoints is set: node.id must be given (each broker of a cluster "
        "needs its own)");
  }
  if (detail::is_unspecified_address(b.advertised_listener.host)) {
    const bool inherited = b.static_values.find("advertised.listeners") == nullptr;
    return bad("advertised.listeners: " + format_host_port(b.advertised_listener) +
               " cannot be advertised in a cluster: other brokers and clients connect to it; "
               "give this broker's own address" +
               (inherited ? " (advertised.listeners is unset, so the listener's is used)" : ""));
  }
  // A request that may outlast the lease could let the broker's
  // registration expire while it waits on one slow etcd member.
  if (b.etcd_request_timeout_ms >= b.etcd_session_timeout_ms) {
    return bad("sluice.etcd.request.timeout.ms: " + std::to_string(b.etcd_request_timeout_ms) +
               " is not below sluice.etcd.session.timeout.ms " +
               std::to_string(b.etcd_session_timeout_ms));
  }
  // A follower's fetch held for longer than the lag allowance would drop
  // every idle follower out of the ISR; one whose deadline is shorter than
  // the hold would time out on every idle fetch.
  if (b.replica_fetch_wait_max_ms >= b.replica_lag_time_max_ms) {
    return bad("replica.fetch.wait.max.ms: " + std::to_string(b.replica_fetch_wait_max_ms) +
               " is not below replica.lag.time.max.ms " + std::to_string(b.replica_lag_time_max_ms));
  }
  if (b.replica_socket_timeout_ms <= b.replica_fetch_wait_max_ms) {
    return bad("replica.socket.timeout.ms: " + std::to_string(b.replica_socket_timeout_ms) +
               " is not above replica.fetch.wait.max.ms " + std::to_string(b.replica_fetch_wait_max_ms));
  }
  return {};
}

void append_wrapped(std::string& out, std::string_view text, std::string_view indent,
                    size_t width) {
  size_t col = 0;
  std::string_view rest = text;
  out += indent;
  col = indent.size();
  while (!rest.empty()) {
    size_t space = rest.find(' ');
    std::string_view word = rest.substr(0, space);
    if (col > indent.size() && col + 1 + word.size() > width) {
      out += "\n";
      out += indent;
      col = indent.size();
    } else if (col > indent.size()) {
      out += ' ';
      ++col;
    }
    out += word;
    col += word.size();
    if (space == std::string_view::npos) break;
    rest.remove_prefix(space + 1);
  }
  out += "\n";
}

}  // namespace

std::string format_host_port(const host_port& hp) {
  const bool v6 = hp.host.find(':') != std::string::npos;
  return (v6 ? "[" + hp.host + "]" : hp.host) + ":" + std::to_string(hp.port);
}

result<serve_args> parse_serve_args(std::span<const std::string> args) {
  serve_args out;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a == "--help" || a == "-h") {
      return serve_args{.help = true, .config_path = std::nullopt, .overrides = {}};
    }
    if (a.size() <= 2 || a.substr(0, 2) != "--") {
      return bad("unexpected argument \"" + std::string(a) +
                 "\"; settings are given as --KEY VALUE (see --help)");
    }
    a.remove_prefix(2);
    size_t eq = a.find('=');
    std::string key(a.substr(0, eq));
    std::optional<std::string> value;
    if (eq != std::string_view::npos) {
      value = std::string(a.substr(eq + 1));
    } else if (i + 1 < args.size()) {
      value = args[++i];
    }
    if (key != "config" && find_broker_setting(key) == nullptr) {
      return unknown_broker_key("", key);
    }
    if (!value) return bad(key + ": missing value after --" + key);
    if (key == "config") {
      out.config_path = std::move(*value);
    } else {
      out.overrides.emplace_back(std::move(key), std::move(*value));
    }
  }
  return out;
}

result<serve_args> parse_serve_args(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_serve_args(std::span<const std::string>(args));
}

result<config_map> parse_toml_config(std::string_view toml_text, std::string_view origin) {
  toml::table table;
  try {
    table = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    return error{errc::invalid_config, std::string(origin) + ":" +
                                           std::to_string(e.source().begin.line) + ": " +
                                           std::string(e.description())};
  }
  config_map out;
  SLUICE_TRY(flatten(table, "", origin, out));
  return out;
}

result<broker_config> load_broker_config(const serve_args& args) {
  config_map values;
  if (args.config_path) {
    auto bytes = io::filesystem::posix().read_all(*args.config_path, limits::max_config_file_bytes);
    if (!bytes.ok()) {
      return error{bytes.code(), "--config " + *args.config_path + ": " + bytes.err().message};
    }
    std::string_view text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
    SLUICE_ASSIGN_OR_RETURN(values, parse_toml_config(text, *args.config_path));
  }
  for (const auto& [key, text] : args.overrides) {
    const setting* s = find_broker_setting(key);
    if (s == nullptr) return unknown_broker_key("", key);
    auto v = parse_value(*s, key, text);
    if (!v.ok()) return bad("--" + v.err().message);
    values.set(key, std::move(v).value());
  }
  return make_broker_config(std::move(values));
}

result<broker_config> make_broker_config(config_map static_values,
                                         config_map dynamic_default_values,
                                         config_map dynamic_broker_values) {
  SLUICE_TRY(check_level(static_values, "static config"));
  SLUICE_TRY(check_level(dynamic_default_values, "dynamic default config"));
  SLUICE_TRY(check_level(dynamic_broker_values, "dynamic broker config"));
  broker_config b;
  b.static_values = std::move(static_values);
  b.dynamic_default_values = std::move(dynamic_default_values);
  b.dynamic_broker_values = std::move(dynamic_broker_values);

  auto get = [&](std::string_view key) -> const config_value& {
    const setting* s = find_broker_setting(key);
    SLUICE_ASSERT(s != nullptr, "broker key missing from the schema");
    return *detail::broker_value(b, *s).value;
  };
  auto i64 = [&](std::string_view key) { return std::get<int64_t>(get(key)); };
  auto i32 = [&](std::string_view key) {
    return static_cast<int32_t>(std::get<int64_t>(get(key)));
  };
  auto flag = [&](std::string_view key) { return std::get<bool>(get(key)); };
  auto list = [&](std::string_view key) -> const std::vector<std::string>& {
    return std::get<std::vector<std::string>>(get(key));
  };

  b.node_id = i32("node.id");
  const auto& rack = std::get<std::string>(get("broker.rack"));
  if (!rack.empty()) b.rack = rack;
  b.listener = to_host_port(list("listeners").at(0));
  const auto& advertised = list("advertised.listeners");
  b.advertised_listener = advertised.empty() ? b.listener : to_host_port(advertised.at(0));
  b.data_dir = list("log.dirs").at(0);
  b.num_io_threads = i32("num.io.threads");
  if (b.num_io_threads == 0) {
    const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
    b.num_io_threads = static_cast<int32_t>(std::min(cores, limits::max_io_threads));
  }
  for (const auto& url : list("sluice.etcd.endpoints")) {
    auto normal = detail::normalize_etcd_endpoint(url);
    SLUICE_ASSERT(normal.ok(), "an etcd endpoint passed its check but does not normalise");
    b.etcd_endpoints.push_back(std::move(normal).value());
  }
  b.etcd_prefix = std::get<std::string>(get("sluice.etcd.prefix"));
  b.etcd_session_timeout_ms = i32("sluice.etcd.session.timeout.ms");
  b.etcd_request_timeout_ms = i32("sluice.etcd.request.timeout.ms");
  b.auto_leader_rebalance_enable = flag("auto.leader.rebalance.enable");
  b.leader_imbalance_per_broker_percentage = i32("leader.imbalance.per.broker.percentage");
  b.leader_imbalance_check_interval_seconds = i64("leader.imbalance.check.interval.seconds");
  b.replica_lag_time_max_ms = i64("replica.lag.time.max.ms");
  b.replica_fetch_wait_max_ms = i32("replica.fetch.wait.max.ms");
  b.replica_fetch_max_bytes = i32("replica.fetch.max.bytes");
  b.replica_fetch_response_max_bytes = i32("replica.fetch.response.max.bytes");
  b.replica_fetch_backoff_ms = i32("replica.fetch.backoff.ms");
  b.replica_socket_timeout_ms = i32("replica.socket.timeout.ms");
  b.socket_request_max_bytes = i32("socket.request.max.bytes");
  b.fetch_max_bytes = i32("fetch.max.bytes");
  b.fetch_bytes_per_rtt_ms = i64("sluice.fetch.bytes.per.rtt.ms");
  b.connections_max_idle_ms = i64("connections.max.idle.ms");
  b.max_connections = i32("max.connections");
  b.max_inflight_requests_per_connection = i32("sluice.max.inflight.requests.per.connection");
  b.queued_max_request_bytes = i64("queued.max.request.bytes");
  b.request_read_timeout_ms = i64("sluice.request.read.timeout.ms");
  b.auto_create_topics_enable = flag("auto.create.topics.enable");
  b.num_partitions = i32("num.partitions");
  b.default_replication_factor = static_cast<int16_t>(i64("default.replication.factor"));
  b.delete_topic_enable = flag("delete.topic.enable");
  b.max_request_partition_size_limit = i32("max.request.partition.size.limit");
  b.log_retention_check_interval_ms = i64("log.retention.check.interval.ms");
  b.log_flush_offset_checkpoint_interval_ms = i64("log.flush.offset.checkpoint.interval.ms");
  b.max_open_segment_files = i32("sluice.max.open.segment.files");
  b.fsync_scope_filesystem = std::get<std::string>(get("sluice.log.fsync.scope")) == "filesystem";
  b.log_scrub_bytes_per_second = i64("sluice.log.scrub.bytes.per.second");
  b.follower_cache_drop_behind_bytes = i64("sluice.follower.cache.drop.behind.bytes");
  b.log_cleaner_enable = flag("log.cleaner.enable");
  b.log_cleaner_threads = i32("log.cleaner.threads");
  b.log_cleaner_dedupe_buffer_bytes = i64("log.cleaner.dedupe.buffer.size");
  b.log_cleaner_backoff_ms = i64("log.cleaner.backoff.ms");
  b.group_min_session_timeout_ms = i32("group.min.session.timeout.ms");
  b.group_max_session_timeout_ms = i32("group.max.session.timeout.ms");
  b.group_max_size = i32("group.max.size");
  b.group_initial_rebalance_delay_ms = i32("group.initial.rebalance.delay.ms");
  b.offsets_topic_num_partitions = i32("offsets.topic.num.partitions");
  b.transaction_version = static_cast<int16_t>(i64("transaction.version"));
  b.offsets_topic_replication_factor =
      static_cast<int16_t>(i64("offsets.topic.replication.factor"));
  b.offsets_retention_minutes = i32("offsets.retention.minutes");
  b.offsets_retention_check_interval_ms = i64("offsets.retention.check.interval.ms");
  b.offsets_commit_timeout_ms = i32("offsets.commit.timeout.ms");
  b.transaction_state_log_num_partitions = i32("transaction.state.log.num.partitions");
  b.transaction_state_log_replication_factor =
      static_cast<int16_t>(i64("transaction.state.log.replication.factor"));
  b.transaction_state_log_min_isr = i32("transaction.state.log.min.isr");
  b.transaction_state_log_segment_bytes = i32("transaction.state.log.segment.bytes");
  b.transaction_max_timeout_ms = i32("transaction.max.timeout.ms");
  b.transactional_id_expiration_ms = i32("transactional.id.expiration.ms");
  b.transaction_abort_interval_ms =
      i32("transaction.abort.timed.out.transaction.cleanup.interval.ms");
  b.transactional_id_removal_interval_ms =
      i32("transaction.remove.expired.transaction.cleanup.interval.ms");
  b.group_share_record_lock_duration_ms = i32("group.share.record.lock.duration.ms");
  b.group_share_delivery_count_limit = static_cast<int16_t>(i64("group.share.delivery.count.limit"));
  b.group_share_partition_max_record_locks = i32("group.share.partition.max.record.locks");
  b.group_share_session_timeout_ms = i32("group.share.session.timeout.ms");
  b.group_share_heartbeat_interval_ms = i32("group.share.heartbeat.interval.ms");
  b.group_share_max_size = i32("group.share.max.size");
  b.share_state_topic_num_partitions = i32("share.coordinator.state.topic.num.partitions");
  b.share_state_topic_replication_factor =
      static_cast<int16_t>(i64("share.coordinator.state.topic.replication.factor"));
  b.share_state_topic_min_isr = i32("share.coordinator.state.topic.min.isr");
  b.share_state_topic_segment_bytes = i32("share.coordinator.state.topic.segment.bytes");
  const auto& metrics = std::get<std::string>(get("sluice.metrics.listener"));
  if (!metrics.empty()) b.metrics_listener = to_host_port(metrics);
  b.retention_headroom_alert_ms = i64("sluice.retention.headroom.alert.ms");
  b.write_rate_window_ms = i64("sluice.metrics.write.rate.window.ms");

  // One frame of the largest size must fit beside the small frames'
  // reserve, or it could never be read (net/server.h).
  if (b.queued_max_request_bytes <
      limits::min_queued_max_request_bytes(b.socket_request_max_bytes)) {
    return bad("queued.max.request.bytes: " + std::to_string(b.queued_max_request_bytes) +
               " is below socket.request.max.bytes " + std::to_string(b.socket_request_max_bytes) +
               " plus the " + std::to_string(limits::request_budget_reserve_bytes) +
               " bytes reserved for small requests");
  }
  if (b.group_min_session_timeout_ms > b.group_max_session_timeout_ms) {
    return bad("group.min.session.timeout.ms: " + std::to_string(b.group_min_session_timeout_ms) +
               " is above group.max.session.timeout.ms " +
               std::to_string(b.group_max_session_timeout_ms));
  }
  SLUICE_TRY(check_cluster_settings(b));
  b.topic_defaults = effective_topic_config(b, config_map{});
  SLUICE_TRY(detail::check_topic_consistency(b.topic_defaults, false));
  return b;
}

std::string render_help() {
  std::string out =
      "Usage: sluice serve [--config FILE] [--KEY VALUE | --KEY=VALUE ...]\n"
      "\n"
      "Runs a Sluice broker. Each setting below takes its default, then the value\n"
      "in the TOML file given by --config (keys as Kafka's dotted names), then a\n"
      "--KEY VALUE argument (the last one wins). A refused setting ends the\n"
      "program with exit status 2 before any file is touched.\n"
      "\n"
      "Options:\n"
      "  --config FILE\n"
      "      TOML file of settings (see docs/configuration.md).\n"
      "  --help, -h\n"
      "      This text.\n"
      "\n"
      "Settings:\n";
  for (const auto& s : all_settings()) {
    std::string head = "  --" + std::string(s.name) + " " + std::string(value_type_name(s.type));
    out += head + "\n";
    std::string facts =
        "default: " + (s.default_text.empty() ? std::string("(empty)")
                                              : "\"" + std::string(s.default_text) + "\"");
    switch (s.type) {
      case value_type::int16:
      case value_type::int32:
      case value_type::int64:
        facts += "; range: " + std::to_string(s.int_min) + ".." + std::to_string(s.int_max);
        break;
      case value_type::float64:
        facts += "; range: " + format_value(s.float_min) + ".." + format_value(s.float_max);
        break;
      case value_type::enumeration:
      case value_type::list:
        if (!s.allowed.empty()) {
          facts += "; one of:";
          for (auto a : s.allowed) facts += " " + std::string(a);
        }
        break;
      case value_type::boolean:
      case value_type::string:
        break;
    }
    append_wrapped(out, std::string(s.doc), "      ", 80);
    append_wrapped(out, facts, "      ", 80);
    if (s.is_topic_setting()) {
      out += "      broker default of topic config " + std::string(s.topic_name) + "\n";
    }
    if (s.dynamic) out += "      alterable at runtime (AlterConfigs on the broker)\n";
  }
  return out;
}

}  // namespace sluice::config
