#pragma once

// The durable partition log: one directory of segments per partition, holding
// Kafka RecordBatch v2 bytes exactly as producers sent them (see
// docs/log_format.md for the bytes on disk).
//
// Words (one meaning each, from base/types.h):
//   log start offset  first offset still readable
//   log end offset    one past the last offset appended (the next offset)
//   durable offset    every offset below it survives a crash (fdatasync done)
//
// Thread model. The broker has a few asio I/O threads and a small pool of
// flusher threads (storage/flusher.h) shared by all logs.
//   * Every public method of `log` is thread-safe. Appends, truncation and
//     log-start moves are serialised by a per-log mutex; call them from any
//     I/O thread.
//   * A segment roll on the append path only opens the next segment file.
//     Syncing the closed segment, writing its index files and moving the
//     recovery point past it ("sealing" it) happen on a flusher thread, so
//     an append never waits on an fsync. Until then recovery rescans it.
//   * Removing or replacing segments (truncation, compaction's swap,
//     damage removal) and writing the recovery point take the seal mutex,
//     so they wait for a seal in progress. A log-start move (retention,
//     DeleteRecords) does not wait: it moves the log start at once and
//     leaves a segment being sealed for the seal to retire.
//   * Reads run concurrently with appends: they hold the mutex only to locate
//     the batch, then return a `file_region` whose bytes are immutable until
//     a truncation below them. A region keeps its file open while held, even
//     if the segment is deleted or its handle is evicted from the cache.
//   * Durability callbacks (`on_durable`) run on a flusher thread, or on the
//     thread whose append, truncation or flush answered them, or on the
//     calling thread when the offset is already durable. They run with no
//     lock of the log held and may call back into it, but must not block (no
//     wait_durable inside a callback: it could wait for its own thread).
//
// Errors are values. An I/O error or a full disk while writing takes the log
// offline for writes (`errc::log_offline` from then on, one ERROR log line);
// reads of what is already written keep working and nothing durable is
// damaged. Bad bytes from a producer are refused (`errc::invalid_record`,
// `corrupt_data`). Bad bytes on disk (docs/log_format.md, "Damaged
// batches"): a torn tail of the last segment is cut at recovery; a damaged
// range with intact batches after it, found by recovery or by scrub(), is
// never served again and is removed by a crash-safe rewrite, its offsets
// left as a gap; both are logged.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/limits.h"
#include "base/result.h"
#include "base/types.h"
#include "io/file.h"
#include "model/record_batch.h"
#include "storage/log_types.h"

namespace sluice::storage {

class file_cache;
class file_deleter;
class flusher;
class scrubber;
class segment;
struct segment_damage;

// What the log needs from its surroundings. Pointers are non-owning and must
// outlive the log; log_manager provides them.
struct log_context {
  io::filesystem* fs = nullptr;
  sluice::clock* clk = nullptr;
  file_cache* files = nullptr;  // shared cap on open segment files
  flusher* flush = nullptr;     // shared group-commit threads
  file_deleter* deleter = nullptr;  // shared delayed removal of retired segment files
  // Removes damaged ranges that reads found (docs/log_format.md, "Damaged
  // batches"); optional: without it they are removed by the next scrub().
  scrubber* scrub = nullptr;
  // A follower's synced bytes of the active segment further than this
  // behind its end leave the page cache (the log drops them while its last
  // append was append_replicated; limits.h); 0: never.
  uint64_t follower_cache_drop_behind_bytes = 0;
};

// A cleaned copy of a run of closed segments being written by compaction
// (docs/log_format.md, "Replacing segments", step 1). Made by
// log::begin_rewrite and handed back to log::replace_segments; dropping it
// before that removes its file. Used by one thread (the cleaner) and never
// locks the log: writing it does not hold up appends or reads.
class segment_rewrite {
 public:
  ~segment_rewrite();
  segment_rewrite(const segment_rewrite&) = delete;
  segment_rewrite& operator=(const segment_rewrite&) = delete;

