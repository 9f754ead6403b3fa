#pragma once

// The keys and values the transaction coordinator writes to
// __transaction_state (docs/transactions.md, "Records", has the grammar),
// and the transactional id -> partition rule. The layout is Kafka's
// TransactionLogKey (version 0) and TransactionLogValue (versions 0 and 1;
// we write 1, the flexible one), so a tool that reads Kafka's
// __transaction_state reads ours. Pure functions over bytes; decoding treats
// its input as untrusted (a corrupt or foreign record is an error value,
// never an assertion).

#include <compare>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace sluice::txn {

inline constexpr std::string_view transaction_state_topic = "__transaction_state";

// Kafka's sentinels for "no producer id" and "no epoch".
inline constexpr int64_t no_producer_id = -1;
inline constexpr int16_t no_producer_epoch = -1;

// The partition of __transaction_state that holds `transactional_id`:
// Kafka's Utils.abs(hashCode) % partitions (base/java_hash.h), the same
// rule as groups. `partitions` > 0.
int32_t partition_for(std::string_view transactional_id, int32_t partitions);

// Kafka's TransactionState ids, as stored in the record's status byte.
enum class txn_state : int8_t {
  empty = 0,
  ongoing = 1,
  prepare_commit = 2,
  prepare_abort = 3,
  complete_commit = 4,
  complete_abort = 5,
  dead = 6,
  prepare_epoch_fence = 7,
};
// Kafka's name of a state ("PrepareCommit"), as DescribeTransactions and
// ListTransactions carry it.
std::string_view state_name(txn_state s);
// The state a name denotes; nullopt for a name Kafka does not define.
std::optional<txn_state> state_from_name(std::string_view name);

// Kafka's transaction versions (the transaction.version feature and the
// record's ClientTransactionVersion): 0 and 1 end a transaction at the epoch
// it ran at; 2 (KIP-890 part 2) bumps the epoch at every end.
enum class txn_version : int16_t { tv0 = 0, tv1 = 1, tv2 = 2 };
inline bool bumps_epoch_at_end(txn_version v) { return static_cast<int16_t>(v) >= 2; }

struct topic_partition {
  std::string topic;
  int32_t partition = 0;
  bool operator==(const topic_partition&) const = default;
  auto operator<=>(const topic_partition&) const = default;
};
// Partitions ordered by topic then index, so records and answers list them
// in one order whatever order requests named them in.
using partition_set = std::set<topic_partition>;

// TransactionLogValue: one transactional id's metadata as of the
// transition the record makes durable.
struct txn_log_value {
  int64_t producer_id = no_producer_id;
  // The producer id before this transition (tag 0); -1: none.
  int64_t previous_producer_id = no_producer_id;
  // The producer id the next transaction moves to when this one ends
  // (transaction version 2, epoch exhausted) (tag 1); -1: none.
  int64_t next_producer_id = no_producer_id;
  int16_t producer_epoch = no_producer_epoch;
  // The epoch before the last bump, so a retried InitProducerId or EndTxn
  // whose answer was lost is recognised (Sluice's tag, below); -1: none.
  int16_t last_producer_epoch = no_producer_epoch;
  int32_t timeout_ms = 0;
  txn_state state = txn_state::empty;
  // Written as null for Empty, as Kafka does; read back empty.
  partition_set partitions;
  int64_t last_update_ms = 0;  // wall-clock
  int64_t start_ms = -1;       // wall-clock; -1: no transaction started
  txn_version client_version = txn_version::tv0;  // tag 2
  bool operator==(const txn_log_value&) const = default;
};

// The value version written (Kafka's highest: flexible, with tagged fields).
inline constexpr int16_t txn_value_version = 1;
// The tagged field Sluice adds to version 1 for last_producer_epoch. Kafka
// keeps that epoch in memory only; we write it so that a KIP-360 retry
// whose answer was lost is still recognised after a coordinator failover.
// Kafka's readers skip tags they do not know, and Kafka numbers its tags
// from 0 up, so a tag this far out does not meet one of theirs.
inline constexpr uint32_t last_producer_epoch_tag = 10'000;

std::vector<uint8_t> encode_key(std::string_view transactional_id);
std::vector<uint8_t> encode_value(const txn_log_value& v);

// errc::unsupported_format for a key or value version this code does not
// know (a newer writer's record: the caller skips it with a warning);
// errc::corrupt_data for bytes that do not parse (lengths past the end, a
// state byte Kafka does not define, a known tagged field of the wrong size,
// trailing bytes).
result<std::string> decode_key(std::span<const uint8_t> bytes);
result<txn_log_value> decode_value(std::span<const uint8_t> bytes);

}  // namespace sluice::txn
