// The partition log: appends, reads, truncation, log-start moves and
// leader epochs. Group-commit durability is in log_durability.cc, recovery
// in log_recovery.cc.

#include "storage/log.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <future>
#include <thread>

#include "base/log.h"
#include "model/record_batch.h"
#include "storage/checkpoint.h"
#include "storage/log_files.h"
#include "storage/file_deleter.h"
#include "storage/flusher.h"
#include "storage/scrubber.h"
#include "storage/segment.h"

namespace sluice::storage {

namespace batch = model::batch;

status log_config::validate() const {
  auto bad = [](const std::string& what) { return status(errc::invalid_config, what + " out of range"); };
  if (segment_bytes < limits::min_segment_bytes || segment_bytes > limits::max_segment_bytes)
    return bad("segment.bytes");
  if (segment_ms < 1) return bad("segment.ms");
  if (file_delete_delay_ms < 0) return bad("file.delete.delay.ms");
  if (flush_messages < 1) return bad("flush.messages");
  if (flush_ms < 0) return bad("flush.ms");
  if (index_interval_bytes < 0) return bad("index.interval.bytes");
  if (segment_index_bytes < static_cast<int64_t>(limits::time_index_entry_bytes) ||
      segment_index_bytes > limits::max_segment_bytes)
    return bad("segment.index.bytes");
  return {};
}

log::log(const log_context& ctx, std::string dir, std::string name, log_config cfg,
         bool closed_cleanly)
    : ctx_(ctx),
      dir_(std::move(dir)),
      name_(std::move(name)),
      cfg_(cfg),
      closed_cleanly_(closed_cleanly) {}

log::~log() {
  // A closed log already dropped its handles (and its manager may be gone).
  if (!closed_)
    for (auto& s : segments_) ctx_.files->forget(s->log_path());
}

result<std::shared_ptr<log>> log::open(const log_context& ctx, std::string dir, std::string name,
                                       log_config cfg, bool closed_cleanly) {
  SLUICE_ASSERT(ctx.fs && ctx.clk && ctx.files && ctx.flush && ctx.deleter, "incomplete log_context");
  SLUICE_TRY(cfg.validate());
  SLUICE_TRY(ctx.fs->create_dirs(dir));
  std::shared_ptr<log> l(new log(ctx, std::move(dir), std::move(name), cfg, closed_cleanly));
  SLUICE_TRY(l->recover());
  // A recovery that cut, scanned or removed damage (which rolls a damaged
  // active segment) left files a clean close must rewrite.
  l->files_unchanged_ = l->recovery_.created || (l->recovery_.clean_shutdown && !l->recovery_.truncated &&
                                                 l->recovery_.damaged_ranges == 0);
  return l;
}

// ---- Writing -------------------------------------------------------------------

void log::note_active() { active_base_ = segments_.back()->base().value(); }

status log::check_writable() const {
  if (closed_) return status(errc::shutting_down, name_ + " is closed");
  if (offline_) return status(errc::log_offline, name_ + " is offline for writes after an I/O error");
  return {};
}

status log::go_offline(const error& e) {
  if (!offline_.exchange(true))
    SLUICE_LOG_ERROR("partition {} offline for writes: {} ({})", name_, e.message, errc_name(e.code));
  // Waiters pending now learn the cause; later ones get log_offline.
  std::lock_guard g(waiters_mu_);
  for (auto& w : waiters_) doomed_.push_back({std::move(w), e});
  waiters_.clear();
  return status(e);
}

status log::write_failed(const error& e) {
  if (e.code != errc::no_space) return go_offline(e);
  out_of_space_errors_.fetch_add(1, std::memory_order_relaxed);
  if (!out_of_space_.exchange(true))
    SLUICE_LOG_ERROR("partition {}: writes refused until disk space returns: {}", name_, e.message);
  return status(e);
}

result<append_result> log::append(std::span<std::byte> batches, leader_epoch epoch, batch::crc_check crc) {
  std::vector<batch::header> hs;
  SLUICE_TRY(batch::check_all(batches, batch::strictness::leader, hs, crc));
  return append_checked(batches, hs, epoch);
}

result<append_result> log::append_checked(std::span<std::byte> batches, std::span<batch::header> headers,
                                          leader_epoch epoch) {
  return append_and_ask(batches, headers, batches, headers, epoch);
}

result<append_result> log::append_replicated(std::span<const std::byte> batches) {
  std::vector<batch::header> hs;
  SLUICE_TRY(batch::check_all(batches, batch::strictness::stored, hs, batch::crc_check::verify));
  return append_replicated(batches, hs);
}

result<append_result> log::append_replicated(std::span<const std::byte> batches,
                                             std::span<const batch::header> headers) {
  return append_and_ask(batches, headers, {}, {}, std::nullopt);
}

result<append_result> log::append_and_ask(std::span<const std::byte> batches, std::span<const batch::header> headers,
                                          std::span<std::byte> stamp, std::span<batch::header> stamped,
                                          std::optional<leader_epoch> epoch) {
  flush_ask ask;
  result<append_result> r = [&] {
    std::lock_guard g(mu_);
    return append_locked(batches, headers, stamp, stamped, epoch, ask);
  }();
  answer_waiters();
  ask_flusher(ask);
  return r;
}

void log::ask_flusher(const flush_ask& ask) {
  if (ask.prepare) ctx_.flush->request_prepare(shared_from_this());
  if (ask.now)
    ctx_.flush->request(shared_from_this());
  else if (ask.after_ms >= 0)
    ctx_.flush->request_after(shared_from_this(), ask.after_ms);
}

void log::flush_on_timer() {
  // Cleared before the sync, so an append during it arms the next timer.
  flush_timer_armed_ = false;
  flush().ignore();
}

result<append_result> log::append_locked(std::span<const std::byte> batches, std::span<const batch::header> hs,
                                         std::span<std::byte> stamp, std::span<batch::header> stamped,
                                         std::optional<leader_epoch> epoch, flush_ask& ask) {
  SLUICE_TRY(check_writable());
  // The caller parsed and checked every header (check_all or the produce
  // path's own checks).
  SLUICE_ASSERT(!hs.empty(), "an append without batches");
  SLUICE_ASSERT(!epoch || (stamp.data() == batches.data() && stamped.data() == hs.data()),
                "a leader's append stamps the bytes and headers it appends");
  bool rebased = false;  // the empty log moved down to the first batch's base
  offset next(log_end_.load());
  if (epoch) {
    if (!epochs_.empty() && *epoch < epochs_.back().epoch)
      return error{errc::invalid_argument, name_ + ": append with stale leader epoch " +
                                               std::to_string(epoch->value())};
    size_t pos = 0;
    for (auto& h : stamped) {
      batch::stamp(stamp.data() + pos, next, *epoch);
      h.base_offset = next;
      h.partition_leader_epoch = epoch->value();
      next = h.last_offset() + 1;
      pos += h.size_bytes();
    }
  } else {
    // A follower emptied at its leader's log start (reset_to) fetches from
    // there; when DeleteRecords put that start inside a batch, the leader
    // answers the whole batch, which starts below this empty log's end.
    // The empty log moves down to the batch's base, its log start staying
    // where it is, so the follower appends it and goes on (Kafka's
    // follower does the same on an UnexpectedAppendOffsetException). Any
    // other batch below the log end offset is refused.
    SLUICE_ASSIGN_OR_RETURN(rebased, rebase_for_straddling_batch_locked(hs.front()));
    if (rebased) next = hs.front().base_offset;
    for (const auto& h : hs) {
      if (h.base_offset < next)
        return error{errc::invalid_argument, name_ + ": replicated batch at " +
                                                 std::to_string(h.base_offset.value()) + " below the log end offset " +
                                                 std::to_string(next.value())};
      next = h.last_offset() + 1;
    }
  }
  const offset first = hs.front().base_offset, last = hs.back().last_offset();
  if (last - first > INT32_MAX) return error{errc::invalid_record, name_ + ": batches span too many offsets"};
  SLUICE_TRY(maybe_roll(batches.size(), last, ask));
  if (last - active().base() > INT32_MAX)  // only a replicated gap into an empty segment gets here
    return error{errc::invalid_record, name_ + ": offsets too far from the segment base"};
  for (const auto& h : hs)
    if (note_epoch_in_memory(leader_epoch(h.partition_leader_epoch), h.base_offset)) epochs_dirty_ = true;
  // After a rebase the first epoch starts at the log start, as after a
  // log start move.
  if (rebased && truncate_epochs_from_start(offset(log_start_.load()))) epochs_dirty_ = true;
  files_unchanged_ = false;
  // Appends that run past the prepared tail outpace its preparation, which
  // then only doubles their writes: none for a while.
  if (const uint64_t tail = active().zeroed_end(); tail > active().size() && active().size() + batches.size() > tail)
    prepare_skip_until_ms_ = ctx_.clk->monotonic_ms() + limits::segment_prepare_backoff_ms;
  auto st = active().append(batches, hs, cfg_.index_interval_bytes, static_cast<uint64_t>(cfg_.segment_bytes));
  if (!st.ok()) return write_failed(st.err()).err();
  // A plain load first: the locked exchange only after a refused write.
  if (out_of_space_.load(std::memory_order_relaxed) && out_of_space_.exchange(false))
    SLUICE_LOG_INFO("partition {}: disk space is back; writes resumed", name_);
  log_end_ = last.value() + 1;
  follower_tail_ = !epoch;  // a replicated append: this broker follows
  if (cfg_.fsync && !prepare_asked_) {
    const segment& a = active();
    const uint64_t limit = static_cast<uint64_t>(cfg_.segment_bytes);
    if (a.zeroed_end() < limit && a.zeroed_end() - a.size() < limits::segment_prepare_bytes / 2 &&
        (prepare_skip_until_ms_ == 0 || ctx_.clk->monotonic_ms() >= prepare_skip_until_ms_))
      ask.prepare = prepare_asked_ = true;
  }
  if (!cfg_.fsync) {
    durable_ = log_end_.load();
  } else {
    unflushed_messages_ += last - first + 1;
    if (unflushed_messages_ >= cfg_.flush_messages)
      ask.now = true;
    else if (cfg_.flush_ms != INT64_MAX && !flush_timer_armed_.exchange(true))
      ask.after_ms = cfg_.flush_ms;
  }
  return append_result{first, last};
}

status log::maybe_roll(size_t incoming_bytes, offset incoming_last, flush_ask& ask) {
  segment& s = active();
  if (s.empty()) return {};
  const bool by_size = static_cast<int64_t>(s.size() + incoming_bytes) > cfg_.segment_bytes;
  const bool by_time = ctx_.clk->now_ms() - s.created_ms() >= cfg_.segment_ms;
  const bool by_index = s.index_full(cfg_.segment_index_bytes);
  const bool by_offset = incoming_last - s.base() > INT32_MAX;
  if (!(by_size || by_time || by_index || by_offset)) return {};
  return roll(ask);
}

// Closes the active segment for writing and starts a new one at the log end
// offset. Only the new file is created here; the old segment stays unsealed
// (its data unsynced, its index files unwritten, the recovery point below
// it) until seal_closed() runs on the flusher, so a crash never trusts
// unsynced bytes and an append never waits on an fsync.
status log::roll(flush_ask& ask) {
  files_unchanged_ = false;
  segment& old = active();
  const offset base(log_end_.load());
  // Creating the new file may meet a full disk and be tried again by the
  // next append.
  auto seg = segment::create(*ctx_.fs, *ctx_.files, dir_, base, ctx_.clk->now_ms());
  if (!seg.ok()) return write_failed(seg.err());
  old.seal_time_index();
  old.release_reserve();
  old.mark_unsealed();
  segments_.push_back(std::move(seg).value());
  note_active();
  dir_unsynced_ = cfg_.fsync;
  ++rolls_;
  ask.now = true;
  SLUICE_LOG_DEBUG("{}: rolled to segment {}", name_, base.value());
  return {};
}

offset log::recovery_point_target_locked() const {
  for (const auto& s : segments_)
    if (!s->sealed() || !s->damaged().empty()) return s->base();
  return segments_.back()->base();
}

result<bool> log::seal_closed() {
  struct job {
    segment* seg;  // marked sealing: stays in the log until the end
    segment::index_files files;
    std::shared_ptr<io::file> unsynced;
  };
  {
    std::lock_guard g(mu_);
    if (sealed_at_roll_ == rolls_) return false;  // every flush asks; most find nothing
  }
  std::lock_guard sg(seal_mu_);
  std::vector<job> jobs;
  bool fsync = false;
  uint64_t rolls = 0;
  {
    std::lock_guard g(mu_);
    if (closed_ || offline_) return false;
    fsync = cfg_.fsync;
    rolls = rolls_;
    for (size_t i = 0; i + 1 < segments_.size(); ++i) {
      segment& s = *segments_[i];
      if (s.sealed()) continue;
      job j{&s, s.index_files_now(), nullptr};
      // Its bytes are synced whatever `fsync` says (Kafka flushes the
      // segment a roll closed too): the recovery point that moves past it
      // next is durable, and recovery trusts what lies below it unscanned.
      // Without this a power loss after the move left the segment's
      // unsynced tail missing in the middle of the log, unseen by
      // recovery: a restarted replica fetched on from its end with a hole
      // below it, and lost acknowledged records once it led.
      if (!s.synced()) {
        auto f = s.file();
        if (!f.ok()) return go_offline(f.err()).err();
        j.unsynced = std::move(f).value();
      }
      s.set_sealing(true);
      jobs.push_back(std::move(j));
    }
  }
  if (jobs.empty()) {
    std::lock_guard g(mu_);
    sealed_at_roll_ = rolls;
    return false;
  }
  // The syncs and writes run without mu_. A full disk leaves the segments
  // unsealed; the next flush tries again.
  status st;
  bool sync_failed = false;  // takes the log offline; a failed write may be a full disk
  for (auto& j : jobs) {
    if (st.ok() && j.unsynced) sync_failed = !(st = j.unsynced->sync()).ok();
    if (st.ok()) st = segment::write_index_files(*ctx_.fs, j.files, fsync);
  }
  offset rp(-1);
  std::optional<std::vector<epoch_entry>> epochs;  // to write before the recovery point moves
  {
    std::lock_guard g(mu_);
    for (auto& j : jobs) {
      j.seg->set_sealing(false);
      if (st.ok()) j.seg->mark_sealed();
    }
    // What a log-start move left in place while it was being sealed.
    if (auto rs = retire_below_start_locked(); !rs.ok() && st.ok()) st = rs;
    if (!st.ok()) return (sync_failed ? go_offline(st.err()) : write_failed(st.err())).err();
    sealed_at_roll_ = rolls;  // what rolls made before the collection is sealed or gone
    rp = recovery_point_target_locked();
    if (rp <= recovery_point_) rp = offset(-1);
    if (rp.value() >= 0 && epochs_dirty_) {
      epochs = epochs_;
      epochs_dirty_ = false;
    }
  }
  if (epochs) {
    // Without mu_, like the recovery point below: recovery will no longer
    // rebuild what lies below it from the batches.
    status es = write_epochs(*epochs);
    std::lock_guard g(mu_);
    if (!es.ok()) {
      epochs_dirty_ = true;
      return write_failed(es.err()).err();
    }
  }
  if (rp.value() >= 0) {
    // Without mu_: every writer of the recovery point holds seal_mu_.
    status cs = checkpoint::write(*ctx_.fs, io::join(dir_, files::kRecoveryPoint), {{rp.value()}});
    std::lock_guard g(mu_);
    if (!cs.ok()) return write_failed(cs.err()).err();
    recovery_point_ = rp;
  }
  return true;
}

void log::set_seal_hook(std::function<void()> fn) {
  std::lock_guard g(mu_);
  seal_hook_ = std::move(fn);
}

status log::truncate_to(offset o) {
  status st = [&] {
    std::lock_guard sg(seal_mu_);
    std::lock_guard g(mu_);
    return truncate_locked(o);
  }();
  answer_waiters();
  return st;
}

status log::reset_to(offset o) {
  status st = [&]() -> status {
    std::lock_guard sg(seal_mu_);
    std::lock_guard g(mu_);
    SLUICE_TRY(check_writable());
    if (o.value() < 0) return status(errc::invalid_argument, name_ + ": reset to a negative offset");
    return truncate_fully_locked(o);
  }();
  answer_waiters();
  return st;
}

size_t log::segment_index_for(offset o) const {
  auto it = std::upper_bound(segments_.begin(), segments_.end(), o,
                             [](offset x, const std::unique_ptr<segment>& s) { return x < s->base(); });
  return it == segments_.begin() ? 0 : static_cast<size_t>(it - segments_.begin()) - 1;
}

status log::truncate_locked(offset o) {
  SLUICE_TRY(check_writable());
  const offset start(log_start_.load()), end(log_end_.load());
  if (o > end)
    return status(errc::offset_out_of_range, name_ + ": truncate to " + std::to_string(o.value()) +
                                                 " past the log end offset " + std::to_string(end.value()));
  // A follower whose retention or log start passed the point its leader
  // says the logs diverge: nothing of its log is kept, and it starts over
  // there (Kafka's truncateFullyAndStartAt) instead of leaving its fetcher.
  if (o < start) {
    if (o.value() < 0) return status(errc::invalid_argument, name_ + ": truncate to a negative offset");
    return truncate_fully_locked(o);
  }
  if (o == end) return {};
  files_unchanged_ = false;
  const size_t idx = segment_index_for(o);
  segment& seg = *segments_[idx];
  auto loc = seg.locate(o);
  if (!loc.ok()) return go_offline(loc.err());
  if (*loc && (*loc)->h.base_offset < start) return truncate_fully_locked(o);
  ++truncations_;
  // Lower the recovery point first: if we crash half way, the next open
  // rescans the cut segment instead of trusting its old indexes.
  if (seg.base() < recovery_point_) {
    if (auto st = write_recovery_point(seg.base()); !st.ok()) return go_offline(st.err());
  }
  const bool reopened = idx + 1 < segments_.size();  // a closed segment becomes the active one
  // Later segments go first, from the last one down, so a crash half way
  // leaves a shorter log without holes (docs/log_format.md, "Truncation").
  while (segments_.size() > idx + 1) {
    if (auto st = remove_segment_files(*segments_.back()); !st.ok()) return go_offline(st.err());
    segments_.pop_back();
  }
  if (*loc) {
    if (auto st = seg.truncate_at(**loc); !st.ok()) return go_offline(st.err());
    // What is written again from the cut on is dropped from the cache anew.
    if (seg.id() == cache_dropped_segment_)
      cache_dropped_to_ = std::min(cache_dropped_to_, seg.size() & ~uint64_t{4095});
  }
  if (reopened) {
    // Its index files describe the longer segment; once a roll closes it
    // again, their absence tells recovery it may be torn (recover_segments).
    if (auto st = seg.remove_index_files(); !st.ok()) return go_offline(st.err());
    seg.mark_sealed();
  }
  note_active();
  const offset new_end = seg.next();
  log_end_ = new_end.value();
  if (durable_.load() > new_end.value()) durable_ = new_end.value();
  doom_waiters_from(new_end);
  if (truncate_epochs(new_end)) {
    if (auto st = write_epochs(); !st.ok()) return go_offline(st.err());
  }
  if (cleaner_checkpoint_ > new_end) {
    if (auto st = write_cleaner_checkpoint(new_end); !st.ok()) return go_offline(st.err());
  }
  SLUICE_LOG_INFO("{}: truncated to offset {} (log end offset now {})", name_, o.value(), new_end.value());
  return {};
}

// Empties the log and restarts it at `o` (a truncation that would otherwise
// leave the log end offset below the log start offset).
status log::truncate_fully_locked(offset o) {
  ++truncations_;
  files_unchanged_ = false;
  if (auto st = write_recovery_point(o); !st.ok()) return go_offline(st.err());
  while (!segments_.empty()) {
    if (auto st = remove_segment_files(*segments_.back()); !st.ok()) return go_offline(st.err());
    segments_.pop_back();
  }
  auto seg = segment::create(*ctx_.fs, *ctx_.files, dir_, o, ctx_.clk->now_ms());
  if (!seg.ok()) return go_offline(seg.err());
  segments_.push_back(std::move(seg).value());
  note_active();
  if (cfg_.fsync) {
    if (auto st = ctx_.fs->sync_dir(dir_); !st.ok()) return go_offline(st.err());
  }
  log_end_ = o.value();
  durable_ = o.value();
  log_start_ = o.value();
  doom_waiters_from(o);
  if (auto st = write_log_start(o); !st.ok()) return go_offline(st.err());
  if (cleaner_checkpoint_ > o) {
    if (auto st = write_cleaner_checkpoint(o); !st.ok()) return go_offline(st.err());
  }
  // No batch is left to carry an epoch (Kafka clears its cache here too).
  if (!epochs_.empty()) {
    epochs_.clear();
    if (auto st = write_epochs(); !st.ok()) return go_offline(st.err());
  }
  SLUICE_LOG_INFO("{}: emptied and restarted at offset {}", name_, o.value());
  return {};
}

result<bool> log::rebase_for_straddling_batch_locked(const batch::header& first) {
  const offset start(log_start_.load()), end(log_end_.load());
  if (segments_.size() != 1 || !active().empty() || end != start || first.base_offset >= end ||
      first.last_offset() < end)
    return false;
  // The recovery point first, so that a crash rescans the new segment; a
  // crash before the batch is in leaves a log ending below its start,
  // which recovery empties at the start again.
  if (auto st = write_recovery_point(first.base_offset); !st.ok())
    return go_offline(st.err()).err();
  if (auto st = remove_segment_files(*segments_.back()); !st.ok())
    return go_offline(st.err()).err();
  segments_.pop_back();
  auto seg = segment::create(*ctx_.fs, *ctx_.files, dir_, first.base_offset, ctx_.clk->now_ms());
  if (!seg.ok()) return go_offline(seg.err()).err();
  segments_.push_back(std::move(seg).value());
  note_active();
  if (cfg_.fsync) {
    if (auto st = ctx_.fs->sync_dir(dir_); !st.ok()) return go_offline(st.err()).err();
  }
  files_unchanged_ = false;
  // The log start and end stay until the append that follows moves the
  // end past the batch: readers never see an end below the start, and
  // nothing below the log start is ever read.
  SLUICE_LOG_INFO(
      "{}: log start {} lies inside the leader's batch [{}, {}]: the empty log begins there", name_,
      start.value(), first.base_offset.value(), first.last_offset().value());
  return true;
}

status log::advance_log_start(offset o) {
  flush_ask ask;
  status st = [&] {
    std::lock_guard g(mu_);
    return advance_start_locked(o, ask);
  }();
  answer_waiters();
  ask_flusher(ask);
  return st;
}

void log::advance_log_start_async(offset o, std::function<void(status)> done) {
  ctx_.flush->run_task([self = shared_from_this(), o, done = std::move(done)] { done(self->advance_log_start(o)); });
}

status log::advance_start_locked(offset o, flush_ask& ask) {
  SLUICE_TRY(check_writable());
  if (o > offset(log_end_.load()))
    return status(errc::offset_out_of_range, name_ + ": log start " + std::to_string(o.value()) +
                                                 " beyond the log end offset");
  if (o <= offset(log_start_.load())) return {};
  // The checkpoint goes first: segments below it are garbage from then on,
  // and recovery removes any that a crash leaves behind.
  if (auto st = write_log_start(o); !st.ok()) return go_offline(st.err());
  log_start_ = o.value();
  // The epochs follow in memory; recovery cuts a stale checkpoint's to the
  // log start written above.
  if (truncate_epochs_from_start(o)) epochs_dirty_ = true;
  if (!active().empty() && active().next() <= o) SLUICE_TRY(roll(ask));
  return retire_below_start_locked();
}

status log::retire_below_start_locked() {
  const offset start(log_start_.load());
  while (segments_.size() > 1 && segments_[1]->base() <= start && !segments_.front()->sealing()) {
    std::unique_ptr<segment> gone = std::move(segments_.front());
    segments_.erase(segments_.begin());
    if (auto st = retire_segment(*gone); !st.ok()) return go_offline(st.err());
  }
  return {};
}

status log::remove_segment_files(segment& s) {
  SLUICE_LOG_DEBUG("{}: deleting segment {}", name_, s.base().value());
  return s.remove_files();
}

status log::retire_segment(segment& s) {
  SLUICE_LOG_DEBUG("{}: retiring segment {}", name_, s.base().value());
  SLUICE_ASSIGN_OR_RETURN(auto paths, s.retire());
  ctx_.deleter->schedule(std::move(paths), cfg_.file_delete_delay_ms);
  return {};
}

// ---- Checkpoints ---------------------------------------------------------------

// With fsync the marker is made durable like any checkpoint; without it
// nothing was promised durable, so a plain empty file will do.
status log::write_clean_marker() {
  const std::string path = io::join(dir_, files::kCleanShutdown);
  if (cfg_.fsync) return ctx_.fs->write_atomic(path, {});
  return ctx_.fs->open(path, io::open_mode::truncate).to_status();
}

status log::write_recovery_point(offset o) {
  SLUICE_TRY(checkpoint::write(*ctx_.fs, io::join(dir_, files::kRecoveryPoint), {{o.value()}}));
  recovery_point_ = o;
  return {};
}

status log::write_log_start(offset o) {
  return checkpoint::write(*ctx_.fs, io::join(dir_, files::kLogStart), {{o.value()}});
}

status log::write_epochs() {
  SLUICE_TRY(write_epochs(epochs_));
  epochs_dirty_ = false;
  return {};
}

status log::write_epochs(const std::vector<epoch_entry>& epochs) {
  std::vector<checkpoint::line> lines;
  for (const auto& e : epochs) lines.push_back({e.epoch.value(), e.start.value()});
  return checkpoint::write(*ctx_.fs, io::join(dir_, files::kLeaderEpochs), lines);
}

bool log::note_epoch_in_memory(leader_epoch e, offset start) {
  if (e.value() < 0) return false;  // a batch not written by a leader of this log
  if (!epochs_.empty() && e <= epochs_.back().epoch) return false;
  // An older epoch that starts here (or later) wrote nothing that is still
  // in the log, for example after the log start moved to the end.
  while (!epochs_.empty() && epochs_.back().start >= start) epochs_.pop_back();
  epochs_.push_back({e, start});
  return true;
}


bool log::truncate_epochs(offset end) {
  const size_t before = epochs_.size();
  std::erase_if(epochs_, [&](const epoch_entry& e) { return e.start >= end; });
  return epochs_.size() != before;
}

bool log::truncate_epochs_from_start(offset start) {
  // Keep the newest entry that starts at or below `start`, moved up to it.
  if (epochs_.empty() || epochs_.front().start >= start) return false;
  size_t keep = 0;
  while (keep + 1 < epochs_.size() && epochs_[keep + 1].start <= start) ++keep;
  epochs_.erase(epochs_.begin(), epochs_.begin() + static_cast<ptrdiff_t>(keep));
  epochs_.front().start = start;
  return true;
}

std::vector<epoch_entry> log::leader_epochs() const {
  std::lock_guard g(mu_);
  return epochs_;
}

std::optional<epoch_entry> log::latest_epoch() const {
  std::lock_guard g(mu_);
  if (epochs_.empty()) return std::nullopt;
  return epochs_.back();
}

std::optional<epoch_entry> log::end_offset_for_epoch(leader_epoch e) const {
  std::lock_guard g(mu_);
  auto it = std::upper_bound(epochs_.begin(), epochs_.end(), e,
                             [](leader_epoch x, const epoch_entry& en) { return x < en.epoch; });
  if (it == epochs_.begin()) return std::nullopt;
  const offset end = it == epochs_.end() ? offset(log_end_.load()) : it->start;
  return epoch_entry{(it - 1)->epoch, end};
}

// ---- Reading -------------------------------------------------------------------

result<file_region> log::read(offset o, size_t max_bytes, std::optional<offset> upper) {
  // Each round either serves a checked region or makes the damaged ranges
  // in it unreadable, so the next round's region ends before the first or
  // starts after it; a segment that changed under the check (a swap, a
  // truncation) is simply read again.
  for (int round = 0;; ++round) {
    read_check c;
    result<file_region> r = [&] {
      std::lock_guard g(mu_);
      return read_locked(o, max_bytes, upper, c);
    }();
    if (!r.ok() || !c.needed) return r;
    if (round == 16) return error{errc::corrupt_data, name_ + ": offset " + std::to_string(o.value()) +
                                                          " could not be read intact"};
    SLUICE_ASSIGN_OR_RETURN(auto ds, segment::check_region(*r->file, c.seg_base, r->pos, r->pos + r->len,
                                                           c.seg_size, r->first_offset));
    note_checked(c, r->pos, r->pos + r->len, ds);
    if (ds.empty()) return r;
  }
}

void log::note_checked(const read_check& c, uint64_t from, uint64_t to, const std::vector<segment_damage>& ds) {
  {
    std::lock_guard g(mu_);
    if (closed_ || c.truncations != truncations_) return;
    auto it = std::find_if(segments_.begin(), segments_.end(),
                           [&](const std::unique_ptr<segment>& s) { return s->id() == c.seg_id; });
    if (it == segments_.end()) return;
    if (ds.empty()) {
      (*it)->mark_verified(from, to);
      return;
    }
    std::vector<segment_damage> added;
    for (const auto& d : ds)
      if ((*it)->add_damage(d)) added.push_back(d);
    if (added.empty()) return;
    report_damage((*it)->log_path(), added, "a read", ctx_.scrub ? "by the scrubber's thread" : "by the next scrub");
  }
  // The rewrite copies a whole segment: the scrubber's work, not a fetch's.
  if (ctx_.scrub) ctx_.scrub->request_removal(shared_from_this());
}

result<file_region> log::read_locked(offset o, size_t max_bytes, std::optional<offset> upper, read_check& check) {
  if (closed_) return error{errc::shutting_down, name_ + " is closed"};
  const offset start(log_start_.load()), end(log_end_.load());
  if (o < start || o > end)
    return error{errc::offset_out_of_range, name_ + ": offset " + std::to_string(o.value()) + " outside [" +
                                                std::to_string(start.value()) + ", " +
                                                std::to_string(end.value()) + "]"};
  const offset up = upper ? std::min(*upper, end) : end;
  file_region none{nullptr, 0, 0, o, o};
  if (o >= up) return none;
  for (size_t i = segment_index_for(o); i < segments_.size(); ++i) {
    segment& seg = *segments_[i];
    if (seg.empty() || o >= seg.next()) continue;
    SLUICE_ASSIGN_OR_RETURN(auto loc, seg.locate(o));
    if (!loc) continue;
    SLUICE_ASSIGN_OR_RETURN(uint64_t stop, seg.region_end(*loc, max_bytes, up));
    if (stop == loc->pos) return none;
    SLUICE_ASSIGN_OR_RETURN(offset next, seg.offset_at(stop));
    SLUICE_ASSIGN_OR_RETURN(auto f, seg.file());
    if (!seg.verified(loc->pos, stop)) check = read_check{true, seg.id(), truncations_, seg.size(), seg.base()};
    return file_region{std::move(f), loc->pos, stop - loc->pos, loc->h.base_offset, next};
  }
  return none;
}

result<std::vector<std::byte>> log::read_bytes(offset o, size_t max_bytes, std::optional<offset> upper) {
  SLUICE_ASSIGN_OR_RETURN(file_region r, read(o, max_bytes, upper));
  std::vector<std::byte> out(r.len);
  if (r.len == 0) return out;
  SLUICE_ASSIGN_OR_RETURN(size_t got, r.file->pread(out.data(), r.len, r.pos));
  if (got != r.len) return error{errc::io_error, name_ + ": short read"};
  return out;
}

result<std::optional<timestamp_lookup>> log::offset_for_timestamp(int64_t ts_ms) {
  std::lock_guard g(mu_);
  if (closed_) return error{errc::shutting_down, name_ + " is closed"};
  const offset start(log_start_.load());
  for (auto& seg : segments_) {
    if (seg->empty() || seg->max_timestamp() < ts_ms || seg->next() <= start) continue;
    SLUICE_ASSIGN_OR_RETURN(auto loc, seg->locate_time(ts_ms, start));
    if (loc)
      return std::optional<timestamp_lookup>(
          timestamp_lookup{std::max(loc->h.base_offset, start), loc->h.max_timestamp});
  }
  return std::optional<timestamp_lookup>();
}

result<std::optional<timestamp_lookup>> log::offset_of_max_timestamp() {
  std::lock_guard g(mu_);
  if (closed_) return error{errc::shutting_down, name_ + " is closed"};
  const offset start(log_start_.load());
  std::optional<segment::located> best;
  for (auto& seg : segments_) {
    if (seg->empty() || seg->next() <= start) continue;
    // A segment's max_timestamp bounds its batches' (it may come from a
    // batch below the log start offset); the first segment with the
    // largest one wins, as the first batch within it does.
    if (best && seg->max_timestamp() <= best->h.max_timestamp) continue;
    std::optional<segment::located> loc;
    if (seg->base() >= start) {
      SLUICE_ASSIGN_OR_RETURN(loc, seg->locate_time(seg->max_timestamp(), start));
    } else {
      SLUICE_ASSIGN_OR_RETURN(loc, seg->locate_max_time(start));
    }
    if (loc && (!best || loc->h.max_timestamp > best->h.max_timestamp)) best = loc;
  }
  if (!best || best->h.max_timestamp < 0) return std::optional<timestamp_lookup>();
  return std::optional<timestamp_lookup>(
      timestamp_lookup{std::max(best->h.base_offset, start), best->h.max_timestamp});
}

// ---- Management ----------------------------------------------------------------

status log::set_config(const log_config& cfg) {
  SLUICE_TRY(cfg.validate());
  std::lock_guard g(mu_);
  if (cfg.fsync && !cfg_.fsync && !closed_ && !offline_) {
    // Without fsync everything written already counts as durable; make
    // that true before promising durability again.
    for (auto& seg : segments_) {
      if (auto st = seg->sync(); !st.ok()) return go_offline(st.err());
    }
  }
  cfg_ = cfg;
  return {};
}

log_config log::config() const {
  std::lock_guard g(mu_);
  return cfg_;
}

std::vector<segment_info> log::segments() const {
  std::lock_guard g(mu_);
  std::vector<segment_info> out;
  for (const auto& s : segments_) {
    int64_t largest = s->max_timestamp();
    if (largest < 0 && !s->empty()) {
      // Rare (clients that write no timestamps).
      auto m = s->modified_ms(s != segments_.back());
      if (m.ok()) largest = *m;
      else SLUICE_LOG_WARN("{}: no modification time for {}: {}", name_, s->log_path(), m.err().message);
    }
    out.push_back({s->base(), s->next(), s->size(), s->max_timestamp(), largest});
  }
  return out;
}

status log::close() {
  return close_files(true);
}

status log::close_without_marker() {
  return close_files(false);
}

status log::close_files(bool write_marker) {
  status result_st;
  {
    std::lock_guard fg(flush_mu_);
    std::lock_guard sg(seal_mu_);
    std::lock_guard g(mu_);
    if (closed_) return {};
    if (offline_) {
      result_st = status(errc::log_offline, name_ + " was offline; left for recovery");
    } else {
      // An unchanged log's segment bytes were synced (or found durable) at
      // open and its index files are the ones a clean open trusted: writing
      // them again would change nothing.
      status st;
      if (!files_unchanged_) {
        // The active segment and any a roll closed that the flusher has
        // not sealed yet. The active one's prepared tail goes: a clean
        // open trusts the file to end at its last batch.
        active().seal_time_index();
        active().release_reserve();
        for (auto& seg : segments_) {
          if (seg->sealed() && seg != segments_.back()) continue;
          // A closed segment's bytes are synced before it counts as sealed,
          // fsync or not (seal_closed); the active one's only with fsync.
          if (st.ok() && (cfg_.fsync || seg != segments_.back())) st = seg->sync();
          if (st.ok()) st = seg->write_indexes(cfg_.fsync);
          if (st.ok()) seg->mark_sealed();
        }
        if (st.ok() && cfg_.fsync && dir_unsynced_) st = ctx_.fs->sync_dir(dir_);
      }
      // A clean open trusts the checkpoint and scans nothing.
      if (st.ok() && epochs_dirty_) st = write_epochs();
      if (st.ok() && write_marker) st = write_clean_marker();
      if (st.ok()) durable_ = log_end_.load();
      else result_st = go_offline(st.err());
    }
    closed_ = true;
    for (auto& seg : segments_) ctx_.files->forget(seg->log_path());
  }
  answer_waiters();
  return result_st;
}

}  // namespace sluice::storage