  // Appends whole v2 batches. Each is validated (header, CRC) and must lie
  // within [base(), end()), above every offset appended before, and within
  // base() + 2^31 - 1. Offsets and header fields are kept as given (gaps
  // are fine). Empty input is a no-op. errc::invalid_record for a batch
  // that breaks these rules; I/O errors as they come.
  status append(std::span<const std::byte> batches);

  offset base() const { return base_; }
  offset end() const { return end_; }
  // One past the last offset appended so far (base() when nothing was).
  offset next() const { return next_; }
  uint64_t size_bytes() const;
  const std::string& path() const;

 private:
  friend class log;
  segment_rewrite(io::filesystem& fs, std::unique_ptr<segment> seg, offset base, offset end,
                  int64_t interval_bytes);

  io::filesystem& fs_;
  std::unique_ptr<segment> seg_;  // null once handed to the log
  const offset base_, end_;
  offset next_;
  const int64_t interval_bytes_;
  std::vector<std::pair<offset, uint64_t>> run_;  // base and size of each segment replaced
  std::vector<uint64_t> run_ids_;                 // and its segment::id(): a replaced one never matches
  uint64_t truncations_ = 0;                      // the log's counter at begin_rewrite
};

class log : public std::enable_shared_from_this<log> {
 public:
  // Opens (recovering if needed) or creates the log in `dir`. `name` is used
  // in log lines ("topic-3"). Appends are accepted once this returns.
  // Creating costs no sync: the new segment's name becomes durable with the
  // first sync of appended data, and `dir`'s own name in its parent is the
  // caller's to make durable (log_manager syncs the data directory once for
  // the many logs it creates together) before it hands the log out.
  // `closed_cleanly` says the caller knows, from a record of its own written
  // after close_without_marker() returned ok (log_manager's clean-shutdown
  // record), that the files are as a clean close left them: the log opens as
  // if it had found its clean-shutdown marker. Only a caller that removed
  // that record durably before this call may pass true, so that a crash
  // after appends never trusts unsynced bytes.
  static result<std::shared_ptr<log>> open(const log_context& ctx, std::string dir,
                                           std::string name, log_config cfg,
                                           bool closed_cleanly = false);
  // Destroying a log without close() is like a crash: no clean-shutdown
  // marker, so the next open runs recovery.
  ~log();
  log(const log&) = delete;
  log& operator=(const log&) = delete;

  // ---- Writing ---------------------------------------------------------
  // Appends one or more concatenated v2 batches as the leader: validates each
  // header (never decoding records), writes the assigned base offsets and
  // `epoch` into `batches` in place, and appends the bytes at the log end
  // offset. The data is in the page cache on return, not yet durable: use
  // on_durable(result.last, ...) to learn when it is.
  // `crc`: already_verified when the caller checked every batch's CRC-32C
  // (partition::append does, once per produced batch); the log then checks
  // the headers only.
  result<append_result> append(std::span<std::byte> batches, leader_epoch epoch,
                               model::batch::crc_check crc = model::batch::crc_check::verify);
  // append() for batches the caller parsed and checked already (as
  // model::batch::check_all does at strictness::leader, CRCs included):
  // `headers` holds one per batch of `batches`, in order, and is updated
  // with the offsets and epoch written. Nothing is parsed again.
  result<append_result> append_checked(std::span<std::byte> batches, std::span<model::batch::header> headers,
                                       leader_epoch epoch);
  // Appends batches as a follower: offsets and epochs are kept as in the
  // bytes; the first base offset must be >= the log end offset, except in
  // an empty log whose start lies inside the first batch (a leader's log
  // start that DeleteRecords put mid-batch): the log then begins at that
  // batch's base, below its unchanged log start. The bytes are only read.
  result<append_result> append_replicated(std::span<const std::byte> batches);
  // The same for batches checked already (check_all or check_whole_prefix
  // at strictness::stored, CRCs included), `headers` one per batch in order.
  result<append_result> append_replicated(std::span<const std::byte> batches,
                                          std::span<const model::batch::header> headers);

