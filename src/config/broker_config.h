#pragma once

// The broker's configuration: loading from `sluice serve [--config FILE]
// [--KEY VALUE ...]`, the --help listing, and the typed read-only result.
//
// Use from main():
//
//   auto args = config::parse_serve_args(argc, argv);  // the arguments after "serve"
//   if (!args) { fprintf(stderr, "sluice serve: %s\n", args.err().message.c_str()); return 2; }
//   if (args->help) { fputs(config::render_help().c_str(), stdout); return 0; }
//   auto cfg = config::load_broker_config(*args);
//   if (!cfg) { fprintf(stderr, "sluice serve: %s\n", cfg.err().message.c_str()); return 2; }
//
// Nothing here touches any file other than reading the TOML file. Every
// error is errc::invalid_config (or errc::not_found / io_error for the file)
// with a message that names the key.
//
// A broker_config is an immutable snapshot: the broker holds it as
// std::shared_ptr<const broker_config> and replaces the pointer when a
// dynamic broker change (dynamic.h) produces a new one. Any thread may read a
// snapshot.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.h"
#include "config/schema.h"
#include "config/topic_config.h"

namespace sluice::config {

struct host_port {
  std::string host;   // as written: a name, an IPv4 address or an IPv6 address without brackets
  uint16_t port = 0;  // 0: any free port (tests)
  bool operator==(const host_port&) const = default;
};

// "host:port", with brackets around an IPv6 host: "[::1]:9092".
std::string format_host_port(const host_port& hp);

struct broker_config {
  int32_t node_id = 0;
  std::optional<std::string> rack;  // broker.rack; empty in the settings: none
  host_port listener;               // listeners (one PLAINTEXT listener)
  host_port advertised_listener;    // advertised.listeners, or the listener when unset
  std::string data_dir;             // log.dirs (exactly one directory)
  int32_t num_io_threads = 0;       // resolved: 0 in the file means one per core
  // ---- The cluster (docs/configuration.md, "Running a cluster").
  // sluice.etcd.endpoints, each as "http://host:port" (host in lower case,
  // IPv6 in brackets, no trailing slash), no two the same. Empty: a single
  // node whose metadata lives in the data directory (cluster_mode() false).
  std::vector<std::string> etcd_endpoints;
  // sluice.etcd.prefix: begins every key of this cluster; starts and ends
  // with '/'.
  std::string etcd_prefix;
  // sluice.etcd.session.timeout.ms: how long a broker that stopped talking
  // to etcd stays registered (etcd_lease_ttl_seconds()).
  int32_t etcd_session_timeout_ms = 0;
  // sluice.etcd.request.timeout.ms: the deadline of one attempt at one
  // endpoint before the next is tried (etcd::grpc_client_options::
  // request_timeout_ms); below etcd_session_timeout_ms in cluster mode.
  int32_t etcd_request_timeout_ms = 0;
  bool auto_leader_rebalance_enable = true;
  int32_t leader_imbalance_per_broker_percentage = 0;  // 0..100
  int64_t leader_imbalance_check_interval_seconds = 0;
  // __consumer_offsets is created with min(this, live brokers) replicas.
  int16_t offsets_topic_replication_factor = 0;
  // ---- Replication: Kafka's replica.* settings (docs/replication.md).
  int64_t replica_lag_time_max_ms = 0;
  int32_t replica_fetch_wait_max_ms = 0;  // below replica_lag_time_max_ms
  int32_t replica_fetch_max_bytes = 0;
  int32_t replica_fetch_response_max_bytes = 0;
  int32_t replica_fetch_backoff_ms = 0;
  int32_t replica_socket_timeout_ms = 0;  // above replica_fetch_wait_max_ms
  int32_t socket_request_max_bytes = 0;
  int32_t fetch_max_bytes = 0;
  int64_t fetch_bytes_per_rtt_ms = 0;  // sluice.fetch.bytes.per.rtt.ms; 0: off
  int64_t connections_max_idle_ms = 0;
  int32_t max_connections = 0;
  int32_t max_inflight_requests_per_connection = 0;
  int64_t queued_max_request_bytes = 0;  // >= socket_request_max_bytes + the small-frame reserve
  int64_t request_read_timeout_ms = 0;   // sluice.request.read.timeout.ms
  bool auto_create_topics_enable = true;
  int32_t num_partitions = 0;
  int16_t default_replication_factor = 0;
  bool delete_topic_enable = true;
  int32_t max_request_partition_size_limit = 0;  // partitions per DescribeTopicPartitions answer
  int64_t log_retention_check_interval_ms = 0;
  int64_t log_flush_offset_checkpoint_interval_ms = 0;
  int32_t max_open_segment_files = 0;
  bool fsync_scope_filesystem = true;  // sluice.log.fsync.scope: filesystem (true) or file
  int64_t log_scrub_bytes_per_second = 0;  // sluice.log.scrub.bytes.per.second; 0: no scrubber
  int64_t follower_cache_drop_behind_bytes = 0;  // sluice.follower.cache.drop.behind.bytes; 0: never dropped
  bool log_cleaner_enable = true;
  int32_t log_cleaner_threads = 0;
  int64_t log_cleaner_dedupe_buffer_bytes = 0;  // log.cleaner.dedupe.buffer.size
  int64_t log_cleaner_backoff_ms = 0;
  int32_t group_min_session_timeout_ms = 0;
  int32_t group_max_session_timeout_ms = 0;
  int32_t group_max_size = 0;
  int32_t group_initial_rebalance_delay_ms = 0;
  int32_t offsets_topic_num_partitions = 0;
  // transaction.version: the finalized level of the feature advertised in
  // ApiVersions (1 or 2).
  int16_t transaction_version = 2;
  int32_t offsets_retention_minutes = 0;
  int64_t offsets_retention_check_interval_ms = 0;
  int32_t offsets_commit_timeout_ms = 0;
  // ---- Transactions: Kafka's transaction.* settings (docs/transactions.md).
  // The layout of __transaction_state when it is created: partitions,
  // replicas (min(this, live brokers)), its min.insync.replicas (at most
  // its replicas) and segment.bytes.
  int32_t transaction_state_log_num_partitions = 0;
  int16_t transaction_state_log_replication_factor = 0;
  int32_t transaction_state_log_min_isr = 0;
  int32_t transaction_state_log_segment_bytes = 0;
  int32_t transaction_max_timeout_ms = 0;       // the longest transaction.timeout.ms accepted
  int32_t transactional_id_expiration_ms = 0;  // idle ids are removed after this
  // How often the coordinator aborts transactions past their timeout, and
  // removes expired ids (transaction.remove.expired.transaction.cleanup.interval.ms).
  int32_t transaction_abort_interval_ms = 0;
  int32_t transactional_id_removal_interval_ms = 0;
  // Share groups (docs/share_groups.md): the group.share.* defaults every
  // share group starts from (a group's share.* overrides win), and the
  // layout of __share_group_state when it is created.
  int32_t group_share_record_lock_duration_ms = 0;
  int16_t group_share_delivery_count_limit = 0;
  int32_t group_share_partition_max_record_locks = 0;
  int32_t group_share_session_timeout_ms = 0;
  int32_t group_share_heartbeat_interval_ms = 0;
  int32_t group_share_max_size = 0;
  int32_t share_state_topic_num_partitions = 0;
  int16_t share_state_topic_replication_factor = 0;
  int32_t share_state_topic_min_isr = 0;
  int32_t share_state_topic_segment_bytes = 0;
  std::optional<host_port> metrics_listener;  // sluice.metrics.listener; empty string: disabled
  int64_t retention_headroom_alert_ms = 0;    // sluice.retention.headroom.alert.ms
  int64_t write_rate_window_ms = 0;           // sluice.metrics.write.rate.window.ms
  // The broker's values of every topic setting: the config of a topic
  // without overrides.
  topic_config topic_defaults;

