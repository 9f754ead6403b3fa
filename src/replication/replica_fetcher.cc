#include "replication/replica_fetcher.h"

#include <algorithm>
#include <chrono>

#include "base/assert.h"
#include "base/limits.h"
#include "base/log.h"
#include "base/thread_name.h"
#include "model/record_batch.h"
#include "partition/truncation.h"
#include "protocol/error_code.h"

namespace sluice::cluster {

namespace {

// Versions a follower sends: every Sluice broker serves them. Fetch v15
// names topics by id (the answer is matched back to the names the follower
// knows its partitions by) and carries the follower's broker epoch beside
// its replica id (KIP-903), which the leader checks before it counts the
// fetch; OffsetForLeaderEpoch v4 carries the replica id and the current
// leader epoch.
constexpr int16_t fetch_version = 15;
constexpr int16_t offset_for_leader_epoch_version = 4;

using kafka::error_code;

error_code code_of(int16_t wire) { return static_cast<error_code>(wire); }

// The refusals that mean: the metadata this broker follows is behind or
// ahead of the leader's; wait for it to catch up.
bool leadership_error(error_code e) {
  return e == error_code::not_leader_or_follower || e == error_code::fenced_leader_epoch ||
         e == error_code::unknown_leader_epoch || e == error_code::unknown_topic_or_partition ||
         e == error_code::leader_not_available;
}

// A new partition entry of a request's topic list (OffsetForLeaderEpoch or
// Fetch), under the topic `k` names (entries come in key order, so a topic's
// partitions are together), with its partition index and the leader epoch
// this follower knows.
template <class Request>
auto& add_partition(Request& req, const std::pair<std::string, int32_t>& k, int32_t epoch) {
  if (req.topics.empty() || req.topics.back().topic != k.first) req.topics.emplace_back().topic = k.first;
  auto& p = req.topics.back().partitions.emplace_back();
  p.partition = k.second;
  p.current_leader_epoch = epoch;
  return p;
}

// Waits until each partition is durable to the offset beside it, sharing
// the flusher's group commits. A partition whose sync failed is answered
// too, with its log offline: callers look at durable_offset() afterwards.
void wait_durable(const std::vector<std::pair<std::shared_ptr<partition>, offset>>& parts) {
  if (parts.empty()) return;
  std::mutex m;
  std::condition_variable cv;
  size_t left = parts.size();
  // Registered before waiting: a callback may run at once on this thread.
  for (const auto& [part, last] : parts)
    part->on_durable(last, [&, p = part.get()](const status& s) {
      if (!s.ok())
        SLUICE_LOG_WARN("{}-{}: replicated batches not durable: {}", p->id().topic, p->id().partition,
                        s.err().message);
      std::lock_guard g(m);
      if (--left == 0) cv.notify_all();
    });
  std::unique_lock g(m);
  cv.wait(g, [&] { return left == 0; });
}

}  // namespace

replica_fetcher::replica_fetcher(fetcher_options opts, link_factory links, const sluice::clock& clk,
                                 bool own_thread)
    : opts_(opts), links_(std::move(links)), clk_(clk), own_thread_(own_thread) {
  if (!own_thread_) return;
  thread_ = std::thread([this] {
    set_thread_name("fetch-from-" + std::to_string(opts_.source));
    run();
  });
}

replica_fetcher::~replica_fetcher() {
  {
    std::lock_guard g(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  // A fetch in flight ends within replica.fetch.wait.max.ms (the socket
  // timeout when the leader hangs).
  if (thread_.joinable()) thread_.join();
}

void replica_fetcher::add(const std::shared_ptr<partition>& p) {
  const key k{p->id().topic, p->id().partition};
  const int32_t epoch = p->epoch().value();
  {
    std::lock_guard g(mu_);
    auto it = parts_.find(k);
    // A partition's leader epoch only grows (partition::apply_state).
    SLUICE_ASSERT(it == parts_.end() || it->second.part != p || epoch >= it->second.epoch,
                  "a partition was followed again at an older leader epoch");
    if (it != parts_.end() && it->second.part == p && it->second.epoch == epoch) return;
    parts_[k] = entry{p, epoch, phase::truncating, 0};
    ++changes_;
  }
  cv_.notify_all();
}

void replica_fetcher::remove(const std::shared_ptr<partition>& p) {
  std::lock_guard g(mu_);
  auto it = parts_.find({p->id().topic, p->id().partition});
  if (it != parts_.end() && it->second.part == p) parts_.erase(it);
  ++changes_;
}

size_t replica_fetcher::size() const {
  std::lock_guard g(mu_);
  return parts_.size();
}

void replica_fetcher::update(const key& k, int32_t epoch, std::optional<phase> ph, int64_t retry_at_ms) {
  std::lock_guard g(mu_);
  update_locked(k, epoch, ph, retry_at_ms);
}

void replica_fetcher::update_locked(const key& k, int32_t epoch, std::optional<phase> ph, int64_t retry_at_ms) {
  auto it = parts_.find(k);
  if (it == parts_.end() || it->second.epoch != epoch) return;  // re-added meanwhile: its own phase
  if (ph) it->second.ph = *ph;
  it->second.retry_at_ms = retry_at_ms;
}

bool replica_fetcher::current_locked(const key& k, const entry& e, phase ph) const {
  auto it = parts_.find(k);
  return it != parts_.end() && it->second.part == e.part && it->second.epoch == e.epoch && it->second.ph == ph;
}

void replica_fetcher::drop(const key& k, int32_t epoch) {
  std::lock_guard g(mu_);
  auto it = parts_.find(k);
  if (it != parts_.end() && it->second.epoch == epoch) parts_.erase(it);
}

void replica_fetcher::lost_connection(const std::string& why) {
  SLUICE_LOG_WARN("replica fetcher from broker {}: {}", opts_.source, why);
  link_.reset();
}

bool replica_fetcher::connect() {
  if (link_) return true;
  auto l = links_(opts_.source);
  if (!l.ok()) {
    SLUICE_LOG_DEBUG("replica fetcher from broker {}: {}", opts_.source, l.err().message);
    return false;
  }
  link_ = std::move(l).value();
  return true;
}

void replica_fetcher::run() {
  for (;;) {
    uint64_t seen;
    {
      std::lock_guard g(mu_);
      if (stopping_) return;
      seen = changes_;
    }
    const round_outcome o = round();
    if (o.worked) continue;
    std::unique_lock g(mu_);
    // Nothing to do (or no link) until a partition is added or removed, a
    // backoff ends, or the link's backoff passes.
    const int64_t wait = o.link_down ? opts_.backoff_ms
                         : o.next_retry_ms == INT64_MAX ? clk_.max_sleep_ms()
                                                        : clk_.sleep_ms_until(o.next_retry_ms);
    cv_.wait_for(g, std::chrono::milliseconds(std::max<int64_t>(wait, 1)),
                 [&] { return stopping_ || (!o.link_down && changes_ != seen); });
  }
}

replica_fetcher::round_outcome replica_fetcher::run_round() {
  SLUICE_ASSERT(!own_thread_, "run_round on a fetcher with its own thread");
  return round();
}

replica_fetcher::round_outcome replica_fetcher::round() {
  round_outcome out;
  std::vector<std::pair<key, entry>> truncating, fetching;
  {
    std::lock_guard g(mu_);
    const int64_t now = clk_.monotonic_ms();
    for (const auto& [k, e] : parts_) {
      if (e.part->closed()) continue;
      if (e.retry_at_ms > now) {
        out.next_retry_ms = std::min(out.next_retry_ms, e.retry_at_ms);
        continue;
      }
      (e.ph == phase::truncating ? truncating : fetching).emplace_back(k, e);
    }
  }
  if (truncating.empty() && fetching.empty()) return out;
  if (!connect()) {
    out.link_down = true;
    return out;
  }
  if (!truncating.empty()) truncate_round(truncating);
  if (!fetching.empty() && link_) fetch_round(fetching);
  out.worked = link_ != nullptr;
  out.link_down = !link_;
  return out;
}

void replica_fetcher::truncate_round(std::vector<std::pair<key, entry>>& work) {
  protocol::offset_for_leader_epoch_request req;
  req.replica_id = opts_.node_id;
  std::map<key, const entry*> asked;
  for (auto& [k, e] : work) {
    const auto epochs = e.part->leader_epochs();
    const auto ask = epoch_to_ask(epochs);
    if (!ask) {
      // No history to compare: keep what the leader has committed.
      const auto step = decide_truncation(epochs, e.part->log_end_offset(), e.part->high_watermark(), epoch_end{});
      apply_cut({k, e, cut::kind::truncate, step.truncate_to, phase::fetching});
      continue;
    }
    add_partition(req, k, e.epoch).leader_epoch = *ask;
    asked[k] = &e;
  }
  if (asked.empty()) return;
  auto resp = link_->offset_for_leader_epoch(req, offset_for_leader_epoch_version);
  if (!resp.ok()) return lost_connection("OffsetForLeaderEpoch: " + resp.err().message);
  const int64_t retry_at = clk_.monotonic_ms() + opts_.backoff_ms;
  // As in fetch_round: an answer about a partition removed or re-added
  // since the request left truncates nothing. The cuts run after mu_ is
  // released (a truncation rebuilds the producer state: no add or remove
  // waits for it); each holds only at the epoch it was decided at.
  std::vector<cut> cuts;
  std::unique_lock held(mu_);
  for (const auto& t : resp->topics) {
    for (const auto& p : t.partitions) {
      auto it = asked.find({t.topic, p.partition});
      if (it == asked.end()) continue;
      const key& k = it->first;
      const entry& e = *it->second;
      if (!current_locked(k, e, phase::truncating)) continue;
      const error_code err = code_of(p.error_code);
      if (err != error_code::none) {
        if (!leadership_error(err))
          SLUICE_LOG_WARN("{}-{}: OffsetForLeaderEpoch at broker {}: error {}", k.first, k.second, opts_.source,
                          p.error_code);
        update_locked(k, e.epoch, std::nullopt, retry_at);
        continue;
      }
      const offset end = e.part->log_end_offset();
      const auto step =
          decide_truncation(e.part->leader_epochs(), end, e.part->high_watermark(), {p.leader_epoch, p.end_offset});
      if (step.truncate_to < end) {
        SLUICE_LOG_INFO("{}-{}: truncating from {} to {} to match leader {} (epoch {} ends at {})", k.first,
                        k.second, end.value(), step.truncate_to.value(), opts_.source, p.leader_epoch,
                        p.end_offset);
      }
      cuts.push_back({k, e, cut::kind::truncate, step.truncate_to,
                      step.complete ? std::optional<phase>(phase::fetching) : std::nullopt});
    }
  }
  held.unlock();
  for (const auto& c : cuts) apply_cut(c);
}

void replica_fetcher::apply_cut(const cut& c) {
  const auto& [k, e, kind, to, next] = c;
  const leader_epoch at(e.epoch);
  const offset end = e.part->log_end_offset();
  if (kind == cut::kind::truncate && to >= end) {
    if (next) update(k, e.epoch, next, 0);
    return;
  }
  status s = kind == cut::kind::truncate ? e.part->truncate_to(to, at) : e.part->reset_to(to, at);
  if (!s.ok()) {
    if (s.code() == errc::fenced_leader_epoch || e.part->is_leader()) return;  // a new leadership: its own entry follows
    SLUICE_LOG_ERROR("{}-{}: {} to {} failed: {}", k.first, k.second,
                     kind == cut::kind::truncate ? "truncation" : "reset", to.value(), s.err().message);
    drop(k, e.epoch);
    return;
  }
  if (next) update(k, e.epoch, next, 0);
}

void replica_fetcher::sync_before_fetch(std::vector<std::pair<key, entry>>& work) {
  std::vector<std::pair<key, entry>*> behind;
  std::vector<std::pair<std::shared_ptr<partition>, offset>> to_sync;
  for (auto& w : work) {
    const offset end = w.second.part->log_end_offset();
    if (w.second.part->durable_offset() >= end) continue;
    behind.push_back(&w);
    to_sync.emplace_back(w.second.part, end - 1);
  }
  if (behind.empty()) return;  // the usual case: the last round waited already
  wait_durable(to_sync);
  std::vector<key> failed;
  for (auto* w : behind) {
    const offset durable = w->second.part->durable_offset(), end = w->second.part->log_end_offset();
    if (durable >= end) continue;
    // A fetch from its end would claim bytes not on disk.
    SLUICE_LOG_ERROR("{}-{}: not durable beyond {} (log end {}); no longer fetching it", w->first.first,
                     w->first.second, durable.value(), end.value());
    drop(w->first, w->second.epoch);
    failed.push_back(w->first);
  }
  std::erase_if(work, [&](const auto& w) { return std::find(failed.begin(), failed.end(), w.first) != failed.end(); });
}

void replica_fetcher::fetch_round(std::vector<std::pair<key, entry>>& work) {
  const int64_t broker_epoch = opts_.broker_epoch ? opts_.broker_epoch() : -1;
  if (opts_.broker_epoch && broker_epoch < 0) {
    // This broker's registration is not in its image yet (just started, or
    // registering anew): a fetch now would be refused as stale and wait out
    // the backoff, which a restarted broker of 20,000 partitions paid before
    // its first fetch counted. Nothing is sent until the epoch is known.
    const int64_t retry_at = clk_.monotonic_ms() + limits::replica_fetch_epoch_poll_ms;
    std::lock_guard g(mu_);
    for (auto& [k, e] : work) update_locked(k, e.epoch, std::nullopt, retry_at);
    return;
  }
  sync_before_fetch(work);
  // The round's truncation exchange may have taken long: only entries still
  // current are fetched (Kafka builds each fetch from its partition map).
  {
    std::lock_guard g(mu_);
    std::erase_if(work, [&](const auto& w) { return !current_locked(w.first, w.second, phase::fetching); });
  }
  if (work.empty()) return;
  protocol::fetch_request req;
  req.replica_id = opts_.node_id;  // before v15
  req.replica_state.replica_id = opts_.node_id;
  req.replica_state.replica_epoch = broker_epoch;
  req.max_wait_ms = opts_.wait_max_ms;
  req.min_bytes = opts_.min_bytes;
  req.max_bytes = opts_.response_max_bytes;
  req.isolation_level = 0;
  req.session_id = 0;
  req.session_epoch = -1;  // sessionless: every fetch names its partitions
  // Each partition asked, with the log end offset its fetch was sent from.
  std::map<key, std::pair<const entry*, offset>> asked;
  std::map<sluice::topic_id, std::string> names;  // the answer names topics by id
  for (auto& [k, e] : work) {
    const offset from = e.part->log_end_offset();
    const int32_t last_epoch = e.part->last_written_epoch();
    // A fetch offset says: all below it was copied from leaders, up to the
    // epoch fetched at. A partition that started leading (apply_state moves
    // its epoch before it takes a leader's append) may hold its own batches
    // there: it is not fetched. Checked after the reads, so they saw no
    // leader's batch.
    if (e.part->is_leader() || e.part->epoch().value() != e.epoch) continue;
    auto& p = add_partition(req, k, e.epoch);
    req.topics.back().topic_id = e.part->topic_id();
    names[e.part->topic_id()] = k.first;
    p.fetch_offset = from.value();
    p.last_fetched_epoch = last_epoch;
    p.log_start_offset = e.part->log_start_offset().value();
    p.partition_max_bytes = opts_.partition_max_bytes;
    asked[k] = {&e, from};
  }
  if (asked.empty()) return;
  auto resp = link_->fetch(req, fetch_version);
  if (!resp.ok()) return lost_connection("Fetch: " + resp.err().message);
  const int64_t retry_at = clk_.monotonic_ms() + opts_.backoff_ms;
  if (code_of(resp->error_code) == error_code::stale_broker_epoch) {
    // The leader's metadata does not show this broker's registration as
    // this broker knows it (one of the two images lags a re-registration):
    // nothing counted; ask again after the backoff.
    SLUICE_LOG_INFO("replica fetcher from broker {}: broker epoch {} refused as stale; retrying", opts_.source,
                    req.replica_state.replica_epoch);
    for (auto& [k, e] : work) update(k, e.epoch, std::nullopt, retry_at);
    return;
  }
  if (resp->error_code != 0) {
    SLUICE_LOG_WARN("replica fetcher from broker {}: fetch refused with error {}", opts_.source, resp->error_code);
    lost_connection("fetch refused");
    return;
  }
  struct appended {
    std::shared_ptr<partition> part;
    offset last;  // -1: nothing appended
    offset leader_hw, leader_start;
  };
  std::vector<appended> wrote;
  // The answer is applied under mu_, the lock remove() and add() take: a
  // partition moved to another fetcher or re-added at another epoch while
  // this fetch was out is skipped, never appended to (Kafka's fetcher
  // holds its partition-map lock the same way while it processes an
  // answer). partition::append_replicated checks the epoch and the log end
  // once more under the partition's own lock, against apply_state and
  // truncation. Truncations wait until mu_ is released (apply_cut).
  std::vector<cut> cuts;
  std::vector<model::batch::header> headers;  // of one partition's answer at a time
  std::unique_lock held(mu_);
  for (const auto& t : resp->responses) {
    const auto name = names.find(t.topic_id);
    if (name == names.end()) continue;
    for (const auto& p : t.partitions) {
      auto it = asked.find({name->second, p.partition_index});
      if (it == asked.end()) continue;
      const key& k = it->first;
      const entry& e = *it->second.first;
      const offset sent_from = it->second.second;
      if (!current_locked(k, e, phase::fetching)) continue;  // removed, or following anew since the fetch left
      const error_code err = code_of(p.error_code);
      if (err == error_code::offset_out_of_range) {
        const offset end = e.part->log_end_offset();
        if (p.log_start_offset >= 0 && end < offset(p.log_start_offset)) {
          // The leader no longer has what follows this replica's end.
          SLUICE_LOG_INFO("{}-{}: leader {} starts at {}, past this replica's end {}: starting over there",
                          k.first, k.second, opts_.source, p.log_start_offset, end.value());
          cuts.push_back({k, e, cut::kind::reset, offset(p.log_start_offset), std::nullopt});
        } else {
          // Past the leader's end: this replica's tail diverged.
          update_locked(k, e.epoch, phase::truncating, 0);
        }
        continue;
      }
      if (err != error_code::none) {
        if (!leadership_error(err))
          SLUICE_LOG_WARN("{}-{}: fetch from broker {}: error {}", k.first, k.second, opts_.source, p.error_code);
        update_locked(k, e.epoch, std::nullopt, retry_at);
        continue;
      }
      if (p.diverging_epoch.epoch >= 0 || p.diverging_epoch.end_offset >= 0) {
        // This replica's tail is not the leader's (KIP-320, KIP-595): cut
        // it where the leader's copy of its last epoch ends, as an
        // OffsetForLeaderEpoch answer would say, before fetching again.
        const offset end = e.part->log_end_offset();
        const auto step = decide_truncation(e.part->leader_epochs(), end, e.part->high_watermark(),
                                            {p.diverging_epoch.epoch, p.diverging_epoch.end_offset});
        if (step.truncate_to < end) {
          SLUICE_LOG_INFO("{}-{}: diverged from leader {} (its epoch {} ends at {}): truncating from {} to {}",
                          k.first, k.second, opts_.source, p.diverging_epoch.epoch, p.diverging_epoch.end_offset,
                          end.value(), step.truncate_to.value());
        }
        cuts.push_back({k, e, cut::kind::truncate, step.truncate_to,
                        step.complete ? std::nullopt : std::optional<phase>(phase::truncating)});
        continue;
      }
      // The whole batches at the front (a leader may end an answer with
      // part of a batch, as Kafka's do at their size limit), each header
      // parsed and checked here once and handed down.
      const auto view = std::as_bytes(p.records.view());
      headers.clear();
      const auto whole = model::batch::check_whole_prefix(view, model::batch::strictness::stored, headers);
      if (!whole.ok()) {
        SLUICE_LOG_ERROR("{}-{}: batches from broker {} do not check: {}", k.first, k.second, opts_.source,
                         whole.err().message);
        parts_.erase(k);
        continue;
      }
      const size_t n = *whole;
      if (n == 0) {
        wrote.push_back({e.part, offset(-1), offset(p.high_watermark), offset(p.log_start_offset)});
        continue;
      }
      // The answer's frame belongs to this thread until the next call.
      auto r = e.part->append_replicated(view.first(n), headers, leader_epoch(e.epoch), sent_from);
      if (!r.ok()) {
        if (r.code() == errc::fenced_leader_epoch || e.part->is_leader()) {
          // A new leadership since the fetch left: its own entry follows.
        } else if (r.code() == errc::offset_out_of_range || r.code() == errc::invalid_argument) {
          // Not where this replica's log ends (it changed meanwhile): compare again.
          update_locked(k, e.epoch, phase::truncating, 0);
        } else {
          SLUICE_LOG_ERROR("{}-{}: appending batches from broker {}: {}", k.first, k.second, opts_.source,
                           r.err().message);
          parts_.erase(k);
        }
        continue;
      }
      bytes_in_.fetch_add(n, std::memory_order_relaxed);
      wrote.push_back({e.part, r->last, offset(p.high_watermark), offset(p.log_start_offset)});
    }
  }
  held.unlock();
  for (const auto& c : cuts) apply_cut(c);
  // One group commit over the round: the next fetch's offsets then speak
  // of what is on disk.
  std::vector<std::pair<std::shared_ptr<partition>, offset>> to_sync;
  to_sync.reserve(wrote.size());
  for (const auto& w : wrote)
    if (w.last >= offset(0)) to_sync.emplace_back(w.part, w.last);
  wait_durable(to_sync);
  for (auto& w : wrote) {
    w.part->set_leader_high_watermark(w.leader_hw);
    if (auto s = w.part->follow_log_start(w.leader_start); !s.ok())
      SLUICE_LOG_WARN("{}-{}: following the leader's log start {}: {}", w.part->id().topic, w.part->id().partition,
                      w.leader_start.value(), s.err().message);
  }
}

}  // namespace sluice::cluster