  // Discards every offset >= `o` across segments (replication's truncation).
  // A batch that straddles `o` goes entirely, so the log end offset may end
  // below `o`; if that would put it below the log start offset the log is
  // emptied and restarts at `o`, and so it is for `o` below the log start
  // offset (a follower whose retention passed the divergence point). `o`
  // above the log end offset is refused.
  // Durability waiters for discarded offsets fail with offset_out_of_range.
  status truncate_to(offset o);
  // Empties the log and restarts it at `o`, which may lie past the log end
  // offset (a follower whose leader's log now starts beyond all it holds:
  // Kafka's truncateFullyAndStartAt). The leader-epoch history is cleared.
  status reset_to(offset o);
  // Moves the log start offset up to `o` (<= log end offset) and deletes the
  // segments wholly below it (retention, DeleteRecords). Never moves down.
  status advance_log_start(offset o);
  // The same on a flusher thread (its checkpoint's fsyncs stay off the
  // caller's, an I/O thread's); `done` runs there with the outcome.
  void advance_log_start_async(offset o, std::function<void(status)> done);

  // ---- Durability (group commit) -----------------------------------------
  // Calls `cb` once every offset <= `o` is durable (see durable_callback).
  // Requests from many appenders share one fdatasync on the flusher thread.
  void on_durable(offset o, durable_callback cb);
  // Blocking form of on_durable, for tests and tools (never on an I/O thread).
  status wait_durable(offset o);
  // Syncs everything written so far on the calling thread and answers the
  // waiters it covers; then seals the segments rolls closed (index files,
  // recovery point) and calls the seal hook if it sealed any.
  status flush();
  // Called (on a flusher thread, or the thread of a flush()) after segments
  // closed by a roll were sealed, with no lock of the log held: the
  // partition writes its producer-state snapshot then. Set once, before the
  // first append.
  void set_seal_hook(std::function<void()> fn);

  // ---- Reading -------------------------------------------------------------
  // Returns the region starting at the batch that contains `o` and holding
  // whole batches up to `max_bytes` (always at least one whole batch, even
  // if larger), all within one segment and all with last offset < `upper`
  // (default: the log end offset; pass the high watermark for consumers).
  // Bytes that no scan of this process has checked (a segment trusted after
  // a clean shutdown, not yet scrubbed) are read and checked first, CRC
  // included, without the mutex; damage found is skipped from then on
  // (docs/log_format.md, "Damaged batches"), so a region never holds it.
  // `o` == the end (or `upper`) gives an empty region (len 0, file null),
  // the answer a fetch at the high watermark waits on; `o` outside
  // [log start, log end] gives offset_out_of_range.
  result<file_region> read(offset o, size_t max_bytes, std::optional<offset> upper = std::nullopt);
  // The same bytes copied into memory (tests, replication).
  result<std::vector<std::byte>> read_bytes(offset o, size_t max_bytes,
                                            std::optional<offset> upper = std::nullopt);

