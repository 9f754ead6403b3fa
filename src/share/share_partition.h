#pragma once

// One share partition: a share group's view of one topic partition (KIP-932),
// as plain decisions. No threads, no I/O: the leader of the topic partition
// owns one share_partition per share group that reads it, serialises calls to
// it, reads the log for it, and makes its state durable through the share
// coordinator before it answers (docs/share_groups.md).
//
// Offsets, as Kafka names them:
//   start offset (SPSO)  every offset below it is done: acknowledged or
//                        archived (or was never to be delivered: before the
//                        group's reset point, deleted by retention, a
//                        transaction marker);
//   end offset (SPEO)    one past the last offset ever acquired: every offset
//                        at or past it is available and was never delivered.
// The offsets in [SPSO, SPEO) are in flight, each in one state:
//
//   available ---acquire---> acquired ---accept----> acknowledged
//       ^                     |  |  |
//       |                     |  |  +--reject------> archived (rejected)
//       +----release, or -----+  |
//            lock expiry         +--release / lock expiry, delivery count
//                                   at the limit --> archived (delivery
//                                                     count exhausted)
//
// Acquiring counts a delivery: a record's delivery count is the number of
// times it was acquired, so a consumer that crashes holding it counts one
// delivery per crash. A record archived for either reason is reported to
// the caller (a dead letter to write, when the group names a dead-letter
// topic), once.
//
// The in-flight window SPEO - SPSO is at most `max_record_locks`, so the
// memory of a share partition is bounded whatever its consumers do.
//
// What is durable (durable_state) is the start offset and the in-flight
// records as ranges of (state, delivery count); an acquired record is
// written as available with its count, so after a failover it is delivered
// again and its count is not reset. A share partition rebuilt from its
// durable state (the constructor taking one) continues where the old one
// stopped, less its acquisitions' locks.
//
// Not thread-safe.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/limits.h"
#include "base/result.h"

namespace sluice::share {

// Kafka's acknowledge types (ShareFetch/ShareAcknowledge AcknowledgeTypes).
enum class ack_type : int8_t { gap = 0, accept = 1, release = 2, reject = 3 };

// A record's state as written in the durable state (Kafka's delivery state
// numbers; acquired is never written).
enum class record_state : int8_t { available = 0, acquired = 1, acknowledged = 2, archived = 4 };
const char* record_state_name(record_state s);

// Why a record was archived.
enum class archive_reason : int8_t { rejected = 1, delivery_count_exhausted = 2 };
const char* archive_reason_name(archive_reason r);

struct settings {
  int32_t record_lock_duration_ms = limits::default_share_record_lock_duration_ms;  // share.record.lock.duration.ms
  int16_t delivery_count_limit = limits::default_share_delivery_count_limit;        // share.delivery.count.limit
  int32_t max_record_locks = limits::default_share_max_record_locks;  // group.share.partition.max.record.locks
};

// A range of offsets in one state with one delivery count (durable form).
struct state_batch {
  int64_t first_offset = 0;
  int64_t last_offset = 0;  // inclusive
  record_state state = record_state::available;
  int16_t delivery_count = 0;
  bool operator==(const state_batch&) const = default;
};

// An archived record still to be written to the group's dead-letter topic,
// with the sequence number it is written at (docs/share_groups.md,
// "Dead-letter topic").
struct dead_letter {
  int64_t offset = 0;
  int16_t delivery_count = 0;
  archive_reason reason = archive_reason::rejected;
  int32_t sequence = 0;
  bool operator==(const dead_letter&) const = default;
};

struct durable_state {
  int64_t start_offset = 0;
  // In-flight ranges in offset order, none below start_offset, none
  // overlapping; offsets between them (and past the last) not listed are
  // available and never delivered (count 0).
  std::vector<state_batch> batches;
  // The dead letters' producer (-1: none yet), the sequence the next dead
  // letter gets, and the dead letters not yet written, in sequence order.
  int64_t dead_letter_producer_id = -1;
  int16_t dead_letter_producer_epoch = -1;
  int32_t dead_letter_sequence = 0;
  std::vector<dead_letter> pending_dead_letters;
  // Records archived (rejected, or out of deliveries) since the state
  // began at its state epoch, for describe.
  int64_t archived_count = 0;
  bool operator==(const durable_state&) const = default;
};

// A share partition's lag (KIP-1226) when its log ends at `end` (the high
// watermark, or the last stable offset when read committed): the records
// from the start offset up to `end` not yet acknowledged or archived.
// Never negative.
int64_t share_lag(const durable_state& d, int64_t end);
// The records delivered at least once and not yet acknowledged or archived
// (acquired now, or offered again): what a describe calls in flight.
int64_t share_in_flight(const durable_state& d);

// A record batch the caller read from the log, for acquire().
struct log_batch {
  int64_t base_offset = 0;
  int64_t last_offset = 0;
  // A transaction marker: never delivered, done at once.
  bool control = false;
  // Records of an aborted transaction under read_committed: never
  // delivered, done at once (not dead letters: nobody failed on them).
  bool aborted = false;
};

// Records handed to a member: [first, last] all at delivery_count.
struct acquired_range {
  int64_t first_offset = 0;
  int64_t last_offset = 0;
  int16_t delivery_count = 0;
  bool operator==(const acquired_range&) const = default;
};

// A record that became archived: a dead letter, when the group has a
// dead-letter topic.
struct archived_record {
  int64_t offset = 0;
  int16_t delivery_count = 0;
  archive_reason reason = archive_reason::rejected;
  bool operator==(const archived_record&) const = default;
};

// One acknowledgement batch of a ShareFetch/ShareAcknowledge: either one
// type for the whole range or one per offset.
struct ack_batch {
  int64_t first_offset = 0;
  int64_t last_offset = 0;
  std::vector<ack_type> types;
};

class share_partition {
 public:
  // A share partition seen for the first time, starting at `start_offset`
  // (the group's share.auto.offset.reset point).
  share_partition(int64_t start_offset, settings s);
  // One rebuilt from its durable state.
  share_partition(const durable_state& d, settings s);

