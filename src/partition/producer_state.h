#pragma once

// Idempotent-producer state of one partition (Kafka's ProducerStateManager):
// for each producer id, its current epoch and the metadata of its last five
// batches, so that a retried batch is recognised and answered with its
// original offsets instead of being stored twice, a gap in sequence numbers
// is refused (OUT_OF_ORDER_SEQUENCE_NUMBER) and an old epoch is fenced
// (INVALID_PRODUCER_EPOCH).
//
// The state is derived from the log: replay() rebuilds it from batch headers,
// and a snapshot (write_snapshot/load_snapshot, format in
// docs/log_format.md, "Producer state snapshot") saves replaying the whole
// log at start. The snapshot is taken when the log rolls a segment.
//
// Thread safety: none. The partition calls check() and record() under the
// same lock as its append, so check, append and record are one step.

#include <cstdint>
#include <deque>
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
  bool operator==(const producer_info&) const = default;
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

class producer_state {
 public:
  // How many batches per producer are remembered for duplicate detection
  // (Kafka's max.in.flight.requests.per.connection bound for idempotence).
  static constexpr size_t batches_per_producer = limits::batches_per_producer;

  // Decides whether `b` may be appended. Never changes state.
  producer_check check(const producer_batch& b) const;
  // Records a batch appended at [base, last]. Call after a successful append
  // of a batch that check() accepted (and for every batch during replay).
  void record(const producer_batch& b, offset base, offset last);

  // Rebuilds state from whole batches (headers only are read), as stored in
  // the log: used at start from the snapshot offset to the log end.
  status replay(std::span<const std::byte> batches);

  // Forgets producers whose last batch is older than `min_timestamp_ms`
  // (producer.id.expiration.ms), and the oldest ones beyond `max_producers`.
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
  };
  std::unordered_map<int64_t, entry> producers_;
};

struct producer_state::loaded {
  producer_state state;
  offset next_offset;
};

}  // namespace sluice::cluster