  // ---- Compaction's rewrite path (docs/log_format.md, "Replacing segments") --
  // Reads the closed segment whose base offset is `base` from byte position
  // `pos` (0, or the end of a region this returned): whole batches, at most
  // `max_bytes` unless the first batch is larger, with first_offset and
  // next_offset set from them; len 0 at the segment's end. Checked and
  // skipping damage as read() is, so the region may start after `pos`:
  // continue from its pos + len. Batches below the log start offset are
  // included (the cleaner decides). errc::not_found when the log has no
  // closed segment at `base` (any more).
  result<file_region> read_segment(offset base, uint64_t pos, size_t max_bytes);
  // Starts a cleaned copy of the closed segments from `base` to `end`, where
  // `end` is the base offset of the segment that follows them (the active
  // segment at most: it is never replaced). errc::not_found when the log has
  // no such run.
  result<std::unique_ptr<segment_rewrite>> begin_rewrite(offset base, offset end) {
    return begin_rewrite(base, end, "cleaned");
  }
  // Replaces the run with the cleaned copy, crash-safe (steps 1-5), holding
  // the log's mutex only from step 2 on (renames, directory syncs, two small
  // index files). errc::not_found when the run changed since begin_rewrite
  // (retention, DeleteRecords or truncation got there first): nothing
  // changes and the copy is dropped. A failure after the first old file was
  // renamed takes the log offline for writes; the next open finishes the
  // swap.
  status replace_segments(std::unique_ptr<segment_rewrite> rw);
  // The cleaner checkpoint: every offset below it has been cleaned. Never
  // below the log start offset.
  offset cleaner_checkpoint() const;
  // Records it (`cleaner-offset-checkpoint`, replaced atomically). Clamped
  // to the log end offset.
  status set_cleaner_checkpoint(offset o);

  // ---- Offsets ---------------------------------------------------------------
  offset log_start_offset() const { return offset(log_start_.load()); }
  offset log_end_offset() const { return offset(log_end_.load()); }
  offset durable_offset() const { return offset(durable_.load()); }
  // Base offset of the active (last) segment: a cheap way to notice a roll
  // without copying segments().
  offset active_segment_base() const { return offset(active_base_.load()); }
  // First batch whose max_timestamp >= ts_ms (ListOffsets by time); nullopt
  // when every batch is older.
  result<std::optional<timestamp_lookup>> offset_for_timestamp(int64_t ts_ms);
  // The first batch (at or above the log start offset) that carries the
  // largest max_timestamp of the log (ListOffsets MAX_TIMESTAMP, KIP-734):
  // the segment with the largest max_timestamp, then the first batch in it
  // whose max_timestamp equals it. `base` is clamped to the log start
  // offset like offset_for_timestamp's. nullopt when the log holds no batch
  // with a timestamp (>= 0). Reads batch headers only; the record inside
  // the batch is the caller's to find.
  result<std::optional<timestamp_lookup>> offset_of_max_timestamp();

  // ---- Leader epochs ---------------------------------------------------------
  std::vector<epoch_entry> leader_epochs() const;
  // The latest entry of that history (the epoch of the last batch), or
  // nullopt for an empty one; without copying the history.
  std::optional<epoch_entry> latest_epoch() const;
  // OffsetsForLeaderEpoch: the largest epoch <= `e` and the offset where it
  // ended (the start of the next epoch, or the log end offset). nullopt when
  // no epoch <= `e` is known.
  std::optional<epoch_entry> end_offset_for_epoch(leader_epoch e) const;

  // ---- Management --------------------------------------------------------------
  // Validates and applies new settings (from the next append on). Turning
  // fsync back on first syncs every segment, since data written without it
  // was already reported durable.
  status set_config(const log_config& cfg);
  log_config config() const;
  bool offline() const { return offline_.load(); }
  // True from an append refused for lack of disk space (ENOSPC, EDQUOT)
  // until the next append succeeds. Unlike other write errors, a full disk
  // does not take the log offline: the partial write is cut off, the
  // producer gets errc::no_space (KAFKA_STORAGE_ERROR), and the next append
  // tries again, so writes resume by themselves once space returns. A
  // failed fdatasync still takes the log offline, since the page cache may
  // then have dropped data that was already written.
  bool out_of_space() const { return out_of_space_.load(); }
  uint64_t out_of_space_errors() const { return out_of_space_errors_.load(); }
  std::vector<segment_info> segments() const;
  const std::string& dir() const { return dir_; }
  const std::string& name() const { return name_; }

  // What recovery found when the log was opened. Immutable after open.
  const recovery_info& recovery() const { return recovery_; }

