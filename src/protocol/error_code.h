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
  not_enough_replicas_after_append = 20,
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
  concurrent_transactions = 51,
  transaction_coordinator_fenced = 52,
  transactional_id_authorization_failed = 53,
  operation_not_attempted = 55,
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
  stale_broker_epoch = 77,
  member_id_required = 79,
  offset_not_available = 78,
  preferred_leader_not_available = 80,
  group_max_size_reached = 81,
  fenced_instance_id = 82,
  eligible_leaders_not_available = 83,
  election_not_needed = 84,
  group_subscribed_to_topic = 86,
  invalid_record = 87,
  unstable_offset_commit = 88,
  producer_fenced = 90,
  resource_not_found = 91,
  invalid_update_version = 95,
  unknown_topic_id = 100,
  inconsistent_topic_id = 103,
  transactional_id_not_found = 105,
  fetch_session_topic_id_error = 106,
  ineligible_replica = 107,
  fenced_member_epoch = 110,
  unreleased_instance_id = 111,
  unsupported_assignor = 112,
  stale_member_epoch = 113,
  mismatched_endpoint_type = 114,
  unsupported_endpoint_type = 115,
  transaction_abortable = 120,
  invalid_record_state = 121,
  share_session_not_found = 122,
  invalid_share_session_epoch = 123,
  fenced_state_epoch = 124,
  share_session_limit_reached = 133,
};

constexpr int16_t to_wire(error_code e) { return static_cast<int16_t>(e); }

// Kafka's upper-case name of a code ("OFFSET_OUT_OF_RANGE"), for logs.
// The single mapping from Sluice's internal errors to Kafka codes is
// to_kafka_error(), below.


