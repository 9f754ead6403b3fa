#include "txn/state.h"

#include <algorithm>

#include "base/assert.h"

namespace sluice::txn {

bool valid_transition(txn_state from, txn_state to, txn_version version) {
  using s = txn_state;
  const bool idle = from == s::empty || from == s::complete_commit || from == s::complete_abort;
  switch (to) {
    case s::empty: return idle;
    case s::ongoing: return idle || from == s::ongoing;
    case s::prepare_commit: return from == s::ongoing;
    case s::prepare_abort:
      return from == s::ongoing || from == s::prepare_epoch_fence || (idle && bumps_epoch_at_end(version));
    case s::complete_commit: return from == s::prepare_commit;
    case s::complete_abort: return from == s::prepare_abort;
    case s::dead: return idle;
    case s::prepare_epoch_fence: return from == s::ongoing;
  }
  return false;
}

txn_metadata::txn_metadata(std::string transactional_id, int64_t producer_id, int32_t timeout_ms, int64_t now_ms)
    : id_(std::move(transactional_id)) {
  v_.producer_id = producer_id;
  v_.timeout_ms = timeout_ms;
  v_.last_update_ms = now_ms;
}

txn_metadata::txn_metadata(std::string transactional_id, txn_log_value durable)
    : id_(std::move(transactional_id)), v_(std::move(durable)) {}

txn_log_value txn_metadata::transit(txn_state to) const {
  txn_log_value t = v_;
  t.state = to;
  t.previous_producer_id = v_.producer_id;
  t.next_producer_id = no_producer_id;
  return t;
}

txn_log_value txn_metadata::prepare(txn_log_value to) {
  SLUICE_ASSERT(!pending_, "a transition prepared while another is pending");
  SLUICE_ASSERT(to.producer_id >= 0, "a transition to a negative producer id");
  SLUICE_ASSERT(to.state == txn_state::dead || to.producer_epoch >= 0, "a transition to a negative epoch");
  SLUICE_ASSERT(valid_transition(v_.state, to.state, to.client_version), "a transition Kafka does not allow");
  pending_ = to;
  return to;
}

result<txn_log_value> txn_metadata::prepare_increment_epoch(int32_t timeout_ms, std::optional<int16_t> expected_epoch,
                                                            int64_t now_ms) {
  int16_t epoch = 0;
  int16_t last = no_producer_epoch;
  if (!expected_epoch || v_.producer_epoch == no_producer_epoch || *expected_epoch == v_.producer_epoch) {
    // A new producer, or the one holding the current epoch recovering
    // (KIP-360): bump. The caller rotates the producer id instead when the
    // epoch is exhausted.
    SLUICE_ASSERT(!epoch_exhausted(v_.producer_epoch), "an epoch bump past the last usable epoch");
    epoch = static_cast<int16_t>(v_.producer_epoch + 1);
    last = expected_epoch ? v_.producer_epoch : no_producer_epoch;
  } else if (*expected_epoch == v_.last_producer_epoch) {
    // A retry of a bump whose answer was lost: the same answer again.
    epoch = v_.producer_epoch;
    last = v_.last_producer_epoch;
  } else {
    return error{errc::producer_fenced, "epoch " + std::to_string(*expected_epoch) + " is neither the current " +
                                            std::to_string(v_.producer_epoch) + " nor the last " +
                                            std::to_string(v_.last_producer_epoch)};
  }
  txn_log_value t = transit(txn_state::empty);
  t.producer_epoch = epoch;
  t.last_producer_epoch = last;
  t.timeout_ms = timeout_ms;
  t.partitions.clear();
  t.start_ms = -1;
  t.last_update_ms = now_ms;
  return prepare(std::move(t));
}

txn_log_value txn_metadata::prepare_producer_id_rotation(int64_t new_producer_id, int32_t timeout_ms, int64_t now_ms,
                                                         bool record_last_epoch) {
  SLUICE_ASSERT(v_.state != txn_state::ongoing && v_.state != txn_state::prepare_commit &&
                    v_.state != txn_state::prepare_abort,
                "a producer id rotated while a transaction is open");
  txn_log_value t = transit(txn_state::empty);
  t.producer_id = new_producer_id;
  t.producer_epoch = 0;
  t.last_producer_epoch = record_last_epoch ? v_.producer_epoch : no_producer_epoch;
  t.timeout_ms = timeout_ms;
  t.partitions.clear();
  t.start_ms = -1;
  t.last_update_ms = now_ms;
  return prepare(std::move(t));
}

txn_log_value txn_metadata::prepare_add_partitions(const partition_set& added, int64_t now_ms, txn_version version) {
  txn_log_value t = transit(txn_state::ongoing);
  if (v_.state == txn_state::empty || v_.state == txn_state::complete_commit ||
      v_.state == txn_state::complete_abort)
    t.start_ms = now_ms;
  t.partitions.insert(added.begin(), added.end());
  t.last_update_ms = now_ms;
  t.client_version = version;
  return prepare(std::move(t));
}

txn_log_value txn_metadata::prepare_abort_or_commit(txn_state to, txn_version version, int64_t next_producer_id,
                                                    int64_t now_ms, bool no_partition_added) {
  SLUICE_ASSERT(to == txn_state::prepare_commit || to == txn_state::prepare_abort, "not an end state");
  txn_log_value t = transit(to);
  // The caller allocates a next producer id when the epoch is exhausted, so
  // a client's transaction never bumps past max_producer_epoch; only an id
  // fenced at the largest epoch (which no client was ever given) stays there.
  if (bumps_epoch_at_end(version) && v_.producer_epoch < max_producer_epoch) {
    t.producer_epoch = static_cast<int16_t>(v_.producer_epoch + 1);
    t.last_producer_epoch = v_.producer_epoch;
  }
  t.next_producer_id = next_producer_id;
  if (no_partition_added) t.start_ms = now_ms;
  t.last_update_ms = now_ms;
  t.client_version = version;
  return prepare(std::move(t));
}

txn_log_value txn_metadata::prepare_fence_and_abort(txn_version version, int64_t now_ms) {
  SLUICE_ASSERT(v_.state == txn_state::ongoing, "a fence of an id with no open transaction");
  if (!bumps_epoch_at_end(version)) {
    if (!failed_epoch_fence_ && v_.producer_epoch < max_producer_epoch) v_.producer_epoch = static_cast<int16_t>(v_.producer_epoch + 1);
    v_.last_producer_epoch = no_producer_epoch;
  }
  txn_log_value t = prepare_abort_or_commit(txn_state::prepare_abort, version, no_producer_id, now_ms, false);
  pending_is_fence_ = true;
  return t;
}

txn_log_value txn_metadata::prepare_complete(int64_t now_ms) {
  SLUICE_ASSERT(v_.state == txn_state::prepare_commit || v_.state == txn_state::prepare_abort,
                "a completion with no transaction ending");
  txn_log_value t =
      transit(v_.state == txn_state::prepare_commit ? txn_state::complete_commit : txn_state::complete_abort);
  if (bumps_epoch_at_end(v_.client_version) && v_.next_producer_id != no_producer_id) {
    // The epoch overflowed: the producer goes on as the next producer id.
    // last_producer_epoch stays what the client last saw (max - 1).
    t.producer_id = v_.next_producer_id;
    t.producer_epoch = 0;
  }
  t.partitions.clear();
  t.last_update_ms = now_ms;
  return prepare(std::move(t));
}

txn_log_value txn_metadata::prepare_dead() {
  txn_log_value t = transit(txn_state::dead);
  t.partitions.clear();
  return prepare(std::move(t));
}

void txn_metadata::apply_pending() {
  SLUICE_ASSERT(pending_.has_value(), "nothing pending to apply");
  SLUICE_ASSERT(pending_->state != txn_state::dead && pending_->state != txn_state::prepare_epoch_fence,
                "Dead and PrepareEpochFence are never applied");
  v_ = std::move(*pending_);
  pending_.reset();
  // A durable fence (or any later record) makes the in-memory epoch the
  // written one again.
  failed_epoch_fence_ = false;
  pending_is_fence_ = false;
}

void txn_metadata::drop_pending() {
  if (pending_is_fence_ && !bumps_epoch_at_end(pending_ ? pending_->client_version : txn_version::tv0))
    failed_epoch_fence_ = true;
  pending_.reset();
  pending_is_fence_ = false;
}

void txn_metadata::apply_record(const txn_log_value& v) {
  v_ = v;
  pending_.reset();
  failed_epoch_fence_ = false;
  pending_is_fence_ = false;
}

}  // namespace sluice::txn
