#pragma once

// The partition log's value types: what callers outside storage/ (the
// cluster layer's partition and the broker's wiring) hold and pass without
// the log itself (storage/log.h). Contracts are those of storage::log.

#include <compare>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/limits.h"
#include "base/result.h"
#include "base/types.h"
#include "io/file.h"

namespace sluice::storage {

struct topic_partition {
  std::string topic;
  int32_t partition = 0;
  auto operator<=>(const topic_partition&) const = default;
  // The partition's directory name: "<topic>-<partition>" when that fits in
  // `max_bytes`, otherwise "<first 200 bytes of topic>~<16 hex digits of
  // FNV-1a 64 of the whole topic>-<partition>" (at most 228 bytes, see
  // docs/log_format.md). '~' is not a topic character, so the two forms
  // never meet. Only topics longer than 244 bytes with large partition
  // numbers take the second form; every name that fitted before keeps its
  // plain form, so data directories written by earlier versions open
  // unchanged. The same name (with max_bytes 251, leaving room for ".tmp")
  // names the partition's producer snapshot.
  std::string dir_name(size_t max_bytes = limits::max_file_name_bytes) const;
  // Whether `dir_name` has the shape of a partition directory (either form,
  // ending in "-<partition>"). The topic cannot be recovered from the
  // hashed form, so the directory name, not the topic, is the key.
  static bool is_dir_name(const std::string& dir_name);
  // Parses a plain directory name "<topic>-<partition>"; nullopt when it is
  // not one (the hashed form included).
  static std::optional<topic_partition> parse(const std::string& dir_name);
};

// Per-log settings (Kafka's topic configs of the same names). May be changed
// at runtime with log::set_config; new values apply from the next append.
struct log_config {
  int64_t segment_bytes = limits::default_segment_bytes;
  int64_t segment_ms = limits::default_segment_ms;
  int64_t index_interval_bytes = limits::default_index_interval_bytes;
  int64_t segment_index_bytes = limits::default_segment_index_bytes;
  // When false the log never calls fdatasync: data counts as durable as soon
  // as it is written to the page cache (lost on power failure, kept on a
  // process crash). For users who choose speed over durability.
  bool fsync = true;
  // Kafka's flush.messages and flush.ms, whatever the producers' acks: a
  // sync starts once this many messages were appended since the last one
  // began, and no appended byte stays unsynced longer than flush_ms (a timer
  // on the flusher, armed by the first append after a sync). INT64_MAX: off,
  // only acks=all waiters ask for syncs. No effect without `fsync`.
  int64_t flush_messages = INT64_MAX;
  int64_t flush_ms = INT64_MAX;
  // Segments that leave the log are renamed *.deleted and removed this long
  // after (docs/log_format.md, "Deleting segments").
  int64_t file_delete_delay_ms = limits::default_file_delete_delay_ms;

  // Checks the values are within limits.h; errc::invalid_config otherwise.
  status validate() const;
};


struct append_result {
  offset base;  // offset of the first record appended
  offset last;  // offset of the last record appended
};

// A contiguous byte range of one segment file holding whole batches, for
// sendfile(file->native_handle(), pos, len) or pread. `file` keeps the
// descriptor open while the region is held.
struct file_region {
  std::shared_ptr<io::file> file;
  uint64_t pos = 0;
  uint64_t len = 0;          // 0: nothing to read at this offset (it is the end)
  offset first_offset;       // base offset of the first batch in the region
  offset next_offset;        // the offset to read next: one past the region's last batch
};

struct timestamp_lookup {
  offset base;            // base offset of the first batch with max_timestamp >= the time
  int64_t max_timestamp;  // that batch's max_timestamp
};

struct epoch_entry {
  leader_epoch epoch;
  offset start;  // first offset written in this epoch
  bool operator==(const epoch_entry&) const = default;
};

// Called once per on_durable request: ok when every offset up to the
// requested one is durable; an error (io_error, no_space, log_offline,
// offset_out_of_range after truncation, shutting_down) when it never will be.
using durable_callback = std::function<void(const status&)>;

// What open() found: whether the previous run closed cleanly and what, if
// anything, recovery cut from the end of the log.
struct recovery_info {
  bool created = false;  // the directory held no segment: a new log
  bool clean_shutdown = false;
  bool truncated = false;
  std::string file;          // the segment file that was cut
  uint64_t position = 0;     // byte position of the cut in that file
  uint64_t bytes_dropped = 0;  // bytes removed from that file (later segments not counted)
  size_t segments_dropped = 0; // whole segments removed after the cut
  std::string reason;        // why the first dropped batch was refused
  // Damaged ranges found with intact batches after them (kept), and their
  // bytes (docs/log_format.md, "Damaged batches").
  size_t damaged_ranges = 0;
  uint64_t damaged_bytes = 0;
};

// Damage found in this log since it was opened, by recovery and scrub(),
// for metrics. Counters only grow.
struct damage_stats {
  uint64_t ranges_found = 0;   // damaged ranges (one or more batches each)
  uint64_t bytes_found = 0;    // their bytes
  uint64_t bytes_removed = 0;  // bytes removed from segment files by rewrites
  uint64_t bytes_scrubbed = 0; // bytes scrub() checked
};

// Called by scrub() with the bytes it read since the last call; returns
// false to stop the scrub (shutdown). May block to pace the reading.
using scrub_pace = std::function<bool(uint64_t bytes)>;

// Summary of one segment, for retention policies and tools.
struct segment_info {
  offset base;
  offset next;            // one past its last offset
  uint64_t size_bytes;
  int64_t max_timestamp;  // -1 when empty or when no batch carries a timestamp
  // Kafka's "largest timestamp" of a segment, which time retention goes by:
  // max_timestamp, or the file's modification time when that is -1 (a
  // segment whose records carry no timestamp is not expired for lacking
  // one). -1 only for an empty segment or when the time cannot be read.
  int64_t largest_time_ms;
};

}  // namespace sluice::storage
