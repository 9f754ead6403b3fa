#pragma once

// Kafka's wire error codes (the subset Sluice sends), and the one table that
// maps Sluice's internal errc values onto them. Handlers never invent codes
// for internal failures: they call to_kafka_error().

#include <cstdint>
#include <string_view>

#include "base/error.h"

namespace sluice::kafka {

enum class error_code : int16_t {
  unknown_server_error = -1,
  none = 0,
  offset_out_of_range = 1,
  corrupt_message = 2,
  unknown_topic_or_partition = 3,
  invalid_fetch_size = 4,
  leader_not_available = 5,
  not_leader_or_follower = 6,
  request_timed_out = 7,
  message_too_large = 10,
  offset_metadata_too_large = 12,
  coordinator_load_in_progress = 14,
  coordinator_not_available = 15,
  not_coordinator = 16,
  invalid_topic_exception = 17,
  record_list_too_large = 18,
  not_enough_replicas = 19,
  invalid_required_acks = 21,
  illegal_generation = 22,
  inconsistent_group_protocol = 23,
  invalid_group_id = 24,
  unknown_member_id = 25,
  invalid_session_timeout = 26,
  rebalance_in_progress = 27,
  invalid_commit_offset_size = 28,
  invalid_timestamp = 32,
  unsupported_sasl_mechanism = 33,
  unsupported_version = 35,
  topic_already_exists = 36,
  invalid_partitions = 37,
  invalid_replication_factor = 38,
  invalid_replica_assignment = 39,
  invalid_config = 40,
  not_controller = 41,
  invalid_request = 42,
  unsupported_for_message_format = 43,
  policy_violation = 44,
  out_of_order_sequence_number = 45,
  duplicate_sequence_number = 46,
  invalid_producer_epoch = 47,
  invalid_txn_state = 48,
  invalid_producer_id_mapping = 49,
  invalid_transaction_timeout = 50,
  kafka_storage_error = 56,
  unknown_producer_id = 59,
  non_empty_group = 68,
  group_id_not_found = 69,
  fetch_session_id_not_found = 70,
  invalid_fetch_session_epoch = 71,
  topic_deletion_disabled = 73,
  fenced_leader_epoch = 74,
  unknown_leader_epoch = 75,
  unsupported_compression_type = 76,
  member_id_required = 79,
  group_max_size_reached = 81,
  fenced_instance_id = 82,
  group_subscribed_to_topic = 86,
  invalid_record = 87,
  producer_fenced = 90,
  resource_not_found = 91,
  unknown_topic_id = 100,
  transactional_id_not_found = 105,
};

constexpr int16_t to_wire(error_code e) { return static_cast<int16_t>(e); }

// Kafka's upper-case name of a code ("OFFSET_OUT_OF_RANGE"), for logs.
std::string_view error_name(error_code e);

// The single mapping from Sluice's internal errors to Kafka codes.
error_code to_kafka_error(errc e);

}  // namespace sluice::kafka
