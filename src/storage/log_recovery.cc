// Opening a partition log: checkpoints, the clean-shutdown marker, and the
// scan that finds and cuts a torn or corrupt tail (docs/log_format.md,
// "Recovery").

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "storage/checkpoint.h"
#include "storage/log_files.h"
#include "storage/log.h"
#include "storage/segment.h"

namespace sluice::storage {

namespace batch = model::batch;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The base offset named by an index file, if `name` is one.
std::optional<offset> index_file_base(const std::string& name) {
  for (const char* ext : {".index", ".timeindex"}) {
    if (ends_with(name, ext)) return parse_segment_name(name.substr(0, name.size() - std::strlen(ext)) + ".log");
  }
  return std::nullopt;
}

}  // namespace

result<std::vector<offset>> log::list_segment_bases() {
  SLUICE_ASSIGN_OR_RETURN(auto names, ctx_.fs->list(dir_));
  if (std::any_of(names.begin(), names.end(), [](const std::string& n) { return ends_with(n, ".swap"); })) {
    SLUICE_TRY(finish_swaps(names));
    SLUICE_ASSIGN_OR_RETURN(names, ctx_.fs->list(dir_));
  }
  std::vector<offset> bases;
  for (const auto& n : names) {
    // An unfinished checkpoint, a retired segment whose delayed removal a
    // stop cut short, an unfinished cleaned or repaired copy
    // (docs/log_format.md).
    if (ends_with(n, ".tmp") || ends_with(n, ".deleted") || ends_with(n, ".cleaned") || ends_with(n, ".repair")) {
      ctx_.fs->remove(io::join(dir_, n)).ignore();
      continue;
    }
    if (auto b = parse_segment_name(n)) bases.push_back(*b);
  }
  std::sort(bases.begin(), bases.end());
  for (const auto& n : names) {
    auto b = index_file_base(n);
    if (b && !std::binary_search(bases.begin(), bases.end(), *b)) ctx_.fs->remove(io::join(dir_, n)).ignore();
  }
  return bases;
}

void log::load_checkpoints(std::optional<offset>& rp, std::optional<offset>& start) {
  auto read = [&](const char* name, size_t fields) -> std::optional<std::vector<checkpoint::line>> {
    auto r = checkpoint::read(*ctx_.fs, io::join(dir_, name), fields);
    if (r.ok()) return *r;
    SLUICE_LOG_WARN("{}: {}; ignoring it", name_, r.err().message);
    return std::nullopt;
  };
  if (auto l = read(files::kRecoveryPoint, 1); l && l->size() == 1) rp = offset((*l)[0][0]);
  if (auto l = read(files::kLogStart, 1); l && l->size() == 1) start = offset((*l)[0][0]);
  if (auto l = read(files::kCleanerOffset, 1); l && l->size() == 1) cleaner_checkpoint_ = offset((*l)[0][0]);
  if (auto l = read(files::kLeaderEpochs, 2)) {
    for (const auto& e : *l) {
      if (!epochs_.empty() && offset(e[1]) < epochs_.back().start) continue;  // out of order: drop
      note_epoch_in_memory(leader_epoch(static_cast<int32_t>(e[0])), offset(e[1]));
    }
  }
}

