#pragma once

// The sparse offset and time indexes of one segment (docs/log_format.md,
// "Offset index" and "Time index"), held in memory and written to their files
// whole. Memory is 8 (offset) or 12 (time) bytes per index.interval.bytes of
// log. Not thread-safe: the owning segment is guarded by its log's mutex.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/result.h"

namespace sluice::storage {

class offset_index {
 public:
  struct entry {
    int32_t rel = 0;  // batch base offset minus segment base offset
    int32_t pos = 0;  // byte position of the batch in the .log file
  };

  // Entries must come in strictly ascending order in both fields.
  void append(entry e);
  // The last entry with rel <= `rel`.
  std::optional<entry> floor_offset(int32_t rel) const;
  // The last entry with pos <= `pos`.
  std::optional<entry> floor_position(int64_t pos) const;
  // Drops every entry with rel >= `rel`.
  void truncate_from(int32_t rel);
  void clear() { entries_.clear(); }

  std::optional<entry> last() const;
  size_t size() const { return entries_.size(); }
  size_t bytes() const { return entries_.size() * kEntryBytes; }
  std::vector<std::byte> serialize() const;
  // Parses an index file, checking the entries ascend and stay below
  // `log_size` (the .log file size). errc::corrupt_data otherwise.
  static result<offset_index> parse(std::span<const std::byte> bytes, uint64_t log_size);

  static constexpr size_t kEntryBytes = 8;

 private:
  std::vector<entry> entries_;
};

class time_index {
 public:
  struct entry {
    int64_t ts = 0;   // largest max_timestamp up to and including the batch
    int32_t rel = 0;  // base offset of that batch minus segment base offset
  };

  // Appends when `e.ts` is larger than the last entry's (else ignored).
  void maybe_append(entry e);
  // The last entry with ts < `ts`.
  std::optional<entry> last_before(int64_t ts) const;
  void truncate_from(int32_t rel);
  void clear() { entries_.clear(); }

  std::optional<entry> last() const;
  size_t size() const { return entries_.size(); }
  size_t bytes() const { return entries_.size() * kEntryBytes; }
  std::vector<std::byte> serialize() const;
  // Parses a time index file, checking both fields ascend. errc::corrupt_data
  // otherwise.
  static result<time_index> parse(std::span<const std::byte> bytes);

  static constexpr size_t kEntryBytes = 12;

 private:
  std::vector<entry> entries_;
};

}  // namespace sluice::storage