  // ---- Damage (docs/log_format.md, "Damaged batches") ---------------------
  // Checks the CRC and header of every batch of every segment (the active
  // one up to its size when reached), reading without the log's mutex and
  // calling `pace` (may be empty) after each chunk. Damage is handled as
  // recovery handles it: from the moment it is found reads skip it, the
  // segment is rewritten without it (rolled first when active), and a WARN
  // line names file, byte range and offsets. Returns the number of damaged
  // ranges found; errc::shutting_down when `pace` or close() stopped it.
  // One caller at a time (the scrubber thread, or a test).
  result<size_t> scrub(const scrub_pace& pace);
  // Rewrites every segment that holds a known damaged range without it
  // (the scrubber's thread, for ranges that reads found). First error.
  status remove_known_damage();
  damage_stats damage() const;

  // Syncs everything, writes index files and checkpoints and the
  // clean-shutdown marker. Afterwards every call fails with shutting_down
  // and pending durability waiters have been answered. Idempotent. A closed
  // log no longer touches its log_context, so holders may outlive the
  // log_manager.
  status close();
  // The same without the clean-shutdown marker: ok means the log's files are
  // durable and as a clean close leaves them, for a caller that records the
  // clean close itself, once for many logs (log_manager::shutdown). A log
  // whose files did not change since it was opened cleanly (or created)
  // costs no write and no sync here.
  status close_without_marker();

  // Called by a flusher thread: syncs the active segment and answers the
  // waiters it covers. Not for other callers.
  void flush_for_waiters() { flush().ignore(); }
  // Called by a flusher thread when the flush.ms timer this log asked for
  // fires: re-arms for the next append, then syncs. Not for other callers.
  void flush_on_timer();
  // Called by a flusher thread with the logs queued for a sync: one group
  // commit for all of them. The files of every log are handed to its file
  // system at once (io::filesystem::sync_together), which may make them
  // durable with fewer device flushes than one per file; then each log
  // answers its waiters. A log whose sync failed goes offline alone. The
  // flusher seals each afterwards (seal_after_flush), outside the round.
  // Not for other callers.
  static void flush_together(std::vector<std::shared_ptr<log>> logs);
  // The rest of flush() after its sync and answers: seals the segments
  // rolls closed and calls the seal hook if it sealed any. For a flusher
  // thread after flush_together.
  status seal_after_flush();
  // Called by a flusher thread before it syncs a log whose flush.ms timer
  // fired: the next append arms the timer again.
  void timer_fired() { flush_timer_armed_ = false; }
  // Called by the flusher's preparing thread when an append asked for it:
  // writes the active segment's prepared tail (segment::write_zeros) up to
  // limits::segment_prepare_bytes past its end, a piece at a time with mu_
  // held, then syncs the file without mu_ and, unless the segment rolled or
  // was cut meanwhile, records the tail as prepared. Not for other callers.
  void prepare_tail();

 private:
  log(const log_context& ctx, std::string dir, std::string name, log_config cfg,
      bool closed_cleanly);
  status close_files(bool write_marker);

  struct waiter {
    offset o;
    durable_callback cb;
  };

  // Recovery (log_recovery.cc).
  status recover();
  result<std::vector<offset>> list_segment_bases();
  status finish_swaps(const std::vector<std::string>& names);
  void load_checkpoints(std::optional<offset>& rp, std::optional<offset>& start);
  status recover_segments(std::vector<offset> bases, std::optional<offset> rp, bool clean);
  void report_cut(const std::string& file, uint64_t pos, uint64_t bytes, size_t later, const std::string& why);

