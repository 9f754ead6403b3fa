#include "base/error.h"

namespace sluice {

std::string_view errc_name(errc e) {
  switch (e) {
    case errc::ok: return "ok";
    case errc::io_error: return "io_error";
    case errc::no_space: return "no_space";
    case errc::corrupt_data: return "corrupt_data";
    case errc::not_found: return "not_found";
    case errc::already_exists: return "already_exists";
    case errc::offset_out_of_range: return "offset_out_of_range";
    case errc::log_offline: return "log_offline";
    case errc::unavailable: return "unavailable";
    case errc::invalid_argument: return "invalid_argument";
    case errc::invalid_record: return "invalid_record";
    case errc::unsupported_format: return "unsupported_format";
    case errc::message_too_large: return "message_too_large";
    case errc::invalid_config: return "invalid_config";
    case errc::malformed: return "malformed";
    case errc::unsupported_version: return "unsupported_version";
    case errc::shutting_down: return "shutting_down";
    case errc::internal_error: return "internal_error";
    case errc::coordinator_not_available: return "coordinator_not_available";
    case errc::unsupported_compression: return "unsupported_compression";
    case errc::record_list_too_large: return "record_list_too_large";
    case errc::invalid_topic: return "invalid_topic";
    case errc::unknown_topic_id: return "unknown_topic_id";
    case errc::not_leader: return "not_leader";
    case errc::invalid_partitions: return "invalid_partitions";
    case errc::invalid_replication_factor: return "invalid_replication_factor";
    case errc::policy_violation: return "policy_violation";
    case errc::not_coordinator: return "not_coordinator";
    case errc::invalid_replica_assignment: return "invalid_replica_assignment";
    case errc::not_controller: return "not_controller";
    case errc::fenced_leader_epoch: return "fenced_leader_epoch";
    case errc::not_enough_replicas: return "not_enough_replicas";
    case errc::not_enough_replicas_after_append: return "not_enough_replicas_after_append";
    case errc::unknown_leader_epoch: return "unknown_leader_epoch";
    case errc::invalid_update_version: return "invalid_update_version";
    case errc::ineligible_replica: return "ineligible_replica";
    case errc::election_not_needed: return "election_not_needed";
    case errc::preferred_leader_not_available: return "preferred_leader_not_available";
    case errc::eligible_leaders_not_available: return "eligible_leaders_not_available";
    case errc::invalid_producer_epoch: return "invalid_producer_epoch";
    case errc::out_of_order_sequence: return "out_of_order_sequence";
    case errc::unknown_producer_id: return "unknown_producer_id";
    case errc::invalid_txn_state: return "invalid_txn_state";
    case errc::producer_fenced: return "producer_fenced";
    case errc::invalid_producer_id_mapping: return "invalid_producer_id_mapping";
    case errc::invalid_transaction_timeout: return "invalid_transaction_timeout";
    case errc::concurrent_transactions: return "concurrent_transactions";
    case errc::coordinator_fenced: return "coordinator_fenced";
    case errc::coordinator_load_in_progress: return "coordinator_load_in_progress";
    case errc::transactional_id_not_found: return "transactional_id_not_found";
    case errc::transaction_abortable: return "transaction_abortable";
    case errc::unstable_offset_commit: return "unstable_offset_commit";
    case errc::invalid_txn_marker: return "invalid_txn_marker";
    case errc::invalid_record_state: return "invalid_record_state";
    case errc::share_session_not_found: return "share_session_not_found";
    case errc::invalid_share_session_epoch: return "invalid_share_session_epoch";
    case errc::share_session_limit_reached: return "share_session_limit_reached";
    case errc::fenced_state_epoch: return "fenced_state_epoch";
  }
  return "unknown";
}

}  // namespace sluice