status log::recover() {
  SLUICE_ASSIGN_OR_RETURN(auto bases, list_segment_bases());
  std::optional<offset> rp, start;
  load_checkpoints(rp, start);
  const auto epochs_on_disk = epochs_;
  clean_marker_found_ = ctx_.fs->exists(io::join(dir_, files::kCleanShutdown));
  const bool clean = clean_marker_found_ || closed_cleanly_;
  recovery_.clean_shutdown = clean;
  offset log_start = start.value_or(bases.empty() ? offset(0) : bases.front());
  if (!bases.empty() && log_start < bases.front()) log_start = bases.front();
  // Segments wholly below the log start offset are leftovers of a deletion.
  while (bases.size() > 1 && bases[1] <= log_start) {
    SLUICE_ASSIGN_OR_RETURN(auto s, segment::open_existing(*ctx_.fs, *ctx_.files, dir_, bases[0], 0));
    SLUICE_TRY(s->remove_files());
    bases.erase(bases.begin());
  }
  log_start_ = log_start.value();
  recovery_.created = bases.empty();
  if (bases.empty()) {
    SLUICE_ASSIGN_OR_RETURN(auto s, segment::create(*ctx_.fs, *ctx_.files, dir_, log_start, ctx_.clk->now_ms()));
    segments_.push_back(std::move(s));
    // The empty file and its name are made durable by the first sync that
    // has something to make durable (dir_unsynced_, below), not here:
    // creating 20,000 partitions would otherwise cost two syncs each. A
    // crash before then loses nothing: without a segment file (or with an
    // empty one) recovery starts the log again at the same log start
    // offset (its checkpoint's, or 0), and nothing was acknowledged.
  } else {
    SLUICE_TRY(recover_segments(std::move(bases), rp, clean));
  }
  SLUICE_TRY(finish_recovery(rp, start, epochs_on_disk, clean));
  // Whether the names in the directory are durable is not known here: a
  // created log's segment is not (above), and neither is the one a roll
  // made before a crash, or before a clean close of a log created and never
  // synced. The first sync of appended data makes them so, once per open
  // (one directory sync per written partition), before it calls anything
  // durable.
  dir_unsynced_ = cfg_.fsync;
  // Damaged ranges are skipped by reads already; now remove them from the
  // files (log_damage.cc). Nobody else holds the log yet.
  std::vector<offset> damaged;
  for (const auto& s : segments_)
    if (!s->damaged().empty()) damaged.push_back(s->base());
  for (offset b : damaged) {
    if (auto st = remove_damage(b); !st.ok())
      SLUICE_LOG_WARN("{}: could not remove the damaged ranges of segment {}: {}; reads skip them", name_,
                      b.value(), st.err().message);
  }
  return {};
}

void log::report_cut(const std::string& file, uint64_t pos, uint64_t bytes, size_t later, const std::string& why) {
  recovery_.truncated = true;
  recovery_.file = file;
  recovery_.position = pos;
  recovery_.bytes_dropped = bytes;
  recovery_.segments_dropped = later;
  recovery_.reason = why;
  SLUICE_LOG_WARN("{}: recovery cut {} at byte {} ({} bytes dropped, {} later segments removed): {}", name_,
                  file, pos, bytes, later, why);
}

// Opens every segment: trusting indexes below the recovery point (or all of
// them after a clean shutdown), scanning the rest, and cutting at the first
// bad batch.
status log::recover_segments(std::vector<offset> bases, std::optional<offset> rp, bool clean) {
  size_t first_scan = bases.size();
  if (!clean) {
    first_scan = 0;
    for (size_t i = 0; rp && i < bases.size(); ++i)
      if (bases[i] <= *rp) first_scan = i;
  }
  const segment::batch_visitor visit = [this](const batch::header& h) {
    note_epoch_in_memory(leader_epoch(h.partition_leader_epoch), h.base_offset);
  };
  const int64_t interval = cfg_.index_interval_bytes;
  for (size_t i = 0; i < bases.size(); ++i) {
    SLUICE_ASSIGN_OR_RETURN(auto seg, segment::open_existing(*ctx_.fs, *ctx_.files, dir_, bases[i],
                                                             ctx_.clk->now_ms()));
    const size_t later = bases.size() - i - 1;
    if (i > 0 && bases[i] < segments_.back()->next()) {
      // Overlaps the previous segment: nothing this log does leaves that (a
      // gap, left by compaction, is fine), so trust neither it nor later ones.
      report_cut(seg->log_path(), 0, seg->size(), later, "segment starts below where the previous one ends");
      for (size_t j = i; j < bases.size(); ++j) {
        SLUICE_ASSIGN_OR_RETURN(auto s, segment::open_existing(*ctx_.fs, *ctx_.files, dir_, bases[j], 0));
        SLUICE_TRY(s->remove_files());
      }
      break;
    }
    bool trusted = false;
    if (i < first_scan) {
      SLUICE_ASSIGN_OR_RETURN(trusted, seg->load_trusted(bases[i], interval, visit));
      if (!trusted) SLUICE_LOG_WARN("{}: indexes of {} failed their check; rebuilding", name_, seg->log_path());
    }
    std::optional<segment::cut> cut;
    if (!trusted) {
      // A torn tail is possible in the last segment, and in one a roll
      // closed whose seal (data synced, then index files written) a crash
      // interrupted: without index files it may have lost bytes that later
      // segments follow. Damage anywhere else leaves intact batches (in
      // this segment or later ones) to keep.
      const bool last = i + 1 == bases.size();
      const bool unsealed = !last && !seg->has_index_file();
      SLUICE_ASSIGN_OR_RETURN(auto rec, seg->recover(bases[i], interval, visit, last || unsealed));
      cut = std::move(rec.tail);
      if (!cut && unsealed && seg->next() < bases[i + 1])
        cut = segment::cut{seg->size(), 0,
                           error{errc::corrupt_data, "it ends at offset " + std::to_string(seg->next().value()) +
                                                         " below the next segment's base: a roll's data not "
                                                         "synced before a crash"}};
      if (!rec.damaged.empty()) {
        recovery_.damaged_ranges += rec.damaged.size();
        for (const auto& d : rec.damaged) recovery_.damaged_bytes += d.end - d.pos;
        report_damage(seg->log_path(), rec.damaged, "recovery", "once the log is open");
      }
      if (i + 1 < bases.size() && !cut) {
        // A closed segment that was rescanned: make it as durable and
        // indexed as the recovery point will claim.
        if (cfg_.fsync) SLUICE_TRY(seg->sync());
        seg->seal_time_index();
        SLUICE_TRY(seg->write_indexes(cfg_.fsync));
      }
    }
    segments_.push_back(std::move(seg));
    if (cut) {
      report_cut(segments_.back()->log_path(), cut->pos, cut->bytes_dropped, later, cut->reason.message);
      for (size_t j = i + 1; j < bases.size(); ++j) {
        SLUICE_ASSIGN_OR_RETURN(auto s, segment::open_existing(*ctx_.fs, *ctx_.files, dir_, bases[j], 0));
        SLUICE_TRY(s->remove_files());
      }
      break;
    }
  }
  return {};
}

