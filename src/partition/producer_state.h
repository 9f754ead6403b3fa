#pragma once

// Idempotent-producer state of one partition (Kafka's ProducerStateManager):
// for each producer id, its current epoch and the metadata of its last five
// batches, so that a retried batch is recognised and answered with its
// original offsets instead of being stored twice, a gap in sequence numbers
// is refused (OUT_OF_ORDER_SEQUENCE_NUMBER) and an old epoch is fenced
// (INVALID_PRODUCER_EPOCH).
//
// Transactions (docs/transactions.md): a transactional batch of a producer
// with no transaction open here starts one at its base offset; the
// producer's COMMIT or ABORT marker (a control batch) ends it. The first
// offsets of the open transactions bound the last stable offset, and an
// ended transaction is handed back (completed_txn) for the partition's
// aborted-transaction index and its last stable offset.
//
// The state is derived from the log: replay() rebuilds it from batch headers
// (and the marker record of each control batch),
// and a snapshot (write_snapshot/load_snapshot, format in
// docs/log_format.md, "Producer state snapshot") saves replaying the whole
// log at start. The snapshot is taken when the log rolls a segment.
//
// Thread safety: none. The partition calls check() and record() under the
// same lock as its append, so check, append and record are one step.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/error.h"
#include "base/limits.h"
#include "base/result.h"
#include "base/types.h"
#include "io/file.h"
#include "model/record_batch.h"

namespace sluice::cluster {

// The producer fields of one batch header.
struct producer_batch {
  int64_t producer_id = -1;  // -1: not an idempotent producer
  int16_t producer_epoch = -1;
  int32_t first_sequence = -1;
  int32_t last_sequence = -1;  // first_sequence + last_offset_delta, wrapping at INT32_MAX
  int64_t max_timestamp = -1;
  bool transactional = false;
  bool control = false;  // a transaction marker (apply_stored reads its record)

  // The fields of a parsed batch header.
  static producer_batch from_header(const model::batch::header& h);
  bool idempotent() const { return producer_id >= 0; }
};

// What DescribeProducers shows of one producer.
struct producer_info {
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  int32_t last_sequence = -1;      // of its last batch; -1 when none is remembered
  int64_t last_timestamp_ms = -1;  // largest max_timestamp of its batches
  int32_t coordinator_epoch = -1;  // of its last marker; -1 when none
  int64_t current_txn_start_offset = -1;  // first offset of its open transaction; -1 when none
  bool operator==(const producer_info&) const = default;
};

// Who wrote a batch a leader appends (Kafka's AppendOrigin).
enum class append_origin {
  // A producer's Produce: every idempotent rule applies (sequences,
  // duplicates, epochs, the transaction's state).
  client,
  // The broker's own coordinator writing on a producer's behalf (the group
  // coordinator's TxnOffsetCommit): the batch carries the producer's id and
  // epoch but no sequence (-1), so no sequence is checked or remembered; an
  // epoch older than the producer's is still fenced (INVALID_PRODUCER_EPOCH)
  // and a transactional batch still opens the producer's transaction.
  coordinator,
};

// What check() decided for a batch about to be appended.
struct producer_check {
  errc error = errc::ok;
  // Set when the batch is a retry of one already in the log: answer with
  // these offsets and do not append.
  std::optional<offset> duplicate_base;
  std::optional<offset> duplicate_last;
  std::string message;  // why, for the log line / response error message
};

// A transaction a marker ended in this partition: from its first offset to
// the marker's (`last`).
struct completed_txn {
  int64_t producer_id = -1;
  offset first;
  offset last;
  bool aborted = false;
  bool operator==(const completed_txn&) const = default;
};

class producer_state {
 public:
  // How many batches per producer are remembered for duplicate detection
  // (Kafka's max.in.flight.requests.per.connection bound for idempotence).
  static constexpr size_t batches_per_producer = limits::batches_per_producer;

