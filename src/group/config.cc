#include "group/config.h"

#include "config/broker_config.h"

namespace sluice::group {

coordinator_config coordinator_config::from(const config::broker_config& b) {
  coordinator_config c;
  c.min_session_timeout_ms = b.group_min_session_timeout_ms;
  c.max_session_timeout_ms = b.group_max_session_timeout_ms;
  c.max_group_size = b.group_max_size;
  c.initial_rebalance_delay_ms = b.group_initial_rebalance_delay_ms;
  c.num_partitions = b.offsets_topic_num_partitions;
  c.offsets_retention_ms = int64_t{b.offsets_retention_minutes} * 60'000;
  c.offsets_retention_check_interval_ms = b.offsets_retention_check_interval_ms;
  c.offsets_commit_timeout_ms = b.offsets_commit_timeout_ms;
  return c;
}

}  // namespace sluice::group
