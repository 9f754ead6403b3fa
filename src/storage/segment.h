#pragma once

// One segment of a partition log: a .log file of record batches and its two
// sparse indexes (docs/log_format.md). The .log file is opened through the
// shared file_cache on demand; the indexes live in memory and are written to
// their files when the segment is closed for writing (roll, clean close,
// truncation of a closed segment).
//
// Not thread-safe: every call is made with the owning log's mutex held. The
// bytes of a segment below size() are immutable except under truncate_at.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/types.h"
#include "io/file.h"
#include "model/record_batch.h"
#include "storage/file_cache.h"
#include "storage/index.h"

namespace sluice::storage {

// "<dir>/<20-digit base>.<ext>"
std::string segment_path(const std::string& dir, offset base, const char* ext);
// Parses "<20 digits>.log"; nullopt for any other name.
std::optional<offset> parse_segment_name(const std::string& name);

// A byte range of a .log file that holds no intact batch
// (docs/log_format.md, "Damaged batches"): a batch whose CRC or header is
// wrong, up to the next intact batch or the end of the file. Reads skip it;
// log::remove_damage rewrites the segment without it.
struct segment_damage {
  uint64_t pos = 0;  // first damaged byte (a batch boundary)
  uint64_t end = 0;  // an intact batch starts here, or the scanned part ends
  offset first;      // the lowest offset the range may have held: one past the batch before it
  offset next;       // base offset of the batch at `end`; == first when the range runs to the end
  std::string why;   // what the check found at `pos`
};

class segment {
 public:
  // A batch found in the segment: its header and byte position.
  struct located {
    uint64_t pos = 0;
    model::batch::header h;
  };
  // Where a recovery scan stopped early, and why.
  struct cut {
    uint64_t pos = 0;
    uint64_t bytes_dropped = 0;
    error reason;
  };
  using damage = segment_damage;
  // What a recovery scan found: damaged ranges it skipped (each followed by
  // an intact batch, or at the end of a segment that is not the last) and
  // the torn tail it cut from the last segment.
  struct recovered {
    std::vector<damage> damaged;
    std::optional<cut> tail;
  };
  using batch_visitor = std::function<void(const model::batch::header&)>;

  // Creates an empty segment, replacing any file of the same name.
  static result<std::unique_ptr<segment>> create(io::filesystem& fs, file_cache& files,
                                                 const std::string& dir, offset base, int64_t now_ms);
  // Creates an empty segment whose .log file is at `log_path` instead of
  // its usual name: a cleaned copy being written by compaction
  // (docs/log_format.md, "Replacing segments"). Appends build its indexes in
  // memory; rename_log gives it its usual name once it replaces the old
  // segments. Its index files are written only after that.
  static result<std::unique_ptr<segment>> create_staged(io::filesystem& fs, file_cache& files,
                                                        const std::string& dir, offset base,
                                                        std::string log_path);
  // Opens an existing segment without reading it; call load_trusted or
  // recover before use.
  static result<std::unique_ptr<segment>> open_existing(io::filesystem& fs, file_cache& files,
                                                        const std::string& dir, offset base,
                                                        int64_t now_ms);

  // Clean-shutdown path: loads the index files, checks them, and reads (and
  // checks) only the batches after the last index entry. Returns false when
  // anything is off, in which case the caller runs recover().
  result<bool> load_trusted(offset min_base, int64_t interval_bytes, const batch_visitor& visit);
  // Unclean path: reads and checks every batch (header and CRC), rebuilding
  // the indexes. At a partial or invalid batch it looks for the next intact
  // batch in the file (find_intact): when there is one, the bytes up to it
  // are a damaged range, skipped by reads from now on, and the scan goes on
  // there; when there is none the rest of the file is a torn tail, cut when
  // `last` (the log's last segment: what a crash leaves) and otherwise a
  // damaged range too (later segments hold acknowledged data). `min_base`
  // is the lowest base offset the first batch may have.
  result<recovered> recover(offset min_base, int64_t interval_bytes, const batch_visitor& visit, bool last);
  // Checks every batch of [0, to) of the segment file `f` whose base offset
  // is `base` (header and CRC), reading it through one buffer and calling
  // `pace` with the bytes read after each chunk; `pace` returning false ends
  // the scan with errc::shutting_down. Returns the damaged ranges, found as
  // recover() finds them (a damaged end runs to `to`). Touches no segment:
  // the scrubber runs it without the log's mutex.
  static result<std::vector<damage>> scan(io::file& f, offset base, uint64_t to,
                                          const std::function<bool(uint64_t)>& pace);
  // Checks the batches of [from, to), a read region starting at a batch
  // whose base offset is `min_base` (header and CRC). Returns the damaged
  // ranges that start in it (none when all is intact), each ending at the
  // next intact batch before `file_end` or at `file_end`. Touches no
  // segment: reads run it without the log's mutex.
  static result<std::vector<damage>> check_region(io::file& f, offset base, uint64_t from, uint64_t to,
                                                  uint64_t file_end, offset min_base);
  // Starts skipping a damaged range in reads (with the log's mutex held).
  // False when it is already known.
  bool add_damage(const damage& d);
  // Byte ranges whose batches this process has checked, CRC included
  // (appended, scanned at open, scrubbed, or checked by a read): reads of
  // other ranges are checked before they are served (docs/log_format.md,
  // "Damaged batches"). At most limits::max_verified_ranges_per_segment
  // ranges are kept; forgetting one only costs a second check.
  bool verified(uint64_t from, uint64_t to) const;
  void mark_verified(uint64_t from, uint64_t to);
  const std::vector<damage>& damaged() const { return damage_; }
  // `pos`, or the end of the damaged range(s) starting at or covering it.
  uint64_t past_damage(uint64_t pos) const;
  // Process-unique, never reused: tells a segment apart from one that
  // replaced it at the same base offset.
  uint64_t id() const { return id_; }