status log::finish_recovery(std::optional<offset> rp_on_disk, std::optional<offset> start_on_disk,
                            const std::vector<epoch_entry>& epochs_on_disk, bool clean) {
  const offset start(log_start_.load());
  offset end = segments_.back()->next();
  if (end < start) {
    SLUICE_LOG_WARN("{}: recovery left the log end offset {} below the log start offset {}; restarting empty",
                    name_, end.value(), start.value());
    SLUICE_TRY(truncate_fully_locked(start));
    end = start;
  }
  // An empty last segment (a created log's, or one a roll made) has no
  // bytes to sync: the first sync of appended data syncs the file and its
  // name (dir_unsynced_, recover()). A broker of 20,000 idle partitions
  // restarted after a crash paid 7 s for these syncs.
  if (!clean && cfg_.fsync && segments_.back()->size() > 0) SLUICE_TRY(segments_.back()->sync());
  log_end_ = end.value();
  durable_ = end.value();
  note_active();
  truncate_epochs(end);
  truncate_epochs_from_start(start);
  if (cleaner_checkpoint_ > end) SLUICE_TRY(write_cleaner_checkpoint(end));
  if (epochs_ != epochs_on_disk) SLUICE_TRY(write_epochs());
  const offset rp = segments_.back()->base();
  // A missing checkpoint already means "the first segment", so a new log
  // writes none (creating a thousand partitions stays cheap).
  const offset first = segments_.front()->base();
  if (rp_on_disk ? *rp_on_disk != rp : rp != first) SLUICE_TRY(write_recovery_point(rp));
  recovery_point_ = rp;
  if (start_on_disk ? *start_on_disk != start : start != first) SLUICE_TRY(write_log_start(start));
  if (clean_marker_found_) {
    SLUICE_TRY(ctx_.fs->remove(io::join(dir_, files::kCleanShutdown)));
    if (cfg_.fsync) SLUICE_TRY(ctx_.fs->sync_dir(dir_));  // no marker may survive a crash after this
  }
  if (recovery_.created) {
    SLUICE_LOG_DEBUG("{}: created at offset {}", name_, start.value());
  } else if (clean) {  // the common case stays quiet: a broker may hold thousands of logs
    SLUICE_LOG_DEBUG("{}: opened {} segments after a clean shutdown, log start {}, log end {}", name_,
                     segments_.size(), start.value(), end.value());
  } else {
    SLUICE_LOG_INFO("{}: recovered {} segments after an unclean shutdown, log start {}, log end {}{}", name_,
                    segments_.size(), start.value(), end.value(), recovery_.truncated ? ", tail cut" : "");
  }
  return {};
}

}  // namespace sluice::storage
