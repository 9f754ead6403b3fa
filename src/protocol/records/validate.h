#pragma once

// Validation of a record batch a producer sent, record by record, as Kafka's
// broker does before it appends (its LogValidator): a batch whose CRC is
// right but whose records do not parse would otherwise be stored and stop
// every consumer at its offset for good.
//
// What is checked, beyond the header and CRC (which the caller checked):
//   - the codec is one Kafka defines (0-4); anything else is
//     errc::unsupported_compression;
//   - a compressed payload decompresses (errc::corrupt_data otherwise) into
//     at most `max_decompressed_bytes` (errc::message_too_large otherwise);
//   - exactly records_count records fill the payload, each within its
//     length, with offset deltas 0, 1, 2, ... and no negative lengths or
//     null header keys (errc::invalid_record otherwise);
//   - with `require_keys` (a compacted topic), every record has a key
//     (errc::invalid_record).
// It also works out what the broker stores in the header: the largest
// record timestamp (base timestamp plus each delta), which Kafka writes as
// the batch's max timestamp whatever the client put there.
//
// Memory: an uncompressed batch is walked in place, allocating nothing. A
// compressed one is decompressed into a buffer of at most
// max_decompressed_bytes, leased from `budget` for as long as the walk
// takes, so all concurrent validations together hold at most the budget.
//
// Thread safety: validate_records is reentrant; decompression_budget is
// thread-safe.

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>

#include "base/result.h"

namespace sluice::protocol::records {

// A pool of bytes that decompressions lease before they start. acquire()
// blocks while the pool cannot cover the lease: the holders are
// decompressing (CPU work of milliseconds, waiting on nothing else), so the
// wait is short and cannot deadlock. A lease larger than the whole pool is
// cut to the pool's size, so it is granted once the pool is idle.
class decompression_budget {
 public:
  explicit decompression_budget(size_t total_bytes) : total_(total_bytes) {}
  decompression_budget(const decompression_budget&) = delete;
  decompression_budget& operator=(const decompression_budget&) = delete;

  class lease {
   public:
    lease(lease&& o) noexcept : owner_(o.owner_), bytes_(o.bytes_) { o.owner_ = nullptr; }
    lease(const lease&) = delete;
    lease& operator=(const lease&) = delete;
    lease& operator=(lease&&) = delete;
    ~lease();
    size_t bytes() const { return bytes_; }

   private:
    friend class decompression_budget;
    lease(decompression_budget* owner, size_t bytes) : owner_(owner), bytes_(bytes) {}
    decompression_budget* owner_;
    size_t bytes_;
  };

  [[nodiscard]] lease acquire(size_t bytes);
  size_t total_bytes() const { return total_; }
  size_t in_use_bytes() const;
  // Leases that had to wait for others to end (a figure for /metrics).
  uint64_t waits() const;

 private:
  void release(size_t bytes);

  const size_t total_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  size_t in_use_ = 0;
  uint64_t waits_ = 0;
};

// The broker-wide budget of produce validation (limits.h,
// max_produce_decompression_bytes).
decompression_budget& produce_decompression_budget();

struct validation_options {
  size_t max_decompressed_bytes = 0;
  bool require_keys = false;
};

struct batch_facts {
  // The largest record timestamp; -1 (Kafka's "no timestamp") when every
  // record carries -1.
  int64_t max_timestamp = -1;
};

// Validates the records of one whole v2 batch whose header and CRC the
// caller already checked (records_count == last_offset_delta + 1).
// `budget` may be null for callers outside the broker's produce path.
result<batch_facts> validate_records(std::span<const uint8_t> batch, const validation_options& options,
                                     decompression_budget* budget);

}  // namespace sluice::protocol::records