inline std::string_view error_name(error_code e) {
  switch (e) {
#define SLUICE_NAME(x, s) \
  case error_code::x: return s;
    SLUICE_NAME(unknown_server_error, "UNKNOWN_SERVER_ERROR")
    SLUICE_NAME(none, "NONE")
    SLUICE_NAME(offset_out_of_range, "OFFSET_OUT_OF_RANGE")
    SLUICE_NAME(corrupt_message, "CORRUPT_MESSAGE")
    SLUICE_NAME(unknown_topic_or_partition, "UNKNOWN_TOPIC_OR_PARTITION")
    SLUICE_NAME(invalid_fetch_size, "INVALID_FETCH_SIZE")
    SLUICE_NAME(leader_not_available, "LEADER_NOT_AVAILABLE")
    SLUICE_NAME(not_leader_or_follower, "NOT_LEADER_OR_FOLLOWER")
    SLUICE_NAME(request_timed_out, "REQUEST_TIMED_OUT")
    SLUICE_NAME(message_too_large, "MESSAGE_TOO_LARGE")
    SLUICE_NAME(offset_metadata_too_large, "OFFSET_METADATA_TOO_LARGE")
    SLUICE_NAME(coordinator_load_in_progress, "COORDINATOR_LOAD_IN_PROGRESS")
    SLUICE_NAME(coordinator_not_available, "COORDINATOR_NOT_AVAILABLE")
    SLUICE_NAME(not_coordinator, "NOT_COORDINATOR")
    SLUICE_NAME(invalid_topic_exception, "INVALID_TOPIC_EXCEPTION")
    SLUICE_NAME(record_list_too_large, "RECORD_LIST_TOO_LARGE")
    SLUICE_NAME(not_enough_replicas, "NOT_ENOUGH_REPLICAS")
    SLUICE_NAME(not_enough_replicas_after_append, "NOT_ENOUGH_REPLICAS_AFTER_APPEND")
    SLUICE_NAME(invalid_required_acks, "INVALID_REQUIRED_ACKS")
    SLUICE_NAME(illegal_generation, "ILLEGAL_GENERATION")
    SLUICE_NAME(inconsistent_group_protocol, "INCONSISTENT_GROUP_PROTOCOL")
    SLUICE_NAME(invalid_group_id, "INVALID_GROUP_ID")
    SLUICE_NAME(unknown_member_id, "UNKNOWN_MEMBER_ID")
    SLUICE_NAME(invalid_session_timeout, "INVALID_SESSION_TIMEOUT")
    SLUICE_NAME(rebalance_in_progress, "REBALANCE_IN_PROGRESS")
    SLUICE_NAME(invalid_commit_offset_size, "INVALID_COMMIT_OFFSET_SIZE")
    SLUICE_NAME(invalid_timestamp, "INVALID_TIMESTAMP")
    SLUICE_NAME(unsupported_sasl_mechanism, "UNSUPPORTED_SASL_MECHANISM")
    SLUICE_NAME(unsupported_version, "UNSUPPORTED_VERSION")
    SLUICE_NAME(topic_already_exists, "TOPIC_ALREADY_EXISTS")
    SLUICE_NAME(invalid_partitions, "INVALID_PARTITIONS")
    SLUICE_NAME(invalid_replication_factor, "INVALID_REPLICATION_FACTOR")
    SLUICE_NAME(invalid_replica_assignment, "INVALID_REPLICA_ASSIGNMENT")
    SLUICE_NAME(invalid_config, "INVALID_CONFIG")
    SLUICE_NAME(not_controller, "NOT_CONTROLLER")
    SLUICE_NAME(invalid_request, "INVALID_REQUEST")
    SLUICE_NAME(unsupported_for_message_format, "UNSUPPORTED_FOR_MESSAGE_FORMAT")
    SLUICE_NAME(policy_violation, "POLICY_VIOLATION")
    SLUICE_NAME(out_of_order_sequence_number, "OUT_OF_ORDER_SEQUENCE_NUMBER")
    SLUICE_NAME(duplicate_sequence_number, "DUPLICATE_SEQUENCE_NUMBER")
    SLUICE_NAME(invalid_producer_epoch, "INVALID_PRODUCER_EPOCH")
    SLUICE_NAME(invalid_txn_state, "INVALID_TXN_STATE")
    SLUICE_NAME(invalid_producer_id_mapping, "INVALID_PRODUCER_ID_MAPPING")
    SLUICE_NAME(invalid_transaction_timeout, "INVALID_TRANSACTION_TIMEOUT")
    SLUICE_NAME(concurrent_transactions, "CONCURRENT_TRANSACTIONS")
    SLUICE_NAME(transaction_coordinator_fenced, "TRANSACTION_COORDINATOR_FENCED")
    SLUICE_NAME(transactional_id_authorization_failed, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
    SLUICE_NAME(kafka_storage_error, "KAFKA_STORAGE_ERROR")
    SLUICE_NAME(unknown_producer_id, "UNKNOWN_PRODUCER_ID")
    SLUICE_NAME(non_empty_group, "NON_EMPTY_GROUP")
    SLUICE_NAME(group_id_not_found, "GROUP_ID_NOT_FOUND")
    SLUICE_NAME(fetch_session_id_not_found, "FETCH_SESSION_ID_NOT_FOUND")
    SLUICE_NAME(invalid_fetch_session_epoch, "INVALID_FETCH_SESSION_EPOCH")
    SLUICE_NAME(topic_deletion_disabled, "TOPIC_DELETION_DISABLED")
    SLUICE_NAME(fenced_leader_epoch, "FENCED_LEADER_EPOCH")
    SLUICE_NAME(unknown_leader_epoch, "UNKNOWN_LEADER_EPOCH")
    SLUICE_NAME(unsupported_compression_type, "UNSUPPORTED_COMPRESSION_TYPE")
    SLUICE_NAME(stale_broker_epoch, "STALE_BROKER_EPOCH")
    SLUICE_NAME(member_id_required, "MEMBER_ID_REQUIRED")
    SLUICE_NAME(offset_not_available, "OFFSET_NOT_AVAILABLE")
    SLUICE_NAME(preferred_leader_not_available, "PREFERRED_LEADER_NOT_AVAILABLE")
    SLUICE_NAME(group_max_size_reached, "GROUP_MAX_SIZE_REACHED")
    SLUICE_NAME(fenced_instance_id, "FENCED_INSTANCE_ID")
    SLUICE_NAME(eligible_leaders_not_available, "ELIGIBLE_LEADERS_NOT_AVAILABLE")
    SLUICE_NAME(election_not_needed, "ELECTION_NOT_NEEDED")
    SLUICE_NAME(group_subscribed_to_topic, "GROUP_SUBSCRIBED_TO_TOPIC")
    SLUICE_NAME(invalid_record, "INVALID_RECORD")
    SLUICE_NAME(unstable_offset_commit, "UNSTABLE_OFFSET_COMMIT")
    SLUICE_NAME(producer_fenced, "PRODUCER_FENCED")
    SLUICE_NAME(resource_not_found, "RESOURCE_NOT_FOUND")
    SLUICE_NAME(invalid_update_version, "INVALID_UPDATE_VERSION")
    SLUICE_NAME(unknown_topic_id, "UNKNOWN_TOPIC_ID")
    SLUICE_NAME(inconsistent_topic_id, "INCONSISTENT_TOPIC_ID")
    SLUICE_NAME(transactional_id_not_found, "TRANSACTIONAL_ID_NOT_FOUND")
    SLUICE_NAME(operation_not_attempted, "OPERATION_NOT_ATTEMPTED")
    SLUICE_NAME(transaction_abortable, "TRANSACTION_ABORTABLE")
    SLUICE_NAME(fetch_session_topic_id_error, "FETCH_SESSION_TOPIC_ID_ERROR")
    SLUICE_NAME(ineligible_replica, "INELIGIBLE_REPLICA")
    SLUICE_NAME(fenced_member_epoch, "FENCED_MEMBER_EPOCH")
    SLUICE_NAME(unreleased_instance_id, "UNRELEASED_INSTANCE_ID")
    SLUICE_NAME(unsupported_assignor, "UNSUPPORTED_ASSIGNOR")
    SLUICE_NAME(stale_member_epoch, "STALE_MEMBER_EPOCH")
    SLUICE_NAME(mismatched_endpoint_type, "MISMATCHED_ENDPOINT_TYPE")
    SLUICE_NAME(unsupported_endpoint_type, "UNSUPPORTED_ENDPOINT_TYPE")
    SLUICE_NAME(invalid_record_state, "INVALID_RECORD_STATE")
    SLUICE_NAME(share_session_not_found, "SHARE_SESSION_NOT_FOUND")
    SLUICE_NAME(invalid_share_session_epoch, "INVALID_SHARE_SESSION_EPOCH")
    SLUICE_NAME(fenced_state_epoch, "FENCED_STATE_EPOCH")
    SLUICE_NAME(share_session_limit_reached, "SHARE_SESSION_LIMIT_REACHED")
#undef SLUICE_NAME
  }
  return "UNKNOWN";
}

inline error_code to_kafka_error(errc e);

// An internal error as it goes on the wire.
inline int16_t to_wire(errc e) { return to_wire(to_kafka_error(e)); }

inline error_code to_kafka_error(errc e) {
  switch (e) {
    case errc::ok: return error_code::none;
    case errc::io_error:
    case errc::no_space:
    case errc::log_offline: return error_code::kafka_storage_error;
    case errc::corrupt_data: return error_code::corrupt_message;
    case errc::not_found: return error_code::unknown_topic_or_partition;
    case errc::already_exists: return error_code::topic_already_exists;
    case errc::offset_out_of_range: return error_code::offset_out_of_range;
    case errc::unavailable: return error_code::request_timed_out;  // retriable
    case errc::invalid_argument: return error_code::invalid_request;
    case errc::invalid_record: return error_code::invalid_record;
    case errc::unsupported_format: return error_code::invalid_record;
    case errc::message_too_large: return error_code::message_too_large;
    case errc::unsupported_compression: return error_code::unsupported_compression_type;
    case errc::invalid_config: return error_code::invalid_config;
    case errc::malformed: return error_code::invalid_request;
    case errc::unsupported_version: return error_code::unsupported_version;
    case errc::shutting_down: return error_code::not_leader_or_follower;
    case errc::record_list_too_large: return error_code::record_list_too_large;
    case errc::invalid_topic: return error_code::invalid_topic_exception;
    case errc::unknown_topic_id: return error_code::unknown_topic_id;
    case errc::not_leader: return error_code::not_leader_or_follower;
    case errc::invalid_partitions: return error_code::invalid_partitions;
    case errc::invalid_replication_factor: return error_code::invalid_replication_factor;
    case errc::policy_violation: return error_code::policy_violation;
    case errc::not_coordinator: return error_code::not_coordinator;
    case errc::coordinator_not_available: return error_code::coordinator_not_available;
    case errc::internal_error: return error_code::unknown_server_error;
    case errc::invalid_replica_assignment: return error_code::invalid_replica_assignment;
    case errc::not_controller: return error_code::not_controller;
    case errc::fenced_leader_epoch: return error_code::fenced_leader_epoch;
    case errc::not_enough_replicas: return error_code::not_enough_replicas;
    case errc::not_enough_replicas_after_append: return error_code::not_enough_replicas_after_append;
    case errc::unknown_leader_epoch: return error_code::unknown_leader_epoch;
    case errc::invalid_update_version: return error_code::invalid_update_version;
    case errc::ineligible_replica: return error_code::ineligible_replica;
    case errc::election_not_needed: return error_code::election_not_needed;
    case errc::preferred_leader_not_available: return error_code::preferred_leader_not_available;
    case errc::eligible_leaders_not_available: return error_code::eligible_leaders_not_available;
    case errc::invalid_producer_epoch: return error_code::invalid_producer_epoch;
    case errc::out_of_order_sequence: return error_code::out_of_order_sequence_number;
    case errc::unknown_producer_id: return error_code::unknown_producer_id;
    case errc::invalid_txn_state: return error_code::invalid_txn_state;
    case errc::producer_fenced: return error_code::producer_fenced;
    case errc::invalid_producer_id_mapping: return error_code::invalid_producer_id_mapping;
    case errc::invalid_transaction_timeout: return error_code::invalid_transaction_timeout;
    case errc::concurrent_transactions: return error_code::concurrent_transactions;
    case errc::coordinator_fenced: return error_code::transaction_coordinator_fenced;
    case errc::coordinator_load_in_progress: return error_code::coordinator_load_in_progress;
    case errc::transactional_id_not_found: return error_code::transactional_id_not_found;
    case errc::transaction_abortable: return error_code::transaction_abortable;
    case errc::invalid_txn_marker: return error_code::invalid_record;
    case errc::unstable_offset_commit: return error_code::unstable_offset_commit;
    case errc::invalid_record_state: return error_code::invalid_record_state;
    case errc::share_session_not_found: return error_code::share_session_not_found;
    case errc::invalid_share_session_epoch: return error_code::invalid_share_session_epoch;
    case errc::share_session_limit_reached: return error_code::share_session_limit_reached;
    case errc::fenced_state_epoch: return error_code::fenced_state_epoch;
  }
  return error_code::unknown_server_error;
}


// A failed write to __consumer_offsets, as Kafka's group coordinator
// answers it (GroupMetadataManager's storeOffsets and storeGroup):
// - the partition moved to another coordinator meanwhile, or this broker
//   does not lead it (NOT_LEADER_OR_FOLLOWER), or its log failed
//   (KAFKA_STORAGE_ERROR: leadership moves off it): NOT_COORDINATOR, so
//   the client looks for the coordinator again;
// - not committed within offsets.commit.timeout.ms (errc::unavailable, the
//   delayed produce's REQUEST_TIMED_OUT): REQUEST_TIMED_OUT for a commit,
//   which Kafka passes through, and COORDINATOR_NOT_AVAILABLE for a
//   group's record;
// - a record too large: the commit's fault (INVALID_COMMIT_OFFSET_SIZE) or,
//   for a group's own record, the broker's (UNKNOWN_SERVER_ERROR);
// - a transactional commit (TxnOffsetCommit) the partition refuses for its
//   producer (an epoch older than the partition knows: the producer was
//   fenced; or the transaction's state, once verified) answers that
//   producer error, as Kafka passes it through, and is otherwise answered
//   as a commit;
// - anything else (too few in-sync replicas, before or after the append; a
//   partition missing here) means the coordinator cannot write now:
//   COORDINATOR_NOT_AVAILABLE, retriable.
enum class group_write { group_metadata, offset_commit, txn_offset_commit };
inline error_code to_group_write_error(errc e, group_write w) {
  if (w == group_write::txn_offset_commit) {
    switch (e) {
      case errc::invalid_producer_epoch:
      case errc::producer_fenced:
      case errc::invalid_txn_state:
      case errc::invalid_producer_id_mapping:
      case errc::concurrent_transactions:
      case errc::transaction_abortable: return to_kafka_error(e);
      default: w = group_write::offset_commit;
    }
  }
  switch (e) {
    case errc::not_coordinator:
    case errc::not_leader:
    case errc::fenced_leader_epoch:
    case errc::io_error:
    case errc::no_space:
    case errc::log_offline: return error_code::not_coordinator;
    case errc::unavailable:
      return w == group_write::offset_commit ? error_code::request_timed_out : error_code::coordinator_not_available;
    case errc::message_too_large:
    case errc::record_list_too_large:
      return w == group_write::offset_commit ? error_code::invalid_commit_offset_size
                                             : error_code::unknown_server_error;
    default: return error_code::coordinator_not_available;
  }
}

}  // namespace sluice::kafka
