#pragma once

// The effective configuration of one topic: every topic setting resolved
// (topic override, else the broker's value for its synonym, else the
// default). Computed by config::effective_topic_config (dynamic.h); a plain
// value, copied into each partition and replaced when AlterConfigs changes it.

#include <cstdint>
#include <string_view>

namespace sluice::config {

enum class compression_type : uint8_t {
  producer,  // keep whatever codec the producer used (Kafka's default)
  uncompressed,
  gzip,
  snappy,
  lz4,
  zstd,
};

enum class timestamp_type : uint8_t {
  create_time,      // "CreateTime": the producer's timestamp is kept
  log_append_time,  // "LogAppendTime": the broker stamps the batch at append
};

std::string_view compression_type_name(compression_type c);  // Kafka spelling
std::string_view timestamp_type_name(timestamp_type t);      // Kafka spelling

struct topic_config {
  // cleanup.policy: at least one of the two is true.
  bool cleanup_delete = true;
  bool cleanup_compact = false;
  compression_type compression = compression_type::producer;
  int64_t delete_retention_ms = 0;   // tombstones kept this long after cleaning
  int64_t file_delete_delay_ms = 0;  // renamed segment files removed after this
  // Kafka's defaults (off): a topic_config built by hand, as tests and
  // tools do, must not sync after every append.
  int64_t flush_messages = INT64_MAX;  // fsync at least every N messages, whatever the acks
  int64_t flush_ms = INT64_MAX;        // nothing stays unsynced longer than N ms, whatever the acks
  int32_t index_interval_bytes = 0;  // one offset index entry per this much log
  int64_t max_compaction_lag_ms = 0;
  int32_t max_message_bytes = 0;  // largest record batch accepted
  timestamp_type message_timestamp_type = timestamp_type::create_time;
  double min_cleanable_dirty_ratio = 0;
  int64_t min_compaction_lag_ms = 0;
  int32_t min_insync_replicas = 0;
  int64_t retention_bytes = 0;  // -1: no size limit
  int64_t retention_ms = 0;     // -1: no time limit
  int32_t segment_bytes = 0;
  int32_t segment_index_bytes = 0;
  int64_t segment_ms = 0;
  bool unclean_leader_election_enable = false;
  // Sluice: acks=all is answered only after fsync (group commit). false
  // answers acks=all once written, for users who choose speed.
  bool fsync_enable = true;

  bool operator==(const topic_config&) const = default;
};

}  // namespace sluice::config