  int64_t start_offset() const { return start_; }
  int64_t end_offset() const { return start_ + static_cast<int64_t>(window_.size()); }
  const settings& config() const { return settings_; }
  void set_settings(settings s) { settings_ = s; }

  // Where the caller's next log read should start: the first available
  // offset in flight, else the end offset. nullopt when nothing can be
  // acquired now (the window is full of records not available, or as many
  // dead letters wait to be written as the window holds: the group stops
  // taking records rather than queue dead letters without bound).
  std::optional<int64_t> next_fetch_offset() const;

  // One past the last offset acquire() could take now for at most
  // `max_records` records (0: no limit), reading from `from` (what
  // next_fetch_offset() gave): where that many available records end, at
  // most the end of the window (start offset + max_record_locks). Nothing a
  // read for acquire() finds past it is taken.
  int64_t acquire_limit(int64_t from, int64_t max_records) const;

  // Acquires for `member`, in offset order, the available records of the
  // `batches` read from the log (in offset order; their offsets below the
  // start offset are ignored), at most `max_records` of them (0: no
  // limit), while the window has room. Each acquired record's delivery
  // count goes up by one and its lock runs until now + lock duration.
  // Records whose count is already at the limit are archived instead of
  // acquired (`archived` gets them). Returns the acquired ranges (a range
  // per run of equal delivery counts).
  std::vector<acquired_range> acquire(const std::string& member, const std::vector<log_batch>& batches,
                                      int32_t max_records, int64_t now_ms, std::vector<archived_record>& archived);

  // Applies `member`'s acknowledgements. Every offset named must be
  // acquired by `member` (INVALID_RECORD_STATE otherwise, and none of the
  // batch's offsets change: a batch is all or nothing); a gap names an
  // offset with no record (compacted away or a marker) and ends it as
  // acknowledged. A batch per call result: ok or the error of that batch.
  std::vector<status> acknowledge(const std::string& member, const std::vector<ack_batch>& batches, int64_t now_ms,
                                  std::vector<archived_record>& archived);

  // Locks past their deadline: their records become available, or
  // archived at the delivery count limit. Returns whether anything changed.
  bool expire_locks(int64_t now_ms, std::vector<archived_record>& archived);
  // The earliest lock deadline, for the caller's timer; nullopt when none.
  std::optional<int64_t> next_lock_deadline() const;

  // Every record `member` holds becomes available (or archived at the
  // limit): the member left or its share session closed.
  bool release_member(const std::string& member, std::vector<archived_record>& archived);

  // Retention or DeleteRecords moved the log start to `log_start`: the
  // offsets below it are gone, so they are done.
  void log_start_moved(int64_t log_start);

  // Moves the start offset (AlterShareGroupOffsets, or a reset): the
  // in-flight records are forgotten. Only while nothing is acquired.
  status reset(int64_t start_offset);

  // ---- Dead letters -------------------------------------------------------
  // The producer dead letters are written with; setting another one starts
  // its sequences again at 0 (the pending ones are numbered again).
  int64_t dead_letter_producer_id() const { return dl_producer_id_; }
  int16_t dead_letter_producer_epoch() const { return dl_producer_epoch_; }
  void set_dead_letter_producer(int64_t id, int16_t epoch);
  // Queues archived records as dead letters, each at the next sequence.
  void add_dead_letters(const std::vector<archived_record>& archived);
  const std::vector<dead_letter>& pending_dead_letters() const { return pending_; }
  // The dead letters up to `sequence` are written: they leave the queue.
  void dead_letters_written(int32_t sequence);

  // Counts for describe and metrics.
  int64_t in_flight() const { return static_cast<int64_t>(window_.size()); }
  int64_t count(record_state s) const;
  record_state state_of(int64_t offset) const;
  int16_t delivery_count_of(int64_t offset) const;

  durable_state durable() const;

 private:
  struct slot {
    record_state state = record_state::available;
    int16_t delivery_count = 0;
    uint32_t member = 0;  // index into members_ while acquired
    int64_t deadline_ms = 0;
  };

  uint32_t member_index(const std::string& member);
  void end_lock(slot& s, int64_t offset, std::vector<archived_record>& archived);
  void advance_start();
  slot* at(int64_t offset);
  void check_invariants() const;

  settings settings_;
  int64_t start_ = 0;
  std::deque<slot> window_;  // offsets [start_, start_ + size)
  std::vector<std::string> members_;  // members_[i] for slot.member == i
  std::map<std::string, uint32_t> member_ids_;
  int64_t acquired_ = 0;
  // No lock runs out before this (a lower bound: locks ended since by an
  // acknowledgement or a release may have held it; expire_locks() makes it
  // exact again).
  int64_t earliest_deadline_ = INT64_MAX;
  int64_t dl_producer_id_ = -1;
  int16_t dl_producer_epoch_ = -1;
  int32_t dl_sequence_ = 0;
  std::vector<dead_letter> pending_;
  int64_t archived_total_ = 0;  // durable_state::archived_count
};

}  // namespace sluice::share