  // Appends whole, validated batches (headers in `hs`, in order). With
  // `reserve_up_to` > 0 (the size at which the log rolls the segment), the
  // file's blocks are reserved ahead of its end first, a chunk of
  // limits::segment_reserve_bytes at a time and never past that size; a
  // reservation that fails is only logged.
  status append(std::span<const std::byte> data, std::span<const model::batch::header> hs,
                int64_t interval_bytes, uint64_t reserve_up_to = 0);
  // Gives back the blocks reserved past the segment's end and cuts its
  // prepared tail (a roll closed it, or the log closes). A failure is only
  // logged: the blocks stay until the file is cut or deleted, and a
  // prepared tail left behind is cut by the next recovery.
  void release_reserve();
  // The prepared tail (storage/README.md, "Prepared tails"): zeros written
  // past the segment's end, [size(), zeroed_end()), so that once a sync made
  // them durable (set_prepared) appends below prepared_end() overwrite
  // allocated, initialized blocks within the file's durable size, and only
  // their data needs syncing. write_zeros extends it to `to` (no-op when it
  // reaches that already); set_prepared(end) records that a sync which
  // began with the tail written up to `end` succeeded. Appends that run past
  // the tail extend the file as before. A cut (truncate_at, a failed
  // append, release_reserve) shortens both.
  status write_zeros(uint64_t to);
  uint64_t zeroed_end() const { return std::max(zeroed_end_, size_); }
  uint64_t prepared_end() const { return prepared_end_; }
  void set_prepared(uint64_t end);
  // The first batch whose last offset is >= `o`, or nullopt past the end.
  result<std::optional<located>> locate(offset o);
  // The end position of a read region that starts at `start`: whole batches,
  // at most `max_bytes` unless the first batch alone is larger, and only
  // batches whose last offset is < `upper`.
  result<uint64_t> region_end(const located& start, size_t max_bytes, offset upper);
  // The first batch whose max_timestamp is >= `ts` and whose last offset is
  // >= `from` (the log start offset), or nullopt.
  result<std::optional<located>> locate_time(int64_t ts, offset from);
  // The first batch with the largest max_timestamp among those whose last
  // offset is >= `from`, or nullopt when there is none. Reads every header
  // from `from` on: for a segment that straddles the log start offset,
  // where max_timestamp() may belong to a batch below it.
  result<std::optional<located>> locate_max_time(offset from);
  // The base offset of the batch at `pos` (a batch boundary), or next() at
  // the end.
  result<offset> offset_at(uint64_t pos);
  // Cuts the segment before the batch at `at` (everything from it on goes).
  status truncate_at(const located& at);
  // Adds the closing time index entry (the segment's largest timestamp).
  void seal_time_index();
  // Whether the offset index file exists. A segment a roll closed gets
  // its index files only once its data is synced (log::seal_closed), so a
  // segment without them may have lost its tail in a crash.
  bool has_index_file() const { return fs_.exists(index_path_); }
  // Removes both index files if present (no sync): stale ones of a closed
  // segment that truncation made active again.
  status remove_index_files();
  // Writes both index files whole; synced (atomic replace) when `sync`.
  status write_indexes(bool sync) { return write_index_files(fs_, index_files_now(), sync); }
  // The index files' bytes as they are now, to be written later without the
  // log's mutex (a roll's seal on the flusher thread).
  struct index_files {
    std::string offsets_path, times_path;
    std::vector<std::byte> offsets, times;
  };
  index_files index_files_now() const;
  // Writes them whole; synced (atomic replace) when `sync`. Touches no
  // segment, so it needs no lock.
  static status write_index_files(io::filesystem& fs, const index_files& f, bool sync);
  // Syncs the .log file.
  status sync();
  // Deletes the segment's files and drops its cached handle.
  status remove_files();
  // Renames the .log file to `to` and follows it (the cached handle is
  // dropped; the next access opens the new name). Index paths do not change.
  status rename_log(const std::string& to);
  // The end of a read region that starts at `pos` (a batch boundary below
  // size()): whole batches, at most `max_bytes` unless the first batch alone
  // is larger.
  result<uint64_t> region_end_from(uint64_t pos, size_t max_bytes);
  // Retires the segment (docs/log_format.md, "Deleting segments"): drops its
  // cached handle and renames each of its files that exists to
  // "<name>.deleted". Returns the renamed paths, for the file_deleter. Open
  // descriptors (read regions) stay valid. The segment must not be used
  // afterwards.
  result<std::vector<std::string>> retire();

