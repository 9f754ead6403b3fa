#pragma once

// The aborted transactions of one partition (Kafka's transaction index),
// one file per partition in its log directory, `aborted.txnindex`
// (docs/log_format.md, "Aborted transactions"): one entry per ABORT marker,
// in the order the markers were written, so ascending by `last`. A
// read_committed fetch asks which aborted transactions overlap the records
// it returns; the client drops those producers' records from each one's
// first offset to its marker.
//
// Entries are fixed-size, each with its own CRC, so a torn last entry
// (a crash while appending) is found and cut at open, and lookups binary
// search the file instead of holding it in memory: memory stays constant
// whatever the number of aborts. Durability: an append is written, not
// synced; sync() makes every append so far durable. The partition syncs the
// index before it writes a producer-state snapshot, and rebuilds the
// entries of markers above its newest snapshot by replaying the log, so a
// crash never leaves the index short of what the log says.
//
// The file is created by the first append: a partition that never saw an
// abort holds no file and no descriptor for it.
//
// Thread safety: every method is thread-safe (one mutex).

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/types.h"
#include "io/file.h"

namespace sluice::storage {

struct aborted_txn {
  int64_t producer_id = -1;
  offset first;        // the transaction's first offset in this partition
  offset last;         // its ABORT marker's offset
  offset last_stable;  // the partition's last stable offset once the abort was written
  bool operator==(const aborted_txn&) const = default;
};

class aborted_index {
 public:
  static constexpr const char* file_name = "aborted.txnindex";

  // Opens the index at `path` (none there: an empty one, the file made by
  // the first append); a torn or corrupt entry and everything after it are
  // cut (logged by the caller from cut_entries()).
  static result<std::unique_ptr<aborted_index>> open(io::filesystem& fs, std::string path);

  // Appends `e`; `e.last` must be above every entry's (errc::invalid_argument).
  status append(const aborted_txn& e);

  // The entries whose marker is at or after `from` and whose transaction
  // began below `upper`, in marker order, at most `max`: what a fetch of
  // [from, upper) must tell. The scan stops at the first entry whose
  // last_stable is at or past `upper` (every later abort began at or after
  // it, Kafka's rule).
  result<std::vector<aborted_txn>> collect(offset from, offset upper, size_t max) const;

  // Drops the entries whose marker is at or after `o` (the log was truncated at `o`).
  status truncate_from(offset o);
  // Drops the entries whose marker is below `start` (the log start moved
  // past them), rewriting the file once they are at least half of it.
  status drop_below(offset start);

  // Makes every append durable; nothing to do when none came since the last.
  status sync();
  size_t size() const;
  // Entries cut at open (torn or corrupt).
  size_t cut_entries() const { return cut_; }
  // The marker offset of the last entry, or nullopt when empty.
  std::optional<offset> last_marker() const;

  static constexpr size_t entry_bytes = 2 + 8 + 8 + 8 + 8 + 4;  // version, 4 fields, crc32c

 private:
  aborted_index(io::filesystem& fs, std::string path) : fs_(fs), path_(std::move(path)) {}
  // Entry `i` from the file; mu_ held.
  result<aborted_txn> read_locked(size_t i) const;
  // The first entry index whose marker is >= o; mu_ held.
  result<size_t> lower_bound_locked(offset o) const;

  io::filesystem& fs_;
  const std::string path_;
  mutable std::mutex mu_;
  std::unique_ptr<io::file> file_;
  size_t count_ = 0;
  size_t cut_ = 0;
  bool dirty_ = false;  // appends or cuts not yet synced
  std::optional<offset> last_;
};

}  // namespace sluice::storage
