// Compaction's rewrite path: a cleaned copy of a run of closed segments is
// written beside them and swapped in, crash-safe (docs/log_format.md,
// "Replacing segments"). The cleaner itself (which decodes records) lives
// above protocol; storage only checks headers and CRCs and moves files.

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdio>

#include "base/log.h"
#include "storage/checkpoint.h"
#include "storage/file_deleter.h"
#include "storage/log.h"
#include "storage/log_files.h"
#include "storage/segment.h"

namespace sluice::storage {

namespace batch = model::batch;
namespace {

// "<dir>/<20-digit base>.<20-digit end>.<ext>", ext "cleaned" or "swap".
std::string rewrite_path(const std::string& dir, offset base, offset end, const char* ext) {
  char name[64];
  std::snprintf(name, sizeof name, "%020" PRId64 ".%020" PRId64 ".%s", base.value(), end.value(),
                ext);
  return io::join(dir, name);
}

}  // namespace

// ---- segment_rewrite --------------------------------------------------------

segment_rewrite::segment_rewrite(io::filesystem& fs, std::unique_ptr<segment> seg, offset base,
                                 offset end, int64_t interval_bytes)
    : fs_(fs),
      seg_(std::move(seg)),
      base_(base),
      end_(end),
      next_(base),
      interval_bytes_(interval_bytes) {}

segment_rewrite::~segment_rewrite() {
  if (!seg_) return;              // handed to the log
  seg_->remove_files().ignore();  // a .cleaned copy nobody will swap in
}

uint64_t segment_rewrite::size_bytes() const {
  return seg_ ? seg_->size() : 0;
}

const std::string& segment_rewrite::path() const {
  static const std::string none;
  return seg_ ? seg_->log_path() : none;
}

status segment_rewrite::append(std::span<const std::byte> batches) {
  if (!seg_) return status(errc::invalid_argument, "segment_rewrite already handed over");
  if (batches.empty()) return {};
  std::vector<batch::header> hs;
  SLUICE_TRY(batch::check_all(batches, batch::strictness::stored, hs));
  offset next = next_;
  for (const auto& h : hs) {
    if (h.base_offset < next || h.last_offset() >= end_ || h.last_offset() - base_ > INT32_MAX)
      return status(errc::invalid_record, "cleaned batch at " + std::to_string(h.base_offset.value()) +
                                              ".." + std::to_string(h.last_offset().value()) +
                                              " outside [" + std::to_string(next.value()) + ", " +
                                              std::to_string(end_.value()) + ")");
    next = h.last_offset() + 1;
  }
  SLUICE_TRY(seg_->append(batches, hs, interval_bytes_));
  next_ = next;
  return {};
}

// ---- log ----------------------------------------------------------------------

result<file_region> log::read_segment(offset base, uint64_t pos, size_t max_bytes) {
  // Checked like read(): the cleaner decodes and may rebuild what it reads
  // (with a fresh CRC), so damaged bytes must never reach it.
  for (int round = 0;; ++round) {
    read_check c;
    result<file_region> r = [&] {
      std::lock_guard g(mu_);
      return read_segment_locked(base, pos, max_bytes, c);
    }();
    if (!r.ok() || !c.needed) return r;
    if (round == 16)
      return error{errc::corrupt_data, name_ + ": segment " + std::to_string(base.value()) + " at byte " +
                                           std::to_string(pos) + " could not be read intact"};
    SLUICE_ASSIGN_OR_RETURN(auto ds, segment::check_region(*r->file, c.seg_base, r->pos, r->pos + r->len,
                                                           c.seg_size, r->first_offset));
    note_checked(c, r->pos, r->pos + r->len, ds);
    if (ds.empty()) return r;
  }
}

result<file_region> log::read_segment_locked(offset base, uint64_t pos, size_t max_bytes, read_check& check) {
  if (closed_) return error{errc::shutting_down, name_ + " is closed"};
  const size_t i = segment_index_for(base);
  if (segments_.empty() || i + 1 >= segments_.size() || segments_[i]->base() != base)
    return error{errc::not_found, name_ + ": no closed segment at " + std::to_string(base.value())};
  segment& seg = *segments_[i];
  pos = seg.past_damage(pos);  // never a damaged range (docs/log_format.md, "Damaged batches")
  if (pos >= seg.size()) return file_region{nullptr, pos, 0, seg.next(), seg.next()};
  SLUICE_ASSIGN_OR_RETURN(uint64_t stop, seg.region_end_from(pos, max_bytes));
  SLUICE_ASSIGN_OR_RETURN(offset first, seg.offset_at(pos));
  SLUICE_ASSIGN_OR_RETURN(offset next,
                          seg.offset_at(stop));  // the next batch's base, or the segment's next
  SLUICE_ASSIGN_OR_RETURN(auto f, seg.file());
  if (!seg.verified(pos, stop)) check = read_check{true, seg.id(), truncations_, seg.size(), seg.base()};
  return file_region{std::move(f), pos, stop - pos, first, next};
}

result<std::unique_ptr<segment_rewrite>> log::begin_rewrite(offset base, offset end, const char* ext) {
  std::lock_guard g(mu_);
  SLUICE_TRY(check_writable());
  const size_t first = segment_index_for(base);
  auto no_run = [&] {
    return error{errc::not_found, name_ + ": no run of closed segments [" +
                                      std::to_string(base.value()) + ", " +
                                      std::to_string(end.value()) + ")"};
  };
  if (segments_.empty() || segments_[first]->base() != base || end <= base) return no_run();
  size_t after = first;
  while (after < segments_.size() && segments_[after]->base() < end) ++after;
  if (after >= segments_.size() || segments_[after]->base() != end) return no_run();
  SLUICE_ASSIGN_OR_RETURN(auto seg,
                          segment::create_staged(*ctx_.fs, *ctx_.files, dir_, base,
                                                 rewrite_path(dir_, base, end, ext)));
  std::unique_ptr<segment_rewrite> rw(
      new segment_rewrite(*ctx_.fs, std::move(seg), base, end, cfg_.index_interval_bytes));
  for (size_t i = first; i < after; ++i) {
    rw->run_.push_back({segments_[i]->base(), segments_[i]->size()});
    rw->run_ids_.push_back(segments_[i]->id());
  }
  rw->truncations_ = truncations_;
  return rw;
}

std::optional<size_t> log::find_run(const segment_rewrite& rw) const {
  if (rw.truncations_ != truncations_ || segments_.empty()) return std::nullopt;
  const size_t first = segment_index_for(rw.base_);
  const size_t after = first + rw.run_.size();
  if (after >= segments_.size()) return std::nullopt;  // the active segment must follow the run
  for (size_t i = 0; i < rw.run_.size(); ++i) {
    const segment& s = *segments_[first + i];
    if (s.base() != rw.run_[i].first || s.size() != rw.run_[i].second || s.id() != rw.run_ids_[i])
      return std::nullopt;
  }
  // A log-start move passed the run's first segment, which only a seal in
  // progress keeps (retire_below_start_locked): retention got there first.
  if (segments_[first + 1]->base() <= offset(log_start_.load())) return std::nullopt;
  if (segments_[after]->base() != rw.end_) return std::nullopt;
  return first;
}

status log::sync_dir_if_fsync() {
  return cfg_.fsync ? ctx_.fs->sync_dir(dir_) : status();
}

status log::replace_segments(std::unique_ptr<segment_rewrite> rw) {
  SLUICE_ASSERT(rw && rw->seg_, "replace_segments needs an unfinished segment_rewrite");
  // Step 1 ends with the copy durable; the sync runs without the mutex.
  if (config().fsync) SLUICE_TRY(rw->seg_->sync());
  std::lock_guard sg(seal_mu_);
  std::lock_guard g(mu_);
  SLUICE_TRY(check_writable());
  const auto first = find_run(*rw);
  if (!first)
    return status(errc::not_found, name_ + ": segments [" + std::to_string(rw->base_.value()) +
                                       ", " + std::to_string(rw->end_.value()) +
                                       ") changed while being cleaned");
  return swap_locked(*rw, *first);
}

status log::swap_locked(segment_rewrite& rw, size_t first) {
  // Step 2: nothing old is touched yet, so a failure leaves the log as it was.
  SLUICE_TRY(rw.seg_->rename_log(rewrite_path(dir_, rw.base_, rw.end_, "swap")));
  if (auto st = sync_dir_if_fsync(); !st.ok()) {
    rw.seg_->remove_files().ignore();
    rw.seg_.reset();
    return st;
  }
  // Step 3: from here on the next open finishes the swap, so a failure
  // takes the log offline rather than leaving memory and disk apart.
  std::unique_ptr<segment> fresh = std::move(rw.seg_);
  const auto begin = segments_.begin() + static_cast<ptrdiff_t>(first);
  const auto stop = begin + static_cast<ptrdiff_t>(rw.run_.size());
  std::vector<std::unique_ptr<segment>> old(std::make_move_iterator(begin),
                                            std::make_move_iterator(stop));
  const auto at = segments_.erase(begin, stop);
  segments_.insert(at, std::move(fresh));
  segment& seg = *segments_[first];
  for (auto& o : old) {
    if (auto st = retire_segment(*o); !st.ok()) return go_offline(st.err());
  }
  if (auto st = sync_dir_if_fsync(); !st.ok()) return go_offline(st.err());
  // Step 4.
  if (auto st = seg.rename_log(segment_path(dir_, rw.base_, "log")); !st.ok())
    return go_offline(st.err());
  if (auto st = sync_dir_if_fsync(); !st.ok()) return go_offline(st.err());
  // Step 5.
  seg.seal_time_index();
  if (auto st = seg.write_indexes(cfg_.fsync); !st.ok()) return go_offline(st.err());
  SLUICE_LOG_DEBUG("{}: segments [{}, {}) replaced by a cleaned copy of {} bytes", name_,
                   rw.base_.value(), rw.end_.value(), seg.size());
  return {};
}

offset log::cleaner_checkpoint() const {
  std::lock_guard g(mu_);
  return std::max(cleaner_checkpoint_, offset(log_start_.load()));
}

status log::set_cleaner_checkpoint(offset o) {
  std::lock_guard g(mu_);
  SLUICE_TRY(check_writable());
  o = std::min(o, offset(log_end_.load()));
  if (o == cleaner_checkpoint_) return {};
  return write_cleaner_checkpoint(o);
}

status log::write_cleaner_checkpoint(offset o) {
  SLUICE_TRY(checkpoint::write(*ctx_.fs, io::join(dir_, files::kCleanerOffset), {{o.value()}}));
  cleaner_checkpoint_ = o;
  return {};
}

// Step 0 of recovery: finishes every swap a crash interrupted.
status log::finish_swaps(const std::vector<std::string>& names) {
  struct swap {
    offset base, end;
    std::string name;
  };
  std::vector<swap> swaps;
  for (const auto& n : names) {
    long long b = 0, e = 0;
    char tail[8] = {};
    if (n.size() != 46 || std::sscanf(n.c_str(), "%20lld.%20lld.%4s", &b, &e, tail) != 3 ||
        std::string(tail) != "swap")
      continue;
    swaps.push_back({offset(b), offset(e), n});
  }
  std::sort(swaps.begin(), swaps.end(),
            [](const swap& a, const swap& b) { return a.base < b.base; });
  for (const auto& sw : swaps) {
    for (const auto& n : names) {
      auto b = parse_segment_name(n);
      if (!b || *b < sw.base || *b >= sw.end) continue;
      for (const char* ext : {"index", "timeindex", "log"}) {
        const std::string p = segment_path(dir_, *b, ext);
        if (ctx_.fs->exists(p)) SLUICE_TRY(ctx_.fs->remove(p));
      }
    }
    // The cleaned segment's own index names may hold an old segment's
    // indexes whose .log a previous pass already removed.
    for (const char* ext : {"index", "timeindex"}) {
      const std::string p = segment_path(dir_, sw.base, ext);
      if (ctx_.fs->exists(p)) SLUICE_TRY(ctx_.fs->remove(p));
    }
    SLUICE_TRY(ctx_.fs->rename(io::join(dir_, sw.name), segment_path(dir_, sw.base, "log")));
    SLUICE_TRY(ctx_.fs->sync_dir(dir_));
    SLUICE_LOG_INFO("{}: finished an interrupted compaction swap of [{}, {})", name_,
                    sw.base.value(), sw.end.value());
  }
  return {};
}

}  // namespace sluice::storage
