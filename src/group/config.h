#pragma once

// The group coordinator's settings, taken from the broker's config. Which of
// them may change at runtime is coordinator::update_config's contract.

#include <cstdint>

namespace sluice::config {
struct broker_config;
}

namespace sluice::group {

struct coordinator_config {
  int32_t min_session_timeout_ms = 6000;
  int32_t max_session_timeout_ms = 1'800'000;
  int32_t max_group_size = 10'000;
  int32_t initial_rebalance_delay_ms = 3000;
  int32_t num_partitions = 50;  // of __consumer_offsets
  int64_t offsets_retention_ms = 7ll * 24 * 3600 * 1000;
  int64_t offsets_retention_check_interval_ms = 600'000;
  // offsets.commit.timeout.ms: how long a write to __consumer_offsets may
  // wait to be committed (Kafka's default); fixed at start, as in Kafka.
  int32_t offsets_commit_timeout_ms = 5000;

  static coordinator_config from(const config::broker_config& b);
};

}  // namespace sluice::group
