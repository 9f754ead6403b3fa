// The partition log's durability: group commit (on_durable waiters, the
// flusher's syncs, one sync over many logs), sealing what a roll closed,
// and preparing the active segment's tail ahead of appends
// (docs/architecture.md, the produce path). The rest of the log is in
// log.cc.

#include <algorithm>
#include <chrono>
#include <climits>
#include <future>
#include <thread>

#include "base/log.h"
#include "model/record_batch.h"
#include "storage/checkpoint.h"
#include "storage/log.h"
#include "storage/log_files.h"
#include "storage/file_deleter.h"
#include "storage/flusher.h"
#include "storage/segment.h"

namespace sluice::storage {

namespace batch = model::batch;

// ---- Durability ----------------------------------------------------------------

void log::on_durable(offset o, durable_callback cb) {
  std::optional<status> now;
  {
    std::lock_guard g(waiters_mu_);
    if (o.value() < durable_.load()) now = status();
    else if (closed_) now = status(errc::shutting_down, name_ + " is closed");
    else if (offline_) now = status(errc::log_offline, name_ + " is offline for writes");
    else if (o.value() >= log_end_.load())
      now = status(errc::invalid_argument, name_ + ": offset " + std::to_string(o.value()) + " not appended");
    else waiters_.push_back({o, std::move(cb)});
  }
  if (now) {
    cb(*now);
    return;
  }
  ctx_.flush->request(shared_from_this());
}

status log::wait_durable(offset o) {
  std::promise<status> p;
  auto f = p.get_future();
  on_durable(o, [&p](const status& s) { p.set_value(s); });
  return f.get();
}

status log::flush() {
  status st = sync_once();
  answer_waiters();  // with no lock held: callbacks may call back into the log
  // Sealing comes after the answers: acks=all producers wait on the sync,
  // not on index files.
  status sealed = seal_after_flush();
  return st.ok() ? sealed : st;
}

status log::seal_after_flush() {
  result<bool> sealed = seal_closed();
  if (!sealed.ok()) return sealed.to_status();
  if (*sealed) {
    std::function<void()> hook;
    {
      std::lock_guard g(mu_);
      hook = seal_hook_;
    }
    if (hook) hook();
  }
  return {};
}

result<bool> log::plan_sync_locked(pending_sync& p) {
  // The active segment, every segment a roll closed since its last sync,
  // and the directory when a roll created a file: once all are synced
  // everything below the log end is durable.
  std::lock_guard g(mu_);
  SLUICE_TRY(check_writable());
  p.target = offset(log_end_.load());
  p.gen = truncations_;
  unflushed_messages_ = 0;  // this sync covers them
  if (!cfg_.fsync || p.target.value() <= durable_.load()) return false;
  p.rolls = rolls_;
  if (synced_at_roll_ != rolls_) {
    for (size_t i = 0; i + 1 < segments_.size(); ++i) {
      segment& seg = *segments_[i];
      if (seg.synced()) continue;
      auto f = seg.file();
      if (!f.ok()) return go_offline(f.err());
      p.files.push_back(std::move(f).value());
      p.closed.push_back(seg.id());
    }
  }
  auto f = active().file();
  if (!f.ok()) return go_offline(f.err());
  p.files.push_back(std::move(f).value());
  p.active_id = active().id();
  p.active_bytes = active().size();
  p.dir = std::exchange(dir_unsynced_, false);
  p.data_only = p.files.size() == 1 && !p.dir && p.active_bytes <= active().prepared_end();
  return true;
}

void log::prepare_tail() {
  uint64_t id = 0, gen = 0, target = 0;
  std::shared_ptr<io::file> f;
  std::string path;
  {
    std::lock_guard g(mu_);
    prepare_asked_ = false;
    if (closed_ || offline_ || !cfg_.fsync) return;
    segment& a = active();
    id = a.id();
    gen = truncations_;
    target = std::min(a.size() + limits::segment_prepare_bytes, static_cast<uint64_t>(cfg_.segment_bytes));
    auto fr = a.file();
    if (!fr.ok()) return;  // the next append meets the error
    f = std::move(fr).value();
    path = a.log_path();
  }
  // A piece at a time, so an append waits for one piece at most.
  for (;;) {
    uint64_t from = 0, to = 0;
    {
      std::lock_guard g(mu_);
      if (closed_ || offline_ || truncations_ != gen || active().id() != id) return;
      segment& a = active();
      from = a.zeroed_end();
      if (from >= target) break;
      to = std::min(target, from + limits::segment_prepare_piece_bytes);
      if (auto st = a.write_zeros(to); !st.ok()) {
        // A full disk, say: appends go on past the tail, syncing all.
        SLUICE_LOG_DEBUG("{}: preparing the segment tail: {}", name_, st.err().message);
        break;
      }
    }
    // On their way to the device at once: a group commit meanwhile (whose
    // fdatasync writes every dirty page of the file) finds at most a piece
    // of them still to write.
    f->write_behind(from, to - from);
    // Paced: logs that grow alike ask at the same moment, and their zeros
    // all at once would hold up the group commits behind them.
    std::this_thread::sleep_for(std::chrono::microseconds(limits::segment_prepare_piece_pause_us));
  }
  uint64_t zeroed = 0;
  {
    std::lock_guard g(mu_);
    if (closed_ || truncations_ != gen || active().id() != id) return;
    zeroed = active().zeroed_end();
  }
  // The zeros, their blocks and the file's size become durable; appends
  // meanwhile are synced too, which does no harm. Through a descriptor of
  // its own: the kernel reports a writeback error once per descriptor, and
  // this sync must not take the report the group commit's syncs (on the
  // shared one) need before they call anything durable.
  auto own = ctx_.fs->open(path, io::open_mode::read_write);
  if (!own.ok()) return;  // the segment went meanwhile
  if (auto st = (*own)->sync(); !st.ok()) {
    SLUICE_LOG_DEBUG("{}: syncing the prepared tail: {}", name_, st.err().message);
    return;  // the group commit meets the error on its own
  }
  std::lock_guard g(mu_);
  if (closed_ || truncations_ != gen || active().id() != id) return;
  active().set_prepared(zeroed);
}

status log::finish_sync_locked(const pending_sync& p, status st) {
  if (st.ok() && p.dir) st = ctx_.fs->sync_dir(dir_);
  std::pair<uint64_t, uint64_t> drop{0, 0};
  {
    std::lock_guard g(mu_);
    if (!st.ok()) return go_offline(st.err());
    // A truncation while the files synced may have cut one of the closed
    // segments and let it be written again (it became the active one, then
    // a roll closed it): the sync did not cover what was written since, so
    // nothing it planned is marked synced, and the durable offset stays.
    if (p.gen != truncations_) return {};
    for (auto& seg : segments_)
      if (std::find(p.closed.begin(), p.closed.end(), seg->id()) != p.closed.end()) seg->mark_synced();
    synced_at_roll_ = p.rolls;
    if (p.target.value() > durable_.load()) durable_ = p.target.value();
    drop = cache_drop_locked(p);
  }
  // Outside the lock: appends go on meanwhile. The file is the active
  // segment's as planned (the last one), open while `p` holds it.
  if (drop.second > 0) p.files.back()->advise_dontneed(drop.first, drop.second);
  return {};
}

std::pair<uint64_t, uint64_t> log::cache_drop_locked(const pending_sync& p) {
  const uint64_t behind = ctx_.follower_cache_drop_behind_bytes;
  if (behind == 0 || !follower_tail_ || p.active_bytes <= behind) return {0, 0};
  if (cache_dropped_segment_ != p.active_id) {  // a roll: a new file from its start
    cache_dropped_segment_ = p.active_id;
    cache_dropped_to_ = 0;
  }
  const uint64_t step = std::clamp(behind / 4, limits::min_cache_drop_step_bytes, limits::max_cache_drop_step_bytes);
  const uint64_t to = (p.active_bytes - behind) & ~uint64_t{4095};  // whole pages only
  if (to < cache_dropped_to_ + step) return {0, 0};
  const uint64_t from = cache_dropped_to_;
  cache_dropped_to_ = to;
  return {from, to - from};
}

status log::sync_once() {
  std::lock_guard fg(flush_mu_);
  pending_sync p;
  auto planned = plan_sync_locked(p);
  if (!planned.ok()) return planned.to_status();
  if (!*planned) return {};
  // The syncs run without mu_, so appends continue and gather for the next.
  status st;
  for (auto& f : p.files)
    if (st.ok()) st = p.data_only ? f->sync_data() : f->sync();
  return finish_sync_locked(p, std::move(st));
}

void log::flush_together(std::vector<std::shared_ptr<log>> logs) {
  // A fixed lock order (by address) among flusher threads that each hold
  // several flush_mu_: a log may be queued again while a round has it.
  std::sort(logs.begin(), logs.end());
  logs.erase(std::unique(logs.begin(), logs.end()), logs.end());
  const size_t n = logs.size();
  std::vector<std::unique_lock<std::mutex>> locks;
  locks.reserve(n);
  std::vector<pending_sync> plans(n);
  std::vector<bool> to_sync(n, false);
  for (size_t i = 0; i < n; ++i) {
    locks.emplace_back(logs[i]->flush_mu_);
    // An error took the log offline and doomed its waiters: nothing to sync.
    auto r = logs[i]->plan_sync_locked(plans[i]);
    to_sync[i] = r.ok() && *r;
  }
  // One sync_together per file system (in practice one: the log manager's)
  // over the files of every log that has something to sync.
  for (size_t i = 0; i < n; ++i) {
    if (!to_sync[i]) continue;
    io::filesystem* fs = logs[i]->ctx_.fs;
    std::vector<size_t> members;
    std::vector<io::file*> files;
    bool data_only = true;
    for (size_t j = i; j < n; ++j) {
      if (!to_sync[j] || logs[j]->ctx_.fs != fs) continue;
      to_sync[j] = false;
      members.push_back(j);
      data_only = data_only && plans[j].data_only;
      for (auto& f : plans[j].files) files.push_back(f.get());
    }
    // One log past its prepared tail (or with a roll to sync) makes the
    // round a full one: syncfs covers every file's metadata anyway.
    const std::vector<status> st = data_only ? fs->sync_data_together(files) : fs->sync_together(files);
    size_t k = 0;
    for (size_t j : members) {
      status mine;
      for (size_t m = 0; m < plans[j].files.size(); ++m, ++k)
        if (mine.ok() && !st[k].ok()) mine = st[k];
      // A failure takes the log offline; its waiters learn it below.
      logs[j]->finish_sync_locked(plans[j], std::move(mine)).ignore();
    }
  }
  locks.clear();
  for (auto& l : logs) l->answer_waiters();
}

void log::doom_waiters_from(offset o) {
  std::lock_guard g(waiters_mu_);
  std::erase_if(waiters_, [&](waiter& w) {
    if (w.o < o) return false;
    doomed_.push_back({std::move(w), error{errc::offset_out_of_range,
                                           name_ + ": offset " + std::to_string(w.o.value()) + " truncated"}});
    return true;
  });
}

void log::answer_waiters() {
  std::vector<std::pair<waiter, status>> ready;
  {
    std::lock_guard g(waiters_mu_);
    for (auto& [w, e] : doomed_) ready.push_back({std::move(w), status(std::move(e))});
    doomed_.clear();
    const int64_t durable = durable_.load();
    std::optional<status> fail;
    if (offline_) fail = status(errc::log_offline, name_ + " is offline for writes");
    if (closed_) fail = status(errc::shutting_down, name_ + " is closed");
    std::erase_if(waiters_, [&](waiter& w) {
      if (w.o.value() < durable) ready.push_back({std::move(w), status()});
      else if (fail) ready.push_back({std::move(w), *fail});
      else return false;
      return true;
    });
  }
  for (auto& [w, st] : ready) w.cb(st);
}

}  // namespace sluice::storage
