#pragma once

// One transactional id's metadata and Kafka's state machine over it
// (Kafka's TransactionMetadata). The durable part is exactly what the id's
// newest record in __transaction_state says (txn_log_value); the rest is
// memory only: the transition whose record is being written (Kafka's
// pendingState) and a flag Kafka keeps for a failed epoch fence.
//
// A transition is prepared (prepare_* below: the target value, computed from
// the current one, becomes the pending transit) and, once its record is
// durable, applied (apply_pending: the metadata becomes the transit). Replay
// applies the same values (apply_record), so the state after a restart is
// the state before it. One transition is pending at a time; preparing
// another while one is pending is a bug (an assertion), so callers check
// has_pending() first and answer CONCURRENT_TRANSACTIONS.
//
// States and the states each may be entered from (Kafka's
// validPreviousStates):
//
//   Empty              <- Empty, CompleteCommit, CompleteAbort   (InitProducerId)
//   Ongoing            <- Empty, Ongoing, CompleteCommit, CompleteAbort
//                                                      (AddPartitionsToTxn, AddOffsetsToTxn)
//   PrepareCommit      <- Ongoing                                 (EndTxn commit)
//   PrepareAbort       <- Ongoing, PrepareEpochFence, and with transaction
//                         version 2 Empty, CompleteCommit, CompleteAbort
//                                                      (EndTxn abort, fencing, timeouts)
//   CompleteCommit     <- PrepareCommit                           (markers written)
//   CompleteAbort      <- PrepareAbort                            (markers written)
//   Dead               <- Empty, CompleteCommit, CompleteAbort    (id expiry: a tombstone)
//   PrepareEpochFence  <- Ongoing     (never written: the fence is folded
//                                      into the PrepareAbort record it leads to)
//
// Not thread-safe: the coordinator owns every txn_metadata and calls these
// with its own serialisation.

#include <cstdint>
#include <optional>
#include <string>

#include "base/result.h"
#include "txn/records.h"

namespace sluice::txn {

// Kafka's epochs are int16; the last one is kept back so that the
// coordinator can always fence a producer (Kafka's isEpochExhausted).
inline constexpr int16_t max_producer_epoch = INT16_MAX;
inline bool epoch_exhausted(int16_t epoch) { return epoch >= max_producer_epoch - 1; }

// Whether `to` may follow `from` (the table above).
bool valid_transition(txn_state from, txn_state to, txn_version version);

class txn_metadata {
 public:
  // A new id: Empty at epoch -1 (the first InitProducerId makes it 0).
  txn_metadata(std::string transactional_id, int64_t producer_id, int32_t timeout_ms, int64_t now_ms);
  // An id as its newest record says (replay).
  txn_metadata(std::string transactional_id, txn_log_value durable);

  const std::string& transactional_id() const { return id_; }
  // What the newest applied record says (for a new id, its defaults; after
  // a version 0/1 fence whose record failed, with the epoch that fence
  // bumped in memory, as Kafka keeps it).
  const txn_log_value& durable() const { return v_; }
  txn_state state() const { return v_.state; }
  int64_t producer_id() const { return v_.producer_id; }
  int16_t producer_epoch() const { return v_.producer_epoch; }

  bool has_pending() const { return pending_.has_value(); }
  // The transition being written; nullopt when none.
  const std::optional<txn_log_value>& pending() const { return pending_; }
  std::optional<txn_state> pending_state() const {
    return pending_ ? std::optional<txn_state>(pending_->state) : std::nullopt;
  }

  // ---- Transitions (Kafka's prepare* methods) --------------------------------
  // Each returns the target value and makes it the pending transit. Its
  // previous_producer_id is the producer id before the transition.

  // InitProducerId on an id with no transaction open: the epoch bumped.
  // `expected_epoch` is the epoch a KIP-360 request carries: the current
  // one (bumped; the old becomes last_producer_epoch), the last one (a
  // retry whose answer was lost: the current epoch again, unbumped), or any
  // other (errc::producer_fenced, nothing pending).
  result<txn_log_value> prepare_increment_epoch(int32_t timeout_ms, std::optional<int16_t> expected_epoch,
                                                int64_t now_ms);
  // InitProducerId when the epoch is exhausted: `new_producer_id` at epoch
  // 0; with `record_last_epoch` (a KIP-360 request) the old epoch is kept
  // as last_producer_epoch.
  txn_log_value prepare_producer_id_rotation(int64_t new_producer_id, int32_t timeout_ms, int64_t now_ms,
                                             bool record_last_epoch);
  // AddPartitionsToTxn / AddOffsetsToTxn: Ongoing with `added` joined; a
  // transaction starts (start_ms = now) when none was open.
  txn_log_value prepare_add_partitions(const partition_set& added, int64_t now_ms, txn_version version);
  // EndTxn: PrepareCommit or PrepareAbort. With transaction version 2 the
  // epoch is bumped (the old one kept as last_producer_epoch) and
  // `next_producer_id` (-1: none) is where the producer moves once the
  // transaction completes; `no_partition_added` (an abort with no
  // transaction open, version 2 only) starts the clock now.
  txn_log_value prepare_abort_or_commit(txn_state to, txn_version version, int64_t next_producer_id,
                                        int64_t now_ms, bool no_partition_added);
  // The fence before an abort that the coordinator starts itself
  // (InitProducerId meeting an open transaction, a transaction past its
  // timeout): PrepareAbort at a bumped epoch, as Kafka's
  // prepareFenceProducerEpoch followed by its abort. With transaction
  // version 0 or 1 the epoch is bumped in memory before the record is
  // written, as Kafka does, and not again after a fence whose write failed;
  // with version 2 the abort's own bump is the only one. An epoch already
  // at max_producer_epoch (no client is ever given it) is not bumped.
  txn_log_value prepare_fence_and_abort(txn_version version, int64_t now_ms);
  // Markers written: CompleteCommit or CompleteAbort, no partitions left.
  // With transaction version 2 and a next producer id, the producer moves
  // to it at epoch 0.
  txn_log_value prepare_complete(int64_t now_ms);
  // Expiry: Dead, written as a tombstone.
  txn_log_value prepare_dead();

  // The pending transit's record is durable: the metadata becomes it.
  void apply_pending();
  // The pending transit's record failed: nothing changes but the pending
  // transit is dropped (and a failed fence is remembered, see above).
  void drop_pending();
  // A record read back at load replaces the metadata.
  void apply_record(const txn_log_value& v);

 private:
  txn_log_value transit(txn_state to) const;
  txn_log_value prepare(txn_log_value to);

  std::string id_;
  txn_log_value v_;
  std::optional<txn_log_value> pending_;
  // A fence whose record failed already bumped the epoch in memory (version
  // 0 and 1); the next fence does not bump it again, so the epoch never
  // runs ahead of what a client could have been told.
  bool failed_epoch_fence_ = false;
  bool pending_is_fence_ = false;
};

}  // namespace sluice::txn