  // Decides whether `b` (a data batch) may be appended. Never changes state.
  // Beyond the idempotent rules: a non-transactional batch of a producer
  // with a transaction open here is INVALID_TXN_STATE. A coordinator's
  // batch is checked only for a fenced epoch (append_origin).
  producer_check check(const producer_batch& b, append_origin origin = append_origin::client) const;
  // Decides whether a marker of `producer_id` at `producer_epoch` from a
  // coordinator at `coordinator_epoch` may be appended: an epoch older than
  // the producer's is INVALID_PRODUCER_EPOCH (a fenced producer's
  // transaction was ended under a newer epoch), a coordinator epoch older
  // than the last marker's is TRANSACTION_COORDINATOR_FENCED.
  producer_check check_marker(int64_t producer_id, int16_t producer_epoch, int32_t coordinator_epoch) const;
  // Records a batch appended at [base, last]. Call after a successful append
  // of a batch that check() accepted (and for every batch during replay). A
  // batch without a sequence (a coordinator's) moves the epoch and opens a
  // transaction but leaves the remembered sequences alone.
  void record(const producer_batch& b, offset base, offset last);
  // Records a marker appended at `at` (after check_marker, and for every
  // marker during replay) and returns the transaction it ended; a marker of
  // a producer with nothing open here ends an empty one at `at`.
  completed_txn record_marker(int64_t producer_id, int16_t producer_epoch, int32_t coordinator_epoch, bool commit,
                              offset at, int64_t timestamp_ms);
  // A stored batch (`bytes` the whole batch, `h` its parsed header), as
  // replay and a follower apply it: a data batch as record(), a control
  // batch as record_marker() from its marker record, returning what it
  // ended. errc::invalid_txn_marker for a control batch that holds no marker.
  result<std::optional<completed_txn>> apply_stored(const model::batch::header& h, std::span<const std::byte> bytes);

  // First offset of the oldest transaction open here, or nullopt.
  std::optional<offset> first_open_txn() const {
    return open_.empty() ? std::nullopt : std::optional<offset>(open_.begin()->first);
  }
  size_t open_txn_count() const { return open_.size(); }
  // Whether `producer_id` has a transaction open here, begun at
  // `producer_epoch` (KIP-890: its later batches need no verification).
  bool in_transaction(int64_t producer_id, int16_t producer_epoch) const {
    auto it = producers_.find(producer_id);
    return it != producers_.end() && it->second.txn_first && it->second.epoch == producer_epoch;
  }

  // Rebuilds state from whole batches (headers only are read), as stored in
  // the log: used at start from the snapshot offset to the log end.
  // Each transaction a marker ended goes to `ended` (when given).
  status replay(std::span<const std::byte> batches,
                const std::function<void(const completed_txn&)>& ended = nullptr);

  // Forgets producers whose last batch is older than `min_timestamp_ms`
  // (producer.id.expiration.ms), and the oldest ones beyond `max_producers`;
  // never one with a transaction open here (it bounds the last stable offset).
  void expire(int64_t min_timestamp_ms, size_t max_producers);

  size_t producer_count() const { return producers_.size(); }
  // Every remembered producer, by producer id.
  std::vector<producer_info> producers() const;
  // Base offset of each producer's last batch in the log: compaction keeps
  // those batches (if need be emptied of records) so replay rebuilds the
  // same sequence state.
  std::vector<offset> last_batch_bases() const;

  // Snapshots. `next_offset` is the log offset up to which the state was
  // built; replay continues from there. A corrupt snapshot is errc::corrupt_data.
  status write_snapshot(io::filesystem& fs, const std::string& path, offset next_offset) const {
    return fs.write_atomic(path, encode_snapshot(next_offset));
  }
  // The snapshot's bytes, to be written later without the caller's lock.
  std::vector<std::byte> encode_snapshot(offset next_offset) const;
  struct loaded;
  static result<loaded> load_snapshot(io::filesystem& fs, const std::string& path);

 private:
  struct batch_meta {
    int32_t first_sequence;
    int32_t last_sequence;
    offset base;
    offset last;
  };
  struct entry {
    int16_t epoch = -1;
    int64_t last_timestamp = -1;
    std::deque<batch_meta> batches;  // oldest first, at most batches_per_producer
    int32_t coordinator_epoch = -1;
    std::optional<offset> txn_first;  // the open transaction's first offset here
  };
  std::unordered_map<int64_t, entry> producers_;
  // The open transactions: first offset -> producer id (kept with txn_first).
  std::map<offset, int64_t> open_;
};

struct producer_state::loaded {
  producer_state state;
  offset next_offset;
};

}  // namespace sluice::cluster
