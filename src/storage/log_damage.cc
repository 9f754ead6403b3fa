// Damaged batches in the middle of a log (docs/log_format.md, "Damaged
// batches"): reporting what recovery or the scrubber found, keeping reads
// off it, and removing it with compaction's crash-safe rewrite.
//
// Why removal and not only skipping: the skip list lives in memory, and
// after a clean shutdown segments are trusted without a scan, so damage
// left on disk would be served again after a restart until the scrubber
// came by. Rewriting the segment without it makes the fix durable, through
// the swap that compaction already trusts (steps 1-5 of "Replacing
// segments"); the damaged offsets become a gap, which every client already
// handles after compaction.

#include <algorithm>

#include "base/log.h"
#include "storage/log.h"
#include "storage/segment.h"

namespace sluice::storage {

damage_stats log::damage() const {
  return damage_stats{damaged_ranges_.load(), damaged_bytes_.load(), damage_removed_bytes_.load(),
                      scrubbed_bytes_.load()};
}

void log::report_damage(const std::string& file, const std::vector<segment_damage>& ds, const char* found_by,
                        const char* removal) {
  for (const auto& d : ds) {
    damaged_ranges_ += 1;
    damaged_bytes_ += d.end - d.pos;
    const std::string offsets =
        d.next > d.first ? "offsets " + std::to_string(d.first.value()) + ".." + std::to_string(d.next.value() - 1)
                         : "offsets from " + std::to_string(d.first.value()) + " to the end of the segment";
    SLUICE_LOG_WARN(
        "{}: damaged data in {} at bytes [{}, {}) ({} bytes), found by {}: {}; {} are no longer served "
        "(a gap), intact batches around it are kept, and the range is removed from the file {}",
        name_, file, d.pos, d.end, d.end - d.pos, found_by, d.why, offsets, removal);
  }
}

result<size_t> log::handle_damage(uint64_t seg_id, uint64_t truncations, std::vector<segment_damage> ds) {
  size_t fresh = 0;
  offset base;
  {
    std::lock_guard g(mu_);
    if (closed_) return error{errc::shutting_down, name_ + " is closed"};
    // A truncation may have rewritten the bytes the scan read.
    if (truncations != truncations_) return size_t{0};
    auto it = std::find_if(segments_.begin(), segments_.end(),
                           [&](const std::unique_ptr<segment>& s) { return s->id() == seg_id; });
    if (it == segments_.end()) return size_t{0};  // replaced or deleted meanwhile
    segment& seg = **it;
    std::vector<segment_damage> added;
    for (auto& d : ds) {
      if (d.end > seg.size()) continue;  // cannot be: sizes only shrink by truncation
      if (seg.add_damage(d)) added.push_back(std::move(d));
    }
    // From here on reads skip the new ranges, whatever happens to the rewrite.
    report_damage(seg.log_path(), added, "the scrubber", "now");
    fresh = added.size();
    base = seg.base();
  }
  // Also when every range was known: a rewrite that failed before is retried.
  if (auto st = remove_damage(base); !st.ok() && st.code() != errc::shutting_down)
    SLUICE_LOG_WARN("{}: could not remove the damaged ranges of segment {}: {}; reads keep skipping them",
                    name_, base.value(), st.err().message);
  return fresh;
}

status log::remove_damage(offset base) {
  offset end;
  uint64_t seg_id = 0;
  std::string file;
  flush_ask ask;
  {
    std::lock_guard sg(seal_mu_);
    std::lock_guard g(mu_);
    SLUICE_TRY(check_writable());
    const size_t i = segment_index_for(base);
    if (segments_.empty() || segments_[i]->base() != base || segments_[i]->damaged().empty()) return {};
    segment& seg = *segments_[i];
    seg_id = seg.id();
    file = seg.log_path();
    if (i + 1 == segments_.size()) {
      // Only closed segments are rewritten. The recovery point stays at
      // or below this segment while it holds known damage
      // (recovery_point_target_locked), so a crash before the swap rescans it.
      SLUICE_TRY(roll(ask));
    } else if (base < recovery_point_) {
      // Likewise for a closed segment the recovery point had passed.
      if (auto st = write_recovery_point(base); !st.ok()) return go_offline(st.err());
    }
    end = segments_[i + 1]->base();
  }
  ask_flusher(ask);
  // The copy reads through read_segment, which skips damaged ranges, and
  // runs without the mutex like a clean.
  SLUICE_ASSIGN_OR_RETURN(auto rw, begin_rewrite(base, end, "repair"));
  std::vector<std::byte> buf;
  uint64_t pos = 0;
  for (;;) {
    SLUICE_ASSIGN_OR_RETURN(file_region r, read_segment(base, pos, limits::recovery_scan_chunk_bytes));
    if (r.len == 0) break;
    buf.resize(r.len);
    SLUICE_ASSIGN_OR_RETURN(size_t got, r.file->pread(buf.data(), r.len, r.pos));
    if (got != r.len) return status(errc::io_error, name_ + ": short read of " + file);
    SLUICE_TRY(rw->append(buf));
    pos = r.pos + r.len;
  }
  const uint64_t kept = rw->size_bytes();
  // The copy's own reads may have found more damage (bytes no scan had
  // checked): count every range the copy left out.
  uint64_t damaged_bytes = 0;
  {
    std::lock_guard g(mu_);
    for (const auto& sp : segments_)
      if (sp->id() == seg_id)
        for (const auto& d : sp->damaged()) damaged_bytes += d.end - d.pos;
  }
  status st = replace_segments(std::move(rw));
  if (st.code() == errc::not_found) return {};  // compaction, retention or truncation got there first
  SLUICE_TRY(st);
  damage_removed_bytes_ += damaged_bytes;
  {
    std::lock_guard sg(seal_mu_);
    std::lock_guard g(mu_);
    const offset target = recovery_point_target_locked();
    if (recovery_point_ < target && !offline_ && !closed_) {
      if (auto rp = write_recovery_point(target); !rp.ok()) return go_offline(rp.err());
    }
  }
  SLUICE_LOG_WARN("{}: rewrote {} without its {} damaged bytes ({} bytes kept)", name_, file, damaged_bytes,
                  kept);
  return {};
}

status log::remove_known_damage() {
  std::vector<offset> bases;
  {
    std::lock_guard g(mu_);
    for (const auto& s : segments_)
      if (!s->damaged().empty()) bases.push_back(s->base());
  }
  status first;
  for (offset b : bases) {
    status st = remove_damage(b);
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

result<size_t> log::scrub(const scrub_pace& pace) {
  const scrub_pace counted = [&](uint64_t n) {
    scrubbed_bytes_ += n;
    if (closed_) return false;
    return !pace || pace(n);
  };
  size_t found = 0;
  offset cursor(INT64_MIN);
  for (;;) {
    uint64_t id = 0, truncations = 0, size = 0;
    offset base;
    std::shared_ptr<io::file> f;
    {
      // The next segment at or above the cursor: the list may change
      // between segments (rolls, retention, swaps), never under a scan.
      std::lock_guard g(mu_);
      if (closed_) return error{errc::shutting_down, name_ + " is closed"};
      auto it = std::find_if(segments_.begin(), segments_.end(),
                             [&](const std::unique_ptr<segment>& s) { return s->base() >= cursor; });
      if (it == segments_.end()) break;
      segment& seg = **it;
      id = seg.id();
      truncations = truncations_;
      size = seg.size();
      base = seg.base();
      cursor = base + 1;
      if (size == 0) continue;
      SLUICE_ASSIGN_OR_RETURN(f, seg.file());
    }
    SLUICE_ASSIGN_OR_RETURN(auto ds, segment::scan(*f, base, size, counted));
    if (ds.empty()) {
      note_checked(read_check{true, id, truncations, size, base}, 0, size, {});
      continue;
    }
    SLUICE_ASSIGN_OR_RETURN(size_t n, handle_damage(id, truncations, std::move(ds)));
    found += n;
  }
  return found;
}

}  // namespace sluice::storage