  // Damage (log_damage.cc).
  // One WARN line per range; `removal` says when it leaves the file.
  void report_damage(const std::string& file, const std::vector<segment_damage>& ds, const char* found_by,
                     const char* removal);
  // Makes the damage `ds` found in the segment `seg_id` (while the log's
  // truncation counter was `truncations`) unreadable, then removes it.
  // Damage that is already known, or a segment that changed meanwhile, is
  // ignored: the next scrub looks again. Returns the ranges newly found.
  result<size_t> handle_damage(uint64_t seg_id, uint64_t truncations, std::vector<segment_damage> ds);
  // Rewrites the segment at `base` without its damaged ranges, through
  // compaction's crash-safe swap; rolls first when it is the active one.
  status remove_damage(offset base);
  // begin_rewrite with the copy at "<base>.<end>.<ext>": damage removal
  // writes "repair" copies, so a clean of the same segment running at the
  // same time (the cleaner thread) never writes into its file; the swap
  // itself is serialised by the mutex and refuses a run that changed.
  result<std::unique_ptr<segment_rewrite>> begin_rewrite(offset base, offset end, const char* ext);
  status finish_recovery(std::optional<offset> rp_on_disk, std::optional<offset> start_on_disk,
                         const std::vector<epoch_entry>& epochs_on_disk, bool clean);

  // What an append asks of the flusher for flush.messages and flush.ms,
  // decided with mu_ held and asked (ask_flusher) once it is released.
  struct flush_ask {
    bool now = false;       // flush.messages reached, or a roll left a segment to seal
    int64_t after_ms = -1;  // arm the flush.ms timer
    bool prepare = false;   // the active segment's prepared tail runs short (prepare_tail)
  };
  // `headers`: one per batch, checked. For an append as the leader
  // (`epoch` set), `stamp` and `stamped` are the same batches' bytes and
  // headers, writable, which receive the offsets and the epoch; both empty
  // for a replicated append, which only reads.
  result<append_result> append_and_ask(std::span<const std::byte> batches,
                                       std::span<const model::batch::header> headers, std::span<std::byte> stamp,
                                       std::span<model::batch::header> stamped, std::optional<leader_epoch> epoch);
  void ask_flusher(const flush_ask& ask);

  // Writing, all with mu_ held.
  result<append_result> append_locked(std::span<const std::byte> batches, std::span<const model::batch::header> hs,
                                      std::span<std::byte> stamp, std::span<model::batch::header> stamped,
                                      std::optional<leader_epoch> epoch, flush_ask& ask);
  status maybe_roll(size_t incoming_bytes, offset incoming_last, flush_ask& ask);
  // Closes the active segment (unsealed: see seal_closed) and starts the
  // next one at the log end offset. Asks for a flush to seal it.
  status roll(flush_ask& ask);
  // Syncs every unsealed segment, writes its index files, marks it sealed
  // and moves the recovery point up to recovery_point_target_locked(). Takes
  // seal_mu_, then mu_ only briefly: the writes run without it, and a sync
  // for durability waiters (flush_mu_) runs beside it. True when
  // it sealed a segment.
  result<bool> seal_closed();
  // Where the recovery point may be: the base of the first segment that is
  // unsealed, holds known damage (a crash before its rewrite rescans it),
  // or is the active one.
  offset recovery_point_target_locked() const;
  // With seal_mu_ and mu_ held, as for every caller that removes
  // segments or writes the recovery point.
  status truncate_locked(offset o);
  status truncate_fully_locked(offset o);
  // A replicated append to an empty log whose start lies inside `first`
  // (the leader's log start, moved mid-batch by DeleteRecords): the empty
  // segment is replaced by one at the batch's base; true when it was.
  result<bool> rebase_for_straddling_batch_locked(const model::batch::header& first);
  // Takes mu_ only: a segment being sealed stays until the seal retires it.
  status advance_start_locked(offset o, flush_ask& ask);
  // Retires the segments wholly below the log start offset, from the
  // first, stopping at one a seal is writing (mu_ held).
  status retire_below_start_locked();
  status remove_segment_files(segment& s);
  // Renames a segment that leaves the log to *.deleted and schedules the
  // removal of its files; the caller drops it from segments_ (with mu_ held).
  status retire_segment(segment& s);
  status go_offline(const error& e);
  // A write failed: errc::no_space leaves the log writable (see
  // out_of_space()); anything else takes it offline.
  status write_failed(const error& e);
  status check_writable() const;
  size_t segment_index_for(offset o) const;
  segment& active() { return *segments_.back(); }
  void note_active();

