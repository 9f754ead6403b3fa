#pragma once

// The project's error codes. Every expected failure inside Sluice is one of
// these values; to_kafka_error (protocol/error_code.h) is the single table
// that turns them into Kafka wire error codes at the edge (kafka/).

#include <cstdint>
#include <string>
#include <string_view>

namespace sluice {

enum class errc : int16_t {
  ok = 0,
  // Storage and the operating system.
  io_error,           // a read, write or sync failed; the partition goes offline for writes
  no_space,           // ENOSPC or EDQUOT
  corrupt_data,       // bytes on disk or from a client that fail validation (CRC, lengths)
  not_found,          // a file or directory that should exist does not
  already_exists,     // create of something that exists
  offset_out_of_range,  // an offset below the log start offset or above the log end offset
  log_offline,        // the partition was taken offline for writes after an I/O error
  unavailable,        // a service we depend on (etcd) is unreachable or timed out; retriable
  // Input validation.
  invalid_argument,   // a caller passed something outside the contract
  invalid_record,     // a record batch with a bad header (magic, count, lengths)
  unsupported_format, // an older message format (magic 0 or 1)
  message_too_large,  // a batch larger than message.max.bytes
  unsupported_compression,  // a record batch codec Kafka does not define (5-7)
  invalid_config,     // a configuration key or value that is refused
  record_list_too_large,  // a batch larger than the log's segment.bytes
  // Topics and partitions.
  invalid_topic,      // a name Kafka does not allow, or an internal topic clients may not touch
  unknown_topic_id,   // no topic has this id (KIP-516)
  not_leader,         // this broker does not (yet) lead the partition
  invalid_partitions,          // a partition count out of range or lowered
  invalid_replication_factor,  // a replication factor this cluster cannot meet
  policy_violation,   // allowed by Kafka, refused by this broker's limits
  not_coordinator,    // this broker does not (or no longer) coordinate the group's __consumer_offsets partition
  coordinator_not_available,  // the coordinator cannot write its records now (too few replicas, a write timed out); retriable
  invalid_replica_assignment,  // an explicit replica assignment that names no, unknown or repeated brokers
  not_controller,     // this broker is not the controller, or its view of a partition is older than the requester's
  fenced_leader_epoch,     // a leader epoch older than the current one, or a requester that does not lead
  not_enough_replicas,     // fewer in-sync replicas than min.insync.replicas (acks=all)
  not_enough_replicas_after_append,  // written, committed, but the ISR fell below min.insync.replicas meanwhile
  unknown_leader_epoch,    // a leader epoch newer than this broker knows (its metadata lags)
  invalid_update_version,  // a partition epoch that does not match the current one (AlterPartition)
  ineligible_replica,      // an ISR that names a broker which is not live (AlterPartition)
  election_not_needed,             // an asked-for election would not change the leader (ElectLeaders)
  preferred_leader_not_available,  // the preferred replica is not live or not in the ISR (ElectLeaders)
  eligible_leaders_not_available,  // no replica is live to lead, cleanly or not (ElectLeaders)
  // Producers.
  invalid_producer_epoch,  // a producer epoch older than the one known
  out_of_order_sequence,   // a sequence number that does not follow the last
  unknown_producer_id,     // a producer this leader has no state for, not starting at sequence 0
  invalid_txn_state,       // a request or batch the producer's transaction state does not allow
  // Transactions.
  producer_fenced,          // a newer producer with the same transactional id took over (an older epoch)
  invalid_producer_id_mapping,  // the producer id does not belong to the transactional id
  invalid_transaction_timeout,  // transaction.timeout.ms above transaction.max.timeout.ms, or not positive
  concurrent_transactions,  // the transaction is completing (markers being written); retriable
  coordinator_fenced,       // a marker from a coordinator at an older coordinator epoch
  coordinator_load_in_progress,  // the coordinator is replaying its partition; retriable
  transactional_id_not_found,    // no such transactional id (DescribeTransactions)
  transaction_abortable,    // the transaction must abort (a verification that failed, KIP-890)
  invalid_txn_marker,       // a control batch that is not a well-formed COMMIT or ABORT marker
  unstable_offset_commit,   // a committed offset a transaction may still replace (OffsetFetch require_stable); retriable
  // Share groups.
  invalid_record_state,     // an acknowledgement of a record the member does not hold (expired lock, another member's)
  share_session_not_found,  // a share session epoch > 0 for a session this broker does not have
  invalid_share_session_epoch,  // a share session epoch that is not the next one
  share_session_limit_reached,  // the broker holds as many share sessions as it may
  fenced_state_epoch,       // a share-partition state write from an older state epoch
  // Protocol decoding.
  malformed,          // a request that cannot be decoded
  unsupported_version,
  // Shutdown.
  shutting_down,
  // A failure of this broker that no more precise code names (Kafka's
  // UNKNOWN_SERVER_ERROR), such as a coordinator record the log refuses
  // as too large.
  internal_error,
};

std::string_view errc_name(errc e);

}  // namespace sluice
