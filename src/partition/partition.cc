#include "partition/partition.h"
#include "storage/log.h"
#include "storage/segment.h"

#include <algorithm>

#include "base/assert.h"
#include "base/limits.h"
#include "base/log.h"
#include "model/record_batch.h"
#include "partition/truncation.h"
#include "protocol/records/control.h"
#include "protocol/records/validate.h"

namespace sluice::cluster {

namespace batch = model::batch;

storage::log_config to_log_config(const config::topic_config& cfg) {
  storage::log_config l;
  l.segment_bytes = cfg.segment_bytes;
  l.segment_ms = cfg.segment_ms;
  l.index_interval_bytes = cfg.index_interval_bytes;
  l.segment_index_bytes = cfg.segment_index_bytes;
  l.fsync = cfg.fsync_enable;
  l.file_delete_delay_ms = cfg.file_delete_delay_ms;
  l.flush_messages = cfg.flush_messages;
  l.flush_ms = cfg.flush_ms;
  return l;
}

partition::partition(storage::topic_partition tp, std::shared_ptr<storage::log> log, config::topic_config cfg,
                     io::filesystem& fs, std::string snapshot_path)
    : tp_(std::move(tp)), log_(std::move(log)), fs_(fs), snapshot_path_(std::move(snapshot_path)),
      cfg_(std::move(cfg)) {}

leader_epoch partition::epoch() const { return leader_epoch(epoch_.load(std::memory_order_acquire)); }

replica_state partition::replicas() const {
  replica_state s;
  {
    std::lock_guard g(state_mu_);
    s = state_;
    for (auto& m : s.isr) {
      if (m.node_id == node_id_) continue;
      for (const auto& f : tracker_.followers())
        if (f.id == m.node_id) m.log_end = f.log_end;
    }
  }
  s.epoch = epoch();
  for (auto& m : s.isr)
    if (m.node_id == node_id_) m.log_end = log_->log_end_offset();
  s.high_watermark = high_watermark();
  return s;
}

bool partition::high_watermark_behind_epoch_start() const {
  if (!is_leader()) return false;
  std::lock_guard g(state_mu_);
  return high_watermark() < tracker_.epoch_start();
}

int32_t partition::leader_id() const {
  std::lock_guard g(state_mu_);
  return state_.leader_id;
}

void partition::stop_leading() {
  std::vector<storage::durable_callback> orphans;
  {
    std::lock_guard a(append_mu_);
    std::lock_guard g(state_mu_);
    state_.role = replica_role::follower;
    leader_.store(false, std::memory_order_release);
    orphans = take_commit_waiters_locked();
  }
  answer(std::move(orphans), status(errc::not_leader, "this broker stopped leading " + tp_.topic + "-" +
                                                          std::to_string(tp_.partition)));
}

void partition::leave() {
  left_.store(true, std::memory_order_release);
  stop_leading();
}

void partition::answer_commit_waiters(const status& why) {
  std::vector<storage::durable_callback> waiting;
  {
    std::lock_guard g(state_mu_);
    waiting = take_commit_waiters_locked();
  }
  answer(std::move(waiting), why);
}

errc partition::check_leader(int32_t current_leader_epoch) const {
  if (!is_leader()) return errc::not_leader;
  if (current_leader_epoch < 0) return errc::ok;
  const int32_t mine = epoch_.load(std::memory_order_acquire);
  if (current_leader_epoch < mine) return errc::fenced_leader_epoch;
  if (current_leader_epoch > mine) return errc::unknown_leader_epoch;
  return errc::ok;
}

errc partition::check_replica(int32_t current_leader_epoch) const {
  if (current_leader_epoch < 0) return errc::ok;
  const int32_t mine = epoch_.load(std::memory_order_acquire);
  if (current_leader_epoch < mine) return errc::fenced_leader_epoch;
  if (current_leader_epoch > mine) return errc::unknown_leader_epoch;
  return errc::ok;
}

bool partition::apply_state(const replica_list& replicas, const partition_state& st) {
  std::vector<storage::durable_callback> covered, orphans;
  bool leadership_changed = false;
  {
    // append_mu_ first (as append takes it), so no append is between its
    // leadership check and its epoch stamp while the state changes.
    std::lock_guard a(append_mu_);
    std::lock_guard g(state_mu_);
    const int32_t held = epoch_.load(std::memory_order_acquire);
    if (st.leader_epoch < held || (st.leader_epoch == held && st.partition_epoch < partition_epoch_))
      return false;
    const bool was_leader = leader_.load(std::memory_order_acquire);
    const bool leads = st.leader == node_id_ && !left_.load(std::memory_order_acquire);
    const offset end = log_->log_end_offset();
    const int64_t now = clk_->monotonic_ms();
    SLUICE_ASSERT(st.leader_epoch >= held, "a partition's leader epoch went back");
    // The controller elects leaders from the ISR (an unclean election
    // makes the ISR the new leader alone) and never empties it.
    SLUICE_ASSERT(!leads || std::find(st.isr.begin(), st.isr.end(), node_id_) != st.isr.end(),
                  "this broker leads a partition whose ISR does not name it");
    leadership_changed = leads != was_leader || st.leader_epoch != held;
    if (leadership_changed) {
      verifications_.clear();
      ++guard_generation_;
    }
    if (leads && (!was_leader || st.leader_epoch != held)) {
      // A new leadership: the followers are heard from afresh.
      tracker_.become_leader(node_id_, replicas, st.isr, high_watermark(), end, now);
    } else if (leads) {
      tracker_.set_isr(replicas, st.isr, end, now);
    }
    state_.replicas = replicas;
    state_.leader_id = st.leader;
    state_.role = leads ? replica_role::leader : replica_role::follower;
    state_.isr.clear();
    for (int32_t id : st.isr) state_.isr.push_back({id, offset(-1)});  // replicas() fills log ends in
    partition_epoch_ = st.partition_epoch;
    isr_count_.store(static_cast<int32_t>(st.isr.size()), std::memory_order_release);
    replica_count_.store(static_cast<int32_t>(replicas.size()), std::memory_order_release);
    epoch_.store(st.leader_epoch, std::memory_order_release);
    leader_.store(leads, std::memory_order_release);
    if (leads) {
      covered = publish_high_watermark_locked();
    } else {
      // Waiters of a lost leadership learn it now rather than never.
      orphans = take_commit_waiters_locked();
    }
  }
  answer(std::move(covered), {});
  answer(std::move(orphans), status(errc::not_leader, "leadership of " + tp_.topic + "-" +
                                                          std::to_string(tp_.partition) + " moved"));
  // Every waiting consumer looks again (the high watermark or this
  // broker's role may have changed). A follower's fetch looks again only
  // when the leadership or its epoch changed (it may now be refused): an
  // ISR change alone changes nothing it reads, and waking it cost a whole
  // attempt of its request (thousands of partitions) per change, on the
  // metadata thread, which a restarted broker's ISR expansions of 20,000
  // partitions held up for seconds.
  wake_listeners(true, leadership_changed);
  return true;
}

std::vector<storage::durable_callback> partition::publish_high_watermark_locked() {
  // The tracker starts from this partition's high watermark when it
  // becomes leader and only moves it up, within the leader's log end.
  const int64_t hw = tracker_.high_watermark().value();
  SLUICE_ASSERT(hw >= hw_.load(std::memory_order_relaxed), "a leader's high watermark went back");
  SLUICE_ASSERT(hw <= log_->log_end_offset().value(), "the high watermark passed the leader's log end");
  hw_.store(hw, std::memory_order_release);
  std::vector<storage::durable_callback> out;
  const int64_t now_hw = hw_.load(std::memory_order_relaxed);
  while (!commit_waiters_.empty() && commit_waiters_.begin()->first < now_hw) {
    out.push_back(std::move(commit_waiters_.begin()->second));
    commit_waiters_.erase(commit_waiters_.begin());
  }
  return out;
}

std::vector<storage::durable_callback> partition::take_commit_waiters_locked() {
  std::vector<storage::durable_callback> out;
  for (auto& [_, cb] : commit_waiters_) out.push_back(std::move(cb));
  commit_waiters_.clear();
  for (auto& [_, cb] : low_watermark_waiters_) out.push_back(std::move(cb));
  low_watermark_waiters_.clear();
  return out;
}

offset partition::low_watermark_locked() const {
  if (!has_followers()) return log_->log_start_offset();
  return tracker_.low_watermark(log_->log_start_offset());
}

offset partition::low_watermark() const {
  std::lock_guard g(state_mu_);
  return low_watermark_locked();
}

std::vector<storage::durable_callback> partition::take_low_watermark_waiters_locked() {
  std::vector<storage::durable_callback> out;
  const int64_t low = low_watermark_locked().value();
  while (!low_watermark_waiters_.empty() && low_watermark_waiters_.begin()->first <= low) {
    out.push_back(std::move(low_watermark_waiters_.begin()->second));
    low_watermark_waiters_.erase(low_watermark_waiters_.begin());
  }
  return out;
}

void partition::on_low_watermark(offset target, storage::durable_callback cb) {
  {
    std::lock_guard g(state_mu_);
    if (is_leader()) {
      if (low_watermark_locked() < target) {
        low_watermark_waiters_.emplace(target.value(), std::move(cb));
        return;
      }
    }
  }
  if (!is_leader())
    return cb(status(errc::not_leader, "this broker no longer leads " + tp_.topic + "-" + std::to_string(tp_.partition)));
  cb({});
}

void partition::answer(std::vector<storage::durable_callback> cbs, const status& s) {
  for (auto& cb : cbs) cb(s);
}

void partition::on_committed(offset last, storage::durable_callback cb) {
  log_->on_durable(last, [w = weak_from_this(), last, cb = std::move(cb)](const status& s) mutable {
    // Truncated before it was durable: this broker lost the leadership
    // (a deposed leader truncating to its successor). The client retries
    // with the new leader.
    if (s.code() == errc::offset_out_of_range)
      return cb(status(errc::not_leader, "leadership moved before the batch was replicated"));
    if (!s.ok()) return cb(s);
    auto self = w.lock();
    if (!self) return cb(status(errc::not_leader, "the partition was closed"));
    self->wait_high_watermark(last, std::move(cb));
  });
}

status partition::acks_all_outcome(const status& waited) const {
  if (!waited.ok()) return waited;
  size_t in_sync = 0;
  {
    std::lock_guard g(state_mu_);
    in_sync = is_leader() ? tracker_.maximal_isr_size() : in_sync_count();
  }
  const auto min_insync = static_cast<size_t>(std::max(min_insync_.load(std::memory_order_relaxed), 1));
  if (in_sync >= min_insync) return {};
  return status(errc::not_enough_replicas_after_append,
                "the ISR shrank to " + std::to_string(in_sync) + " replicas, below min.insync.replicas " +
                    std::to_string(min_insync) + ", while the batch waited; it is written");
}

void partition::wait_high_watermark(offset last, storage::durable_callback cb) {
  {
    std::lock_guard g(state_mu_);
    if (high_watermark() <= last) {
      if (is_leader() && !closed_.load()) {
        commit_waiters_.emplace(last.value(), std::move(cb));
        return;
      }
      // Fall through: answered below, outside the lock.
    }
  }
  if (high_watermark() > last) return cb({});
  cb(status(errc::not_leader, "leadership of " + tp_.topic + "-" + std::to_string(tp_.partition) +
                                  " moved before the batch was replicated"));
}

void partition::on_follower_fetch(int32_t replica, offset fetch_offset, int64_t broker_epoch,
                                  offset follower_log_start) {
  std::vector<storage::durable_callback> covered, deleted;
  bool moved = false;
  {
    std::lock_guard g(state_mu_);
    if (!is_leader()) return;
    moved = tracker_.on_fetch(replica, fetch_offset, log_->log_end_offset(), clk_->monotonic_ms(), broker_epoch,
                              follower_log_start);
    if (moved) covered = publish_high_watermark_locked();
    if (!low_watermark_waiters_.empty()) deleted = take_low_watermark_waiters_locked();
  }
  answer(std::move(covered), {});
  answer(std::move(deleted), {});
  if (moved) wake_listeners(true, false);
}

bool partition::isr_following(int64_t lag_max_ms) const {
  std::lock_guard g(state_mu_);
  return is_leader() && tracker_.isr_following(clk_->monotonic_ms(), lag_max_ms);
}

std::optional<isr_request> partition::propose_isr(int64_t lag_max_ms) {
  std::lock_guard g(state_mu_);
  if (!is_leader()) return std::nullopt;
  const int64_t now = clk_->monotonic_ms();
  auto next = tracker_.propose_isr(now, lag_max_ms);
  if (!next) return std::nullopt;
  // The same change at the same partition epoch is on its way (or was
  // refused, say for a broker whose registration the controller's image
  // did not show yet): ask again after a short while, not at every upkeep.
  if (*next == last_proposed_ && partition_epoch_ == last_proposed_epoch_ &&
      now - last_proposed_ms_ < limits::isr_proposal_repeat_ms)
    return std::nullopt;
  last_proposed_ = *next;
  last_proposed_epoch_ = partition_epoch_;
  last_proposed_ms_ = now;
  isr_request req{tp_.topic, tp_.partition, epoch_.load(std::memory_order_acquire), partition_epoch_,
                  std::move(*next), {}};
  for (int32_t id : req.isr) {
    if (std::find(tracker_.isr().begin(), tracker_.isr().end(), id) != tracker_.isr().end()) continue;
    for (const auto& f : tracker_.followers())
      if (f.id == id) req.added_broker_epochs[id] = f.broker_epoch;
  }
  return req;
}

std::vector<follower_progress> partition::follower_progress_view() const {
  std::lock_guard g(state_mu_);
  if (!is_leader()) return {};
  return tracker_.followers();
}

result<storage::append_result> partition::append_replicated(std::span<const std::byte> batches,
                                                            std::span<const batch::header> headers,
                                                            leader_epoch fetched_at, offset fetch_offset) {
  {
    std::lock_guard g(append_mu_);
    // The name only for an error: this runs for every replicated batch.
    auto name = [&] { return tp_.topic + "-" + std::to_string(tp_.partition); };
    if (is_leader()) return error{errc::invalid_argument, name() + ": a leader does not append replicated batches"};
    // apply_state changes the epoch and truncation the log end under
    // append_mu_: both checks hold until the append is done.
    if (epoch_.load(std::memory_order_acquire) != fetched_at.value())
      return error{errc::fenced_leader_epoch, name() + ": fetched at leader epoch " +
                                                  std::to_string(fetched_at.value()) + ", now at " +
                                                  std::to_string(epoch_.load())};
    if (log_->log_end_offset() != fetch_offset)
      return error{errc::offset_out_of_range, name() + ": fetched from " + std::to_string(fetch_offset.value()) +
                                                  ", the log now ends at " +
                                                  std::to_string(log_->log_end_offset().value())};
    // Markers are read before anything is appended: a control batch that
    // holds none is refused whole, not stored and then not understood.
    for (size_t i = 0, pos = 0; i < headers.size(); pos += headers[i].size_bytes(), ++i) {
      if (headers[i].is_control()) SLUICE_TRY(protocol::records::parse_marker(batches.subspan(pos)));
    }
    SLUICE_ASSIGN_OR_RETURN(auto r, log_->append_replicated(batches, headers));
    // A follower's log is a prefix of its leader's: each append continues
    // it (past a gap compaction left, at most) and ends it. Only an empty
    // log whose start lies inside the leader's first batch takes that
    // whole batch, from below its end (storage::log::append_replicated).
    SLUICE_ASSERT(
        r.last >= r.base && (r.base >= fetch_offset ||
                             (log_->log_start_offset() == fetch_offset && r.last >= fetch_offset)),
        "a replicated append went back");
    SLUICE_ASSERT(log_->log_end_offset() == r.last + 1, "a replicated append did not end the log");
    // The producer state follows each batch, markers ending transactions.
    bool txns = false;
    for (size_t i = 0, pos = 0; i < headers.size(); pos += headers[i].size_bytes(), ++i) {
      const auto& h = headers[i];
      txns = txns || h.is_transactional();
      SLUICE_ASSIGN_OR_RETURN(auto ended, producers_.apply_stored(h, batches.subspan(pos)));
      if (ended) SLUICE_TRY(note_ended_locked(*ended));
    }
    if (txns) publish_open_txns_locked();
    bytes_appended_.fetch_add(batches.size(), std::memory_order_relaxed);
    // Consumers reading from this follower wait for the high watermark
    // (set_leader_high_watermark), not for appends.
    return r;
  }
}

result<storage::append_result> partition::append_replicated(std::span<const std::byte> batches,
                                                            leader_epoch fetched_at, offset fetch_offset) {
  std::vector<batch::header> hs;
  SLUICE_TRY(batch::check_all(batches, batch::strictness::stored, hs));
  return append_replicated(batches, hs, fetched_at, fetch_offset);
}

int32_t partition::last_written_epoch() const {
  const auto e = log_->latest_epoch();
  return e ? e->epoch.value() : -1;
}

std::optional<std::pair<int32_t, int64_t>> partition::diverging_epoch(int32_t last_fetched_epoch,
                                                                      offset fetch_offset) const {
  if (last_fetched_epoch < 0) return std::nullopt;
  const int32_t current = epoch_.load(std::memory_order_acquire);
  // The usual fetch: the follower's last batch is of this leader's epoch,
  // which ends at the log end here, and the fetch offset is within it.
  if (last_fetched_epoch == current) return std::nullopt;
  const offset end = log_->log_end_offset();
  const epoch_end e = epoch_end_for(with_current_epoch(log_->leader_epochs(), leader_epoch(current), end), end,
                                    last_fetched_epoch);
  // An epoch above this leader's (its metadata lags) or no history:
  // nothing to compare, as Kafka serves such a fetch.
  if (e.undefined() || e.leader_epoch < 0) return std::nullopt;
  if (e.leader_epoch < last_fetched_epoch || offset(e.end_offset) < fetch_offset)
    return std::pair{e.leader_epoch, e.end_offset};
  return std::nullopt;
}

void partition::set_leader_high_watermark(offset leader_hw) {
  // A follower's high watermark: the leader's, within what it holds. It
  // moves only up here (a truncation below it is an unclean election's).
  const offset hw = std::min(leader_hw, log_->log_end_offset());
  int64_t cur = hw_.load(std::memory_order_acquire);
  bool moved = false;
  while (hw.value() > cur) {
    if (hw_.compare_exchange_weak(cur, hw.value(), std::memory_order_acq_rel)) {
      moved = true;
      break;
    }
  }
  if (moved) wake_listeners(true, false);
}

std::optional<status> partition::fenced_cut(std::optional<leader_epoch> decided_at, const char* what) const {
  if (!decided_at || epoch_.load(std::memory_order_acquire) == decided_at->value()) return std::nullopt;
  return status(errc::fenced_leader_epoch,
                tp_.topic + "-" + std::to_string(tp_.partition) + ": " + what + " decided at another leader epoch");
}

status partition::follow_log_start(offset leader_log_start) {
  if (is_leader()) return {};
  const offset o = std::min(leader_log_start, high_watermark());
  if (o <= log_->log_start_offset()) return {};
  return log_->advance_log_start(o);
}

status partition::truncate_to(offset o, std::optional<leader_epoch> decided_at) {
  // snapshot_mu_ first: a snapshot being written describes the log before
  // the cut, and lands before the cut removes what it no longer fits.
  std::lock_guard sg(snapshot_mu_);
  std::lock_guard a(append_mu_);
  if (is_leader())
    return status(errc::invalid_argument, tp_.topic + "-" + std::to_string(tp_.partition) + ": a leader does not truncate");
  if (auto fenced = fenced_cut(decided_at, "truncation")) return *fenced;
  SLUICE_TRY(log_->truncate_to(o));
  const offset end = log_->log_end_offset();
  const int64_t hw = hw_.load(std::memory_order_acquire);
  if (hw > end.value()) {
    // Committed offsets are gone: only an unclean election leads here.
    const auto lost = static_cast<uint64_t>(hw - end.value());
    truncated_committed_.fetch_add(lost, std::memory_order_relaxed);
    SLUICE_LOG_WARN("{}-{}: truncation to {} discarded {} committed offsets [{}, {}) after an unclean election",
                    tp_.topic, tp_.partition, end.value(), lost, end.value(), hw);
    hw_.store(end.value(), std::memory_order_release);
  }
  SLUICE_TRY(aborted_->truncate_from(end));
  return rebuild_producers();
}

status partition::reset_to(offset o, std::optional<leader_epoch> decided_at) {
  std::lock_guard sg(snapshot_mu_);
  std::lock_guard a(append_mu_);
  if (is_leader())
    return status(errc::invalid_argument, tp_.topic + "-" + std::to_string(tp_.partition) + ": a leader does not reset");
  if (auto fenced = fenced_cut(decided_at, "reset")) return *fenced;
  SLUICE_TRY(log_->reset_to(o));
  // Nothing below `o` is here any more, and the leader holds it all.
  hw_.store(o.value(), std::memory_order_release);
  SLUICE_TRY(aborted_->truncate_from(offset(0)));
  return rebuild_producers();
}

status partition::rebuild_producers() {
  // append_mu_ held. Snapshots past the new log end describe offsets that
  // are gone: they go, and the state is rebuilt from the newest one left
  // (a roll's worth of replay, not the whole log).
  // Removed before any append: a snapshot past the cut left on disk would
  // be taken for the log that grows there again.
  remove_snapshots(prune_snapshots_locked(log_->log_start_offset(), log_->log_end_offset()));
  producers_ = producer_state{};
  snapshot_offset_ = offset(-1);
  {
    // Markers past the cut are gone; the replay finds again those below it.
    std::lock_guard g(state_mu_);
    unreplicated_txns_.clear();
    has_unreplicated_.store(false, std::memory_order_release);
  }
  return load_producers();
}

std::string partition::snapshot_file(offset next) const {
  return storage::segment_path(log_->dir(), next, "snapshot");
}

void partition::list_snapshots() {
  snapshots_.clear();
  auto names = fs_.list(log_->dir());
  if (!names.ok()) {
    SLUICE_LOG_WARN("{}-{}: listing producer state snapshots: {}", tp_.topic, tp_.partition, names.err().message);
    return;
  }
  constexpr std::string_view ext = ".snapshot";
  for (const auto& n : *names) {
    if (n.size() != 20 + ext.size() || n.compare(20, ext.size(), ext) != 0) continue;
    if (auto o = storage::parse_segment_name(n.substr(0, 20) + ".log")) snapshots_.push_back(*o);
  }
  std::sort(snapshots_.begin(), snapshots_.end());
}

std::vector<offset> partition::prune_snapshots_locked(offset start, offset end) {
  std::vector<offset> gone;
  // Above the log end: their offsets are gone.
  while (!snapshots_.empty() && snapshots_.back() > end) {
    gone.push_back(snapshots_.back());
    snapshots_.pop_back();
  }
  // Below the log start, and the oldest beyond the limit; the newest stays.
  size_t drop = 0;
  while (drop + 1 < snapshots_.size() &&
         (snapshots_[drop] < start || snapshots_.size() - drop > limits::max_producer_snapshots))
    ++drop;
  gone.insert(gone.end(), snapshots_.begin(), snapshots_.begin() + static_cast<ptrdiff_t>(drop));
  snapshots_.erase(snapshots_.begin(), snapshots_.begin() + static_cast<ptrdiff_t>(drop));
  return gone;
}

void partition::remove_snapshots(const std::vector<offset>& gone) {
  for (offset o : gone) {
    if (auto s = fs_.remove(snapshot_file(o)); !s.ok() && s.code() != errc::not_found)
      SLUICE_LOG_WARN("{}-{}: removing producer state snapshot {}: {}", tp_.topic, tp_.partition, o.value(),
                      s.err().message);
  }
}

result<storage::file_region> partition::read(offset o, size_t max_bytes, std::optional<offset> upper) {
  return log_->read(o, max_bytes, upper);
}

result<std::vector<std::byte>> partition::read_bytes(offset o, size_t max_bytes, std::optional<offset> upper) {
  return log_->read_bytes(o, max_bytes, upper);
}

result<std::optional<storage::timestamp_lookup>> partition::offset_for_timestamp(int64_t ts_ms) {
  return log_->offset_for_timestamp(ts_ms);
}

result<std::optional<storage::timestamp_lookup>> partition::offset_of_max_timestamp() {
  return log_->offset_of_max_timestamp();
}

std::optional<int64_t> partition::batch_time_at(offset o) {
  auto region = log_->read(o, 1, high_watermark());
  if (!region.ok() || region->len < batch::header_bytes || !region->file) return std::nullopt;
  std::byte buf[batch::header_bytes];
  auto n = region->file->pread(buf, sizeof buf, region->pos);
  if (!n.ok() || *n != sizeof buf) return std::nullopt;
  const auto h = batch::parse(buf);
  const bool log_append_time = h.ts_type() == model::timestamp_type::log_append_time;
  const int64_t ts = log_append_time ? h.max_timestamp : h.base_timestamp;
  if (ts < 0) return std::nullopt;
  return ts;
}

status partition::delete_records_before(offset o) {
  if (o > high_watermark()) return status(errc::offset_out_of_range, "above the high watermark");
  return log_->advance_log_start(o);
}

void partition::delete_records_before_async(offset o, std::function<void(status)> done) {
  if (o > high_watermark()) return done(status(errc::offset_out_of_range, "above the high watermark"));
  log_->advance_log_start_async(o, std::move(done));
}

offset partition::log_start_offset() const { return log_->log_start_offset(); }
offset partition::durable_offset() const { return std::min(log_->durable_offset(), log_->log_end_offset()); }

offset partition::log_end_offset() const { return log_->log_end_offset(); }

std::vector<storage::segment_info> partition::segments() const { return log_->segments(); }

partition::storage_health partition::health() const {
  return {log_->offline(), log_->out_of_space(), log_->out_of_space_errors(), log_->damage()};
}

result<std::shared_ptr<partition>> partition::open(storage::topic_partition tp, std::shared_ptr<storage::log> log,
                                                   config::topic_config cfg, io::filesystem& fs,
                                                   std::string snapshot_path, sluice::topic_id topic,
                                                   int32_t node_id, const sluice::clock& clk,
                                                   bool sole_replica, std::optional<offset> checkpointed_hw) {
  std::shared_ptr<partition> p(new partition(std::move(tp), std::move(log), std::move(cfg), fs,
                                             std::move(snapshot_path)));
  p->topic_id_ = topic;
  p->node_id_ = node_id;
  p->state_.role = replica_role::leader;
  p->state_.leader_id = node_id;
  p->epoch_.store(0);
  p->state_.replicas = {node_id};
  p->state_.isr = {isr_member{node_id, offset(0)}};  // log_end filled in by replicas()
  p->clk_ = &clk;
  p->min_insync_.store(p->cfg_.min_insync_replicas);
  const offset end = p->log_->log_end_offset();
  if (sole_replica) {
    p->tracker_.become_leader(node_id, {node_id}, {node_id}, end, end, clk.monotonic_ms());
  } else {
    // Until the store's state arrives this replica neither leads nor
    // calls anything committed (apply_state decides).
    p->leader_.store(false);
    p->state_.role = replica_role::follower;
    // Not through the tracker: with no follower to wait for it would take
    // the log end as committed. apply_state starts it when this replica
    // leads.
    const offset start = p->log_->log_start_offset();
    p->hw_.store((checkpointed_hw ? std::clamp(*checkpointed_hw, start, end) : start).value());
  }
  if (sole_replica) p->hw_.store(p->tracker_.high_watermark().value());
  p->list_snapshots();
  // A snapshot past the log end recovery found describes offsets a crash
  // took (a seal writes it after appends that followed the roll, and it
  // is synced where they were not): it goes before the log grows past its
  // offset again with other batches, as a truncation removes those past
  // its cut (rebuild_producers).
  p->remove_snapshots(p->prune_snapshots_locked(p->log_->log_start_offset(), end));
  p->legacy_snapshot_ = fs.exists(p->snapshot_path_);
  {
    auto idx = storage::aborted_index::open(fs, p->log_->dir() + "/" + storage::aborted_index::file_name);
    if (!idx.ok()) return error{idx.code(), p->tp_.topic + "-" + std::to_string(p->tp_.partition) +
                                                ": aborted transaction index: " + idx.err().message};
    p->aborted_ = std::move(idx).value();
    if (p->aborted_->cut_entries() > 0)
      SLUICE_LOG_WARN("{}-{}: cut {} torn aborted-transaction index entries; the log replay restores them",
                      p->tp_.topic, p->tp_.partition, p->aborted_->cut_entries());
    // Entries of markers the log no longer holds (a crash cut its tail).
    SLUICE_TRY(p->aborted_->truncate_from(end));
  }
  SLUICE_TRY(p->load_producers());
  // A roll's producer snapshot is written where the roll is sealed.
  p->log_->set_seal_hook([w = std::weak_ptr<partition>(p)] {
    auto self = w.lock();
    if (!self || self->closed_.load()) return;
    if (auto s = self->snapshot_producers(); !s.ok())
      SLUICE_LOG_WARN("{}-{}: producer state snapshot failed: {}", self->tp_.topic, self->tp_.partition,
                      s.err().message);
  });
  return p;
}

status partition::load_producers() {
  offset from = log_->log_start_offset();
  const offset end_now = log_->log_end_offset();
  // The newest snapshot in range that loads; then, with none in the log
  // directory, the single one earlier versions kept under meta/.
  std::vector<std::string> candidates;
  for (auto it = snapshots_.rbegin(); it != snapshots_.rend(); ++it)
    if (*it >= from && *it <= end_now) candidates.push_back(snapshot_file(*it));
  if (snapshots_.empty() && legacy_snapshot_) candidates.push_back(snapshot_path_);
  for (const auto& path : candidates) {
    auto l = producer_state::load_snapshot(fs_, path);
    if (!l.ok()) {
      SLUICE_LOG_WARN("{}-{}: ignoring producer state snapshot {}: {}", tp_.topic, tp_.partition, path,
                      l.err().message);
      continue;
    }
    if (l->next_offset < log_->log_start_offset() || l->next_offset > end_now) continue;
    producers_ = std::move(l->state);
    from = l->next_offset;
    snapshot_offset_ = l->next_offset;
    break;
  }
  producers_loaded_from_ = from;
  // Replay the batch headers from `from` to the log end.
  const offset end = log_->log_end_offset();
  while (from < end) {
    SLUICE_ASSIGN_OR_RETURN(auto bytes, log_->read_bytes(from, limits::producer_state_replay_read_bytes));
    if (bytes.empty()) break;
    // read_bytes starts at the batch containing `from`: skip batches whose
    // offsets were already applied from the snapshot.
    size_t pos = 0;
    offset next = from;
    while (pos + batch::header_bytes <= bytes.size()) {
      auto h = batch::parse(bytes.data() + pos);
      SLUICE_TRY(batch::check(h, bytes.size() - pos, batch::strictness::stored));
      if (h.last_offset() >= from) {
        SLUICE_ASSIGN_OR_RETURN(auto ended, producers_.apply_stored(h, std::span<const std::byte>(bytes).subspan(pos)));
        if (ended) SLUICE_TRY(note_ended_locked(*ended));
      }
      next = h.last_offset() + 1;
      pos += h.size_bytes();
    }
    if (next <= from) break;
    from = next;
  }
  publish_open_txns_locked();
  return {};
}

// Kafka's order (its Log.analyzeAndValidateRecords, then LogValidator): the
// size limits first, then the header, the CRC, and every record. Each
// failure stores nothing and names the partition's error.
produce_outcome partition::append(std::span<std::byte> bytes, int64_t now_ms, bool wake_readers, bool zstd_allowed,
                                  verification_guard guard, append_origin origin) {
  produce_outcome out;
  auto fail = [&](errc e, std::string msg) {
    out.error = e;
    out.message = std::move(msg);
    return out;
  };
  if (!is_leader()) {
    return fail(errc::not_leader, "this broker does not lead " + tp_.topic + "-" + std::to_string(tp_.partition));
  }
  const config::topic_config cfg = config();
  if (static_cast<int64_t>(bytes.size()) > cfg.max_message_bytes) {
    return fail(errc::message_too_large,
                "batch of " + std::to_string(bytes.size()) + " bytes is larger than max.message.bytes " +
                    std::to_string(cfg.max_message_bytes));
  }
  if (static_cast<int64_t>(bytes.size()) > cfg.segment_bytes) {
    return fail(errc::record_list_too_large,
                "batch of " + std::to_string(bytes.size()) + " bytes is larger than segment.bytes " +
                    std::to_string(cfg.segment_bytes));
  }
  if (bytes.size() < batch::header_bytes) {
    return fail(errc::corrupt_data, "record set shorter than a batch header");
  }
  batch::header h = batch::parse(bytes.data());
  if (auto s = batch::check(h, bytes.size(), batch::strictness::leader); !s.ok()) {
    return fail(s.code(), s.err().message);
  }
  if (h.size_bytes() != bytes.size()) {
    return fail(errc::invalid_record, "a produce request must hold exactly one record batch per partition");
  }
  const auto pb = producer_batch::from_header(h);
  if (h.is_control()) {
    return fail(errc::invalid_record, "producers may not send control batches");
  }
  if (!zstd_allowed && h.codec_id() == static_cast<int>(model::compression::zstd)) {
    return fail(errc::unsupported_compression, "zstd needs Produce v7 or later");
  }
  // The CRC is checked before anything else looks at the batch.
  if (auto s = batch::check_crc(h, bytes); !s.ok()) {
    return fail(errc::corrupt_data, s.err().message);
  }
  const std::span<const uint8_t> u8(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  protocol::records::validation_options vo;
  vo.max_decompressed_bytes = static_cast<size_t>(cfg.max_message_bytes);
  // Kafka's LogValidator: compaction keeps the newest record per key, so a
  // record without a key has no place in a compacted topic.
  vo.require_keys = cfg.cleanup_compact;
  auto facts = protocol::records::validate_records(u8, vo, &protocol::records::produce_decompression_budget());
  if (!facts.ok()) return fail(facts.code(), facts.err().message);
  // The header's max timestamp is what the time index and retention trust,
  // so the broker writes it as Kafka does: the broker's time for
  // LogAppendTime (with the attribute bit), else the largest record
  // timestamp, whatever the client put there (some write -1). Both fields
  // are inside the CRC, so it is computed again, for this batch only, when
  // either changed; a batch that already says the truth keeps its bytes.
  batch::header stored = h;
  stored.max_timestamp = facts->max_timestamp;
  if (cfg.message_timestamp_type == config::timestamp_type::log_append_time) {
    stored.attributes = static_cast<int16_t>(stored.attributes | model::attr::log_append_time);
    stored.max_timestamp = now_ms;
    out.log_append_time_ms = now_ms;
  }
  if (stored.attributes != h.attributes || stored.max_timestamp != h.max_timestamp) {
    batch::write(bytes.data(), stored);
    batch::update_crc(bytes);
  }

  std::vector<storage::durable_callback> covered;
  bool hw_moved = false;
  {
    std::lock_guard g(append_mu_);
    // Again under the lock apply_state takes: a batch is stamped with the
    // epoch of a leadership this broker still holds.
    if (!is_leader()) {
      return fail(errc::not_leader, "this broker no longer leads " + tp_.topic + "-" + std::to_string(tp_.partition));
    }
    auto verdict = producers_.check(pb, origin);
    if (verdict.error != errc::ok) return fail(verdict.error, verdict.message);
    if (verdict.duplicate_base) {
      out.base = *verdict.duplicate_base;
      out.last = *verdict.duplicate_last;
      out.duplicate = true;
      return out;
    }
    // A coordinator's batch is checked only when it brings a guard (the
    // group coordinator's TxnOffsetCommit verified with the producer's
    // transaction coordinator).
    if (pb.transactional && (origin != append_origin::coordinator || guard.id != 0) &&
        !producers_.in_transaction(pb.producer_id, pb.producer_epoch)) {
      // This batch would begin the producer's transaction here: only with
      // the coordinator's word, given for a guard still current.
      auto it = verifications_.find(pb.producer_id);
      if (guard.id != 0 && guard.generation != guard_generation_) {
        return fail(errc::not_leader, "the leadership of " + tp_.topic + "-" + std::to_string(tp_.partition) +
                                          " changed while the coordinator was asked");
      }
      if (guard.id == 0 || it == verifications_.end() || it->second != guard.id) {
        return fail(errc::invalid_txn_state,
                    guard.id == 0 ? "a transactional batch needs its transactional id and the coordinator's word that "
                                    "the partition is in the producer's transaction"
                                  : "the producer's transaction ended here while the coordinator was asked");
      }
    }
    // Checked above (the CRC recomputed with the max timestamp, if it
    // changed): the log takes the header as it is.
    auto r = log_->append_checked(bytes, std::span<batch::header>(&stored, 1), epoch());
    if (!r.ok()) return fail(r.code(), r.err().message);
    producers_.record(pb, r->base, r->last);
    if (pb.transactional) {
      publish_open_txns_locked();
      verifications_.erase(pb.producer_id);  // open now: in_transaction() answers
    }
    bytes_appended_.fetch_add(bytes.size(), std::memory_order_relaxed);
    out.base = r->base;
    out.last = r->last;
    std::lock_guard s(state_mu_);
    // Alone in the ISR, the leader's end is the high watermark.
    if (tracker_.on_leader_end(log_->log_end_offset())) {
      covered = publish_high_watermark_locked();
      hw_moved = true;
    }
  }
  answer(std::move(covered), {});
  out.hw_moved = hw_moved;
  // Followers have more to fetch; consumers only when the append moved
  // the high watermark (the leader alone in the ISR).
  if (wake_readers) wake_listeners(hw_moved, true);
  return out;
}

produce_outcome partition::append_marker(int64_t producer_id, int16_t producer_epoch, bool commit,
                                         int32_t coordinator_epoch, int64_t now_ms) {
  produce_outcome out;
  auto fail = [&](errc e, std::string msg) {
    out.error = e;
    out.message = tp_.topic + "-" + std::to_string(tp_.partition) + ": " + std::move(msg);
    return out;
  };
  auto built = protocol::records::build_marker_batch(producer_id, producer_epoch, {commit, coordinator_epoch}, now_ms);
  std::span<std::byte> bytes(reinterpret_cast<std::byte*>(built.data()), built.size());
  batch::header h = batch::parse(bytes.data());
  std::vector<storage::durable_callback> covered;
  bool hw_moved = false;
  {
    std::lock_guard g(append_mu_);
    if (!is_leader()) return fail(errc::not_leader, "this broker does not lead the partition");
    auto verdict = producers_.check_marker(producer_id, producer_epoch, coordinator_epoch);
    if (verdict.error != errc::ok) return fail(verdict.error, verdict.message);
    auto r = log_->append_checked(bytes, std::span<batch::header>(&h, 1), epoch());
    if (!r.ok()) return fail(r.code(), r.err().message);
    const completed_txn ended =
        producers_.record_marker(producer_id, producer_epoch, coordinator_epoch, commit, r->base, now_ms);
    // A verification begun before this marker confirmed the transaction
    // it ended.
    verifications_.erase(producer_id);
    out.base = r->base;
    out.last = r->last;
    if (auto s = note_ended_locked(ended); !s.ok()) return fail(s.code(), s.err().message);
    bytes_appended_.fetch_add(bytes.size(), std::memory_order_relaxed);
    std::lock_guard st(state_mu_);
    if (tracker_.on_leader_end(log_->log_end_offset())) {
      covered = publish_high_watermark_locked();
      hw_moved = true;
    }
  }
  answer(std::move(covered), {});
  out.hw_moved = hw_moved;
  wake_listeners(hw_moved, true);
  return out;
}

result<std::optional<verification_guard>> partition::begin_verification(int64_t producer_id,
                                                                       int16_t producer_epoch) {
  std::lock_guard g(append_mu_);
  if (producers_.in_transaction(producer_id, producer_epoch)) return std::optional<verification_guard>();
  auto it = verifications_.find(producer_id);
  if (it == verifications_.end()) {
    if (verifications_.size() >= limits::max_verifications_per_partition) {
      return error{errc::not_enough_replicas, "too many producers' transactions being verified on " + tp_.topic + "-" +
                                                  std::to_string(tp_.partition)};
    }
    it = verifications_.emplace(producer_id, next_guard_++).first;
  }
  return std::optional<verification_guard>(verification_guard{it->second, guard_generation_});
}

void partition::end_verification(int64_t producer_id, verification_guard guard) {
  std::lock_guard g(append_mu_);
  if (auto it = verifications_.find(producer_id); it != verifications_.end() && it->second == guard.id)
    verifications_.erase(it);
}

status partition::note_ended_locked(const completed_txn& t) {
  offset last_stable = t.last + 1;
  {
    std::lock_guard g(state_mu_);
    const offset hw = high_watermark();
    if (auto open = producers_.first_open_txn()) last_stable = std::min(last_stable, *open);
    // Those the high watermark passed are stable for good; pruned here too,
    // not only by the reads, or a partition nobody fetches from (a single
    // broker, transactions produced and not yet consumed) keeps one per
    // marker, and every marker scans them all.
    std::erase_if(unreplicated_txns_, [&](const completed_txn& x) { return x.last < hw; });
    if (auto u = first_unreplicated_locked(hw)) last_stable = std::min(last_stable, *u);
    if (t.last >= hw) unreplicated_txns_.push_back(t);
    has_unreplicated_.store(!unreplicated_txns_.empty(), std::memory_order_release);
    publish_open_txns_locked();
  }
  if (!t.aborted) return {};
  // Replay after a restart meets markers the index already holds.
  if (auto last = aborted_->last_marker(); last && t.last <= *last) return {};
  return aborted_->append({t.producer_id, t.first, t.last, last_stable});
}

void partition::publish_open_txns_locked() {
  const auto first = producers_.first_open_txn();
  open_txn_first_.store(first ? first->value() : -1, std::memory_order_release);
}

std::optional<offset> partition::first_unreplicated_locked(offset hw) const {
  std::optional<offset> out;
  for (const auto& t : unreplicated_txns_)
    if (t.last >= hw && (!out || t.first < *out)) out = t.first;
  return out;
}

offset partition::last_stable_offset() const {
  // No transaction here open or awaiting its marker's commit (the common
  // case): the high watermark. Both flags are set under state_mu_ before the
  // offsets they cover become readable.
  if (open_txn_first_.load(std::memory_order_acquire) < 0 && !has_unreplicated_.load(std::memory_order_acquire))
    return high_watermark();
  std::lock_guard g(state_mu_);
  const offset hw = high_watermark();
  offset lso = hw;
  if (const int64_t open = open_txn_first_.load(std::memory_order_acquire); open >= 0)
    lso = std::min(lso, offset(open));
  if (auto u = first_unreplicated_locked(hw)) lso = std::min(lso, *u);
  // Those the high watermark passed are stable for good.
  std::erase_if(unreplicated_txns_, [&](const completed_txn& t) { return t.last < hw; });
  has_unreplicated_.store(!unreplicated_txns_.empty(), std::memory_order_release);
  return lso;
}

result<partition::aborted_answer> partition::aborted_transactions(offset from, offset upper) const {
  aborted_answer a;
  a.read_upper = upper;
  SLUICE_ASSIGN_OR_RETURN(a.txns, aborted_->collect(from, upper, limits::max_aborted_txns_per_fetch));
  if (a.txns.size() == limits::max_aborted_txns_per_fetch) {
    // Every abort the answer leaves out began at or after the last named
    // one's last stable offset: reading stops there.
    const offset cap = a.txns.back().last_stable;
    if (cap > from && cap < upper) a.read_upper = cap;
  }
  std::sort(a.txns.begin(), a.txns.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  return a;
}

size_t partition::open_transactions() {
  std::lock_guard g(append_mu_);
  return producers_.open_txn_count();
}

size_t partition::unstable_ended_transactions() const {
  std::lock_guard g(state_mu_);
  return unreplicated_txns_.size();
}

void partition::on_durable(offset last, storage::durable_callback cb) { log_->on_durable(last, std::move(cb)); }

uint64_t partition::add_listener(std::function<void()> fn, wake_on on) {
  std::lock_guard g(listeners_mu_);
  uint64_t t = next_token_++;
  (on == wake_on::append ? append_listeners_ : listeners_).emplace_back(t, std::move(fn));
  return t;
}

void partition::remove_listener(uint64_t token) {
  std::lock_guard g(listeners_mu_);
  std::erase_if(listeners_, [&](const auto& l) { return l.first == token; });
  std::erase_if(append_listeners_, [&](const auto& l) { return l.first == token; });
}

void partition::wake_listeners(bool hw_moved, bool appended) {
  std::vector<std::pair<uint64_t, std::function<void()>>> fire;
  {
    std::lock_guard g(listeners_mu_);
    if (hw_moved) fire.swap(listeners_);
    if (appended) {
      for (auto& l : append_listeners_) fire.push_back(std::move(l));
      append_listeners_.clear();
    }
  }
  for (auto& [_, fn] : fire) fn();
}

config::topic_config partition::config() const {
  std::lock_guard g(cfg_mu_);
  return cfg_;
}

status partition::set_config(const config::topic_config& cfg) {
  SLUICE_TRY(log_->set_config(to_log_config(cfg)));
  std::lock_guard g(cfg_mu_);
  cfg_ = cfg;
  min_insync_.store(cfg.min_insync_replicas, std::memory_order_relaxed);
  return {};
}

std::vector<producer_info> partition::producers() {
  std::lock_guard g(append_mu_);
  return producers_.producers();
}

uint64_t partition::size_bytes() const {
  uint64_t total = 0;
  for (const auto& s : log_->segments()) total += s.size_bytes;
  return total;
}

std::vector<offset> partition::producer_last_batch_bases() {
  std::lock_guard g(append_mu_);
  return producers_.last_batch_bases();
}

status partition::snapshot_producers() {
  std::lock_guard sg(snapshot_mu_);
  offset end;
  std::vector<std::byte> bytes;
  {
    std::lock_guard g(append_mu_);
    producers_.expire(INT64_MIN, limits::max_producers_per_partition);
    end = log_->log_end_offset();
    bytes = producers_.encode_snapshot(end);
  }
  // The aborts below the snapshot are never replayed again: durable first.
  SLUICE_TRY(aborted_->sync());
  SLUICE_TRY(fs_.write_atomic(snapshot_file(end), bytes));
  if (auto d = aborted_->drop_below(log_->log_start_offset()); !d.ok())
    SLUICE_LOG_WARN("{}-{}: trimming the aborted-transaction index: {}", tp_.topic, tp_.partition, d.err().message);
  std::vector<offset> gone;
  bool legacy = false;
  {
    std::lock_guard g(append_mu_);
    snapshot_offset_ = end;
    // Truncations wait for snapshot_mu_: nothing newer is listed.
    if (snapshots_.empty() || snapshots_.back() < end) snapshots_.push_back(end);
    gone = prune_snapshots_locked(log_->log_start_offset(), log_->log_end_offset());
    std::swap(legacy, legacy_snapshot_);
  }
  // Old ones (below the log start, past the limit) go without append_mu_,
  // which appends take; so does the one earlier versions kept.
  remove_snapshots(gone);
  if (legacy) fs_.remove(snapshot_path_).ignore();
  return {};
}

status partition::snapshot_producers_if_changed() {
  {
    std::lock_guard g(append_mu_);
    const offset end = log_->log_end_offset();
    if (snapshot_offset_ == end) return {};
    if (producers_.producer_count() == 0 && end == log_->log_start_offset() && snapshots_.empty() &&
        !legacy_snapshot_)
      return {};
  }
  return snapshot_producers();
}

void partition::close() {
  closed_.store(true);
  std::vector<storage::durable_callback> orphans;
  {
    std::lock_guard g(state_mu_);
    orphans = take_commit_waiters_locked();
  }
  answer(std::move(orphans), status(errc::not_leader, tp_.topic + "-" + std::to_string(tp_.partition) + " was closed"));
  wake_listeners();
}

std::vector<storage::epoch_entry> partition::leader_epochs() const { return log_->leader_epochs(); }

std::optional<storage::epoch_entry> partition::end_offset_for_epoch(leader_epoch e) const {
  return log_->end_offset_for_epoch(e);
}

}  // namespace sluice::cluster