  // Checkpoints, with mu_ held (and seal_mu_ for the recovery point).
  status write_recovery_point(offset o);
  status write_log_start(offset o);
  // The leader-epoch checkpoint, from epochs_ (mu_ held) or from a copy
  // (mu_ not held). Every writer holds seal_mu_, so writes never cross.
  status write_epochs();
  status write_epochs(const std::vector<epoch_entry>& epochs);
  status write_cleaner_checkpoint(offset o);
  status sync_dir_if_fsync();
  // Whether `rw`'s run is still exactly the log's segments there; the index
  // of its first segment when it is.
  std::optional<size_t> find_run(const segment_rewrite& rw) const;
  status swap_locked(segment_rewrite& rw, size_t first);
  status write_clean_marker();
  bool note_epoch_in_memory(leader_epoch e, offset start);
  bool truncate_epochs(offset end);
  bool truncate_epochs_from_start(offset start);

  // Reading. A region of bytes no scan of this process has checked is
  // checked before it is served (docs/log_format.md, "Damaged batches").
  struct read_check {
    bool needed = false;
    uint64_t seg_id = 0, truncations = 0, seg_size = 0;
    offset seg_base;
  };
  result<file_region> read_locked(offset o, size_t max_bytes, std::optional<offset> upper, read_check& check);
  result<file_region> read_segment_locked(offset base, uint64_t pos, size_t max_bytes, read_check& check);
  // Records a check's outcome for the segment `c.seg_id`: the damaged
  // ranges `ds` skipped by reads from now on (reported, their removal left
  // to the scrubber), or, when there are none, [from, to) checked. Nothing
  // when the segment changed meanwhile.
  void note_checked(const read_check& c, uint64_t from, uint64_t to, const std::vector<segment_damage>& ds);

  // Durability. A sync is planned and finished with flush_mu_ held; the
  // file syncs between run without mu_, so appends go on meanwhile.
  struct pending_sync {
    std::vector<std::shared_ptr<io::file>> files;  // closed segments not yet synced, then the active one
    std::vector<uint64_t> closed;                  // their ids: a segment may leave the log meanwhile
    bool dir = false;                              // a roll created a file: sync the directory too
    offset target;                                 // durable once the files are
    uint64_t gen = 0, rolls = 0;                   // truncations_ and rolls_ when planned
    uint64_t active_id = 0, active_bytes = 0;      // the active segment and its size when planned
    // Only the active segment, written inside its prepared tail: its data
    // alone needs syncing (io::file::sync_data).
    bool data_only = false;
  };
  // The part of the active segment to drop from the page cache now that
  // `p` synced it (log_context::follower_cache_drop_behind_bytes), as
  // (pos, len); len 0: none. With mu_ held.
  std::pair<uint64_t, uint64_t> cache_drop_locked(const pending_sync& p);
  // False: nothing to sync (fsync off, or already durable to the end).
  result<bool> plan_sync_locked(pending_sync& p);
  // `st`: how the file syncs went. Syncs the directory if planned, then
  // moves the durable offset, or takes the log offline on an error.
  status finish_sync_locked(const pending_sync& p, status st);
  status sync_once();
  void doom_waiters_from(offset o);  // with mu_ held
  void answer_waiters();             // with no lock held

  const log_context ctx_;
  const std::string dir_;
  const std::string name_;