  // The explicit values behind the fields, per level, keyed by broker key.
  // DescribeConfigs reports them as sources; dynamic.h alters the dynamic ones.
  config_map static_values;           // file and command line (STATIC_BROKER_CONFIG)
  config_map dynamic_default_values;  // cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG)
  config_map dynamic_broker_values;   // this node (DYNAMIC_BROKER_CONFIG)

  // A member of a cluster whose metadata lives in etcd, rather than a
  // single node.
  bool cluster_mode() const { return !etcd_endpoints.empty(); }
  // The TTL of this broker's etcd lease: the session timeout rounded up to
  // whole seconds, etcd's unit.
  int64_t etcd_lease_ttl_seconds() const { return (int64_t{etcd_session_timeout_ms} + 999) / 1000; }
};

// What `sluice serve` was asked on its command line.
struct serve_args {
  bool help = false;
  std::optional<std::string> config_path;  // --config FILE
  // --KEY VALUE or --KEY=VALUE, in order; a later one wins.
  std::vector<std::pair<std::string, std::string>> overrides;
};

// Parses the arguments after `serve`. Accepts --help/-h, --config FILE,
// --config=FILE, --KEY VALUE and --KEY=VALUE where KEY is a broker key of
// the schema. Unknown keys are refused here.
result<serve_args> parse_serve_args(std::span<const std::string> args);
// The arguments after "serve" as main() has them: argv[0] is the first argument.
result<serve_args> parse_serve_args(int argc, const char* const* argv);

// Reads the TOML file (if any), applies the overrides, validates everything
// and builds the config. Keys in the file are Kafka's dotted names, written
// bare (log.retention.ms = 1), quoted ("log.retention.ms" = 1) or as tables
// ([log] retention.ms = 1); docs/configuration.md has the details.
result<broker_config> load_broker_config(const serve_args& args);

// The same from already-parsed pieces (tests, tools).
result<config_map> parse_toml_config(std::string_view toml_text, std::string_view origin);
result<broker_config> make_broker_config(config_map static_values,
                                         config_map dynamic_default_values = {},
                                         config_map dynamic_broker_values = {});

// The `sluice serve --help` text: usage, then every setting with its type,
// default, range or allowed values, topic synonym and doc line.
std::string render_help();

}  // namespace sluice::config