  result<std::shared_ptr<io::file>> file() { return files_.get(log_path_); }
  offset base() const { return base_; }
  offset next() const { return next_; }  // one past the last offset; base() when empty
  uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t max_timestamp() const { return max_ts_; }  // -1 when empty
  int64_t created_ms() const { return created_ms_; }
  // The file's modification time: what retention goes by for a segment
  // whose batches carry no timestamp. A closed segment's never changes
  // (a rewrite makes a new segment), so it is read from the file once; an
  // active one's each time. Called with the log mutex held.
  result<int64_t> modified_ms(bool closed);
  // True when another index entry would pass `segment_index_bytes`.
  bool index_full(int64_t segment_index_bytes) const;
  const std::string& log_path() const { return log_path_; }

  // A segment closed by a roll is "unsealed" until the flusher has synced
  // its .log file (synced()) and written its index files (sealed()); the
  // log's recovery point never passes it before. Segments opened from disk,
  // created by a rewrite, and the active one count as sealed.
  bool sealed() const { return sealed_; }
  bool synced() const { return synced_; }
  void mark_unsealed() { sealed_ = synced_ = false; }
  void mark_synced() { synced_ = true; }
  void mark_sealed() { sealed_ = synced_ = true; }
  // A seal is writing this segment's files without the log's mutex: it
  // stays in the log (a log-start move retires it once the seal is done).
  bool sealing() const { return sealing_; }
  void set_sealing(bool on) { sealing_ = on; }

 private:
  segment(io::filesystem& fs, file_cache& files, const std::string& dir, offset base, int64_t now_ms,
          std::string log_path = {});

  struct walk_opts {
    bool verify_crc = false;
    bool add_entries = false;
    int64_t interval_bytes = 0;
    offset min_base;
    const batch_visitor* visit = nullptr;
  };
  // Reads batches from `from` (a batch boundary) to `to`, updating next_,
  // max_ts_, size_ and the index counters. Returns the position of the first
  // batch that is partial or invalid (== `to` when all are good) and why.
  result<std::pair<uint64_t, std::optional<error>>> walk(uint64_t from, uint64_t to, const walk_opts& o);
  result<model::batch::header> read_header(io::file& f, uint64_t pos, uint64_t end);
  // The start of the first damaged range at or after `pos`, or size_.
  uint64_t damage_after(uint64_t pos) const;
  void index_batch(uint64_t pos, const model::batch::header& h, const walk_opts& o);
  void reset_to_start();
  result<std::vector<std::byte>> read_index_file(const std::string& path);

  io::filesystem& fs_;
  file_cache& files_;
  const offset base_;
  std::string log_path_;  // changes only by rename_log (a cleaned copy)
  const std::string index_path_, time_index_path_;
  offset next_;
  uint64_t size_ = 0;
  uint64_t reserved_end_ = 0;  // file bytes below this were reserved (or tried), in this process
  uint64_t zeroed_end_ = 0;    // file bytes in [size_, zeroed_end_) are zeros this process wrote
  uint64_t prepared_end_ = 0;  // below it, appends need a data-only sync (set_prepared)
  int64_t max_ts_ = -1;
  std::optional<int64_t> closed_modified_ms_;
  int64_t created_ms_;
  int64_t bytes_since_index_ = 0;
  int32_t last_batch_rel_ = -1;
  offset_index offsets_;
  time_index times_;
  std::vector<damage> damage_;  // ascending, disjoint; read paths skip them
  std::vector<std::pair<uint64_t, uint64_t>> verified_;  // ascending, disjoint, not adjacent
  const uint64_t id_;
  bool sealed_ = true, synced_ = true, sealing_ = false;
};

}  // namespace sluice::storage