  mutable std::mutex mu_;  // guards everything below down to the atomics
  log_config cfg_;
  std::vector<std::unique_ptr<segment>> segments_;  // ascending base offsets; back() is active
  std::vector<epoch_entry> epochs_;
  // epochs_ differs from the leader-epoch checkpoint. An append that
  // starts an epoch and a log-start move change the history in memory
  // only: an append runs on the produce path and must not wait for the
  // checkpoint's fsyncs. That is safe because recovery rebuilds
  // the history from the batches past the recovery point and cuts it to
  // the log start checkpoint; so the checkpoint is written before the
  // recovery point passes a change (seal_closed) and before a clean close.
  // Truncation, which lowers the recovery point, still writes it at once.
  bool epochs_dirty_ = false;
  offset recovery_point_;  // written with seal_mu_ and mu_ held
  // A roll or the log's creation made a file whose name the next sync must
  // make durable in the log's directory.
  bool dir_unsynced_ = false;
  // Only a roll makes a segment unsynced and unsealed. Rolls so far, and
  // the count at which a sync (a seal) last found every closed segment
  // synced (sealed): while they are equal the per-sync scan of the
  // segments is skipped, so a group commit costs no walk of a long log.
  uint64_t rolls_ = 0, synced_at_roll_ = 0, sealed_at_roll_ = 0;
  std::function<void()> seal_hook_;
  offset cleaner_checkpoint_;  // as in the file; 0 when there is none
  uint64_t truncations_ = 0;  // bumped by truncation so an in-flight sync cannot overshoot
  // The active segment (its id) and how much of it left the page cache.
  uint64_t cache_dropped_segment_ = 0, cache_dropped_to_ = 0;
  // The last append was a follower's (append_replicated): only a
  // follower's copy leaves the page cache (cache_drop_locked).
  bool follower_tail_ = false;
  bool prepare_asked_ = false;  // a prepare_tail is queued or running
  int64_t prepare_skip_until_ms_ = 0;  // no prepare_tail before (monotonic): appends outpaced one
  int64_t unflushed_messages_ = 0;  // offsets appended since the last sync began (flush.messages)
  recovery_info recovery_;
  const bool closed_cleanly_;        // open()'s argument, read by recover()
  bool clean_marker_found_ = false;  // recover() found the per-log marker (and removes it)
  // The files on disk are exactly what a clean close would leave: the log
  // was created, or opened after a clean shutdown with nothing cut, and
  // nothing was appended, rolled or truncated since. Lets close skip the
  // sync and the index writes of idle partitions.
  bool files_unchanged_ = false;

  std::atomic<int64_t> log_start_{0};
  std::atomic<int64_t> log_end_{0};
  std::atomic<int64_t> durable_{0};
  std::atomic<int64_t> active_base_{0};  // segments_.back()->base(), updated under mu_
  std::atomic<bool> offline_{false};
  std::atomic<bool> out_of_space_{false};
  std::atomic<uint64_t> out_of_space_errors_{0};
  std::atomic<bool> closed_{false};
  std::atomic<bool> flush_timer_armed_{false};  // a flush.ms timer is queued with the flusher
  std::atomic<uint64_t> damaged_ranges_{0}, damaged_bytes_{0}, damage_removed_bytes_{0}, scrubbed_bytes_{0};

  // One sync of this log at a time (flush_mu_) and one seal (seal_mu_); a
  // sync and a seal may run at once, so acks=all waiters never queue behind
  // a roll's index writes. No segment leaves the log while a seal runs:
  // removers take seal_mu_ (a sync holds only file handles and segment
  // ids), except a log-start move, which skips segments being sealed.
  // Order: flush_mu_, seal_mu_, mu_.
  std::mutex flush_mu_;
  std::mutex seal_mu_;
  std::mutex waiters_mu_;  // taken after mu_ when both are held
  std::vector<waiter> waiters_;  // bounded by the appends in flight
  std::vector<std::pair<waiter, error>> doomed_;  // answered by answer_waiters()
};

}  // namespace sluice::storage
