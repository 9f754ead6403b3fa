#include "maintenance/compaction.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <unordered_set>

#include "base/limits.h"
#include "base/log.h"
#include "metadata/partition_manager.h"
#include "model/record_batch.h"
#include "protocol/records/record_batch.h"
#include "storage/log.h"

namespace sluice::cluster {

namespace records = protocol::records;
namespace batch = model::batch;

namespace {


uint64_t mix(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash64(std::span<const uint8_t> key, uint64_t seed) {
  uint64_t h = seed ^ (key.size() * 0x9e3779b97f4a7c15ull);
  size_t i = 0;
  for (; i + 8 <= key.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, key.data() + i, 8);
    h = mix(h ^ w) + 0x9e3779b97f4a7c15ull;
  }
  uint64_t tail = 0;
  for (size_t j = 0; i + j < key.size(); ++j) tail |= uint64_t{key[i + j]} << (8 * j);
  return mix(h ^ tail ^ 0xff51afd7ed558ccdull);
}

std::span<const uint8_t> as_u8(std::span<const std::byte> b) {
  return {reinterpret_cast<const uint8_t*>(b.data()), b.size()};
}

}  // namespace

// ---- offset_map -------------------------------------------------------------------

offset_map::key_hash offset_map::hash(std::span<const uint8_t> key) {
  return {hash64(key, 0x243f6a8885a308d3ull), hash64(key, 0x13198a2e03707344ull)};
}

offset_map::offset_map(size_t memory_bytes)
    : slots_(std::max<size_t>(memory_bytes / sizeof(slot), 16)),
      max_used_(slots_.size() * 9 / 10) {}

size_t offset_map::find(const key_hash& k) const {
  size_t i = static_cast<size_t>(k.lo % slots_.size());
  while (slots_[i].o >= 0 && !(slots_[i].k == k)) i = (i + 1) % slots_.size();
  return i;
}

bool offset_map::put(const key_hash& k, int64_t o) {
  const size_t i = find(k);
  if (slots_[i].o < 0) {
    if (used_ >= max_used_) return false;
    ++used_;
    slots_[i].k = k;
  }
  slots_[i].o = std::max(slots_[i].o, o);
  return true;
}

std::optional<int64_t> offset_map::get(const key_hash& k) const {
  const size_t i = find(k);
  if (slots_[i].o < 0) return std::nullopt;
  return slots_[i].o;
}

void offset_map::clear() {
  if (used_ == 0) return;
  std::fill(slots_.begin(), slots_.end(), slot{});
  used_ = 0;
}

// ---- one clean ---------------------------------------------------------------------

dirtiness measure_dirtiness(const std::vector<storage::segment_info>& segments, offset first_dirty,
                            offset stable_end, int64_t now_ms, int64_t min_lag_ms, int64_t max_lag_ms) {
  dirtiness d;
  if (segments.empty()) return d;
  d.cleanable_end = segments.back().base;  // never the active segment
  uint64_t total = 0;
  for (size_t i = 0; i + 1 < segments.size(); ++i) {
    const auto& s = segments[i];
    // Nothing at or past the high watermark is committed yet.
    if (s.next > stable_end) {
      d.cleanable_end = s.base;
      break;
    }
    // min.compaction.lag.ms: a segment holding a record younger than that
    // is not cleaned yet, nor anything after it.
    if (min_lag_ms > 0 && s.max_timestamp > now_ms - min_lag_ms) {
      d.cleanable_end = s.base;
      break;
    }
    total += s.size_bytes;
    if (s.next > first_dirty && s.size_bytes > 0) {
      d.dirty_bytes += s.size_bytes;
      // The segment's largest timestamp stands for its records' age, so
      // max.compaction.lag.ms is met late by at most one segment's span.
      if (s.max_timestamp >= 0 && max_lag_ms < INT64_MAX && s.max_timestamp < now_ms - max_lag_ms)
        d.past_max_lag = true;
    }
  }
  d.ratio = total == 0 ? 0 : static_cast<double>(d.dirty_bytes) / static_cast<double>(total);
  return d;
}

namespace {

struct clean_context {
  storage::log& log;
  const config::topic_config& cfg;
  offset_map& map;
  std::unordered_set<int64_t> producer_last;
  int64_t now_ms;
  offset log_start;
  const std::atomic<bool>& stop;
  clean_result& out;
  // Aborted transactions: producer id -> [first, last] ranges.
  std::unordered_map<int64_t, std::vector<std::pair<int64_t, int64_t>>> aborted;

  bool is_aborted(const batch::header& h) const {
    if (!h.is_transactional() || h.is_control()) return false;
    auto it = aborted.find(h.producer_id);
    if (it == aborted.end()) return false;
    for (const auto& [first, last] : it->second)
      if (h.base_offset.value() >= first && h.base_offset.value() <= last) return true;
    return false;
  }
};

// Calls `fn(header, bytes)` for every batch of the closed segment at `base`.
template <typename Fn>
status for_each_batch(storage::log& log, offset base, const std::atomic<bool>& stop, Fn&& fn) {
  uint64_t pos = 0;
  std::vector<std::byte> buf;
  for (;;) {
    if (stop) return status(errc::shutting_down, "cleaner stopping");
    SLUICE_ASSIGN_OR_RETURN(auto r, log.read_segment(base, pos, limits::cleaner_read_chunk_bytes));
    if (r.len == 0) return {};
    buf.resize(r.len);
    SLUICE_ASSIGN_OR_RETURN(size_t got, r.file->pread(buf.data(), r.len, r.pos));
    if (got != r.len) return status(errc::io_error, log.name() + ": short read while cleaning");
    size_t at = 0;
    while (at < buf.size()) {
      if (buf.size() - at < batch::header_bytes)
        return status(errc::corrupt_data, log.name() + ": partial batch");
      const auto h = batch::parse(buf.data() + at);
      SLUICE_TRY(batch::check(h, buf.size() - at, batch::strictness::stored));
      SLUICE_TRY(fn(h, std::span<const std::byte>(buf).subspan(at, h.size_bytes())));
      at += h.size_bytes();
    }
    pos = r.pos + r.len;
  }
}

// Fills the map from the dirty part; returns the end of what fitted.
result<offset> build_map(clean_context& c, const std::vector<storage::segment_info>& segs,
                         offset first_dirty, offset cleanable_end) {
  offset map_end = first_dirty;
  bool full = false;
  for (size_t i = 0; i + 1 < segs.size() && !full; ++i) {
    const auto& s = segs[i];
    if (s.base >= cleanable_end) break;
    if (s.next <= first_dirty) continue;
    SLUICE_TRY(for_each_batch(
        c.log, s.base, c.stop,
        [&](const batch::header& h, std::span<const std::byte> b) -> status {
          if (full || h.last_offset() < first_dirty) return {};
          if (!h.is_control() && !c.is_aborted(h)) {
            auto d = records::decode_batch(as_u8(b));
            if (!d.ok()) return d.to_status();
            for (const auto& r : d->records) {
              if (!r.key) continue;
              if (!c.map.put(offset_map::hash(*r.key), h.base_offset.value() + r.offset_delta)) {
                full = true;  // what was put of this batch is true, and harmless
                return {};
              }
            }
          }
          map_end = h.last_offset() + 1;
          return {};
        }));
    if (!full) map_end = std::max(map_end, s.next);
  }
  return map_end;
}

std::vector<uint8_t> copy_of(std::span<const uint8_t> s) {
  return {s.begin(), s.end()};
}

// Decides one batch: appends what stays of it to `out`.
status filter_batch(clean_context& c, const batch::header& h, std::span<const std::byte> bytes,
                    std::vector<std::byte>& out) {
  auto keep_whole = [&] {
    out.insert(out.end(), bytes.begin(), bytes.end());
    return status();
  };
  if (h.last_offset() < c.log_start) {
    c.out.records_removed += static_cast<uint64_t>(h.records_count);
    return {};
  }
  if (h.is_control()) return keep_whole();
  auto d = records::decode_batch(as_u8(bytes));
  if (!d.ok()) {
    SLUICE_LOG_WARN("{}: cleaner keeps an undecodable batch at {}: {}", c.log.name(),
                    h.base_offset.value(), d.err().message);
    return keep_whole();
  }
  const bool horizon_set = h.has_delete_horizon();
  const int64_t horizon = d->header.base_timestamp;
  // An aborted transaction's records go, whatever their keys (Kafka's
  // cleaner discards them too): no read_committed reader is ever handed
  // them, and they are below the last stable offset.
  const bool aborted = c.is_aborted(h);
  std::vector<const records::record*> kept;
  bool tombstone_kept = false;
  for (const auto& r : d->records) {
    const int64_t off = h.base_offset.value() + r.offset_delta;
    bool keep = !aborted;
    if (keep && r.key) {
      auto newest = c.map.get(offset_map::hash(*r.key));
      if (newest && *newest > off)
        keep = false;
      else if (!r.value && horizon_set && c.now_ms >= horizon)
        keep = false;
    }
    if (!keep) continue;
    kept.push_back(&r);
    if (r.key && !r.value) tombstone_kept = true;
  }
  const size_t removed = d->records.size() - kept.size();
  c.out.records_removed += removed;
  if (removed == 0 && (!tombstone_kept || horizon_set)) {
    if (tombstone_kept) c.out.next_horizon_ms = std::min(c.out.next_horizon_ms, horizon);
    return keep_whole();
  }
  if (kept.empty() && !c.producer_last.count(h.base_offset.value())) return {};
  records::batch_options o;
  o.base_offset = h.base_offset.value();
  o.partition_leader_epoch = h.partition_leader_epoch;
  o.codec = d->header.codec();
  o.ts_type = d->header.ts_type();
  if (o.ts_type == model::timestamp_type::log_append_time)
    o.log_append_time_ms = d->header.max_timestamp;
  o.transactional = d->header.is_transactional();
  o.producer_id = d->header.producer_id;
  o.producer_epoch = d->header.producer_epoch;
  o.base_sequence = d->header.base_sequence;
  o.last_offset_delta = h.last_offset_delta;
  o.empty_max_timestamp_ms = d->header.max_timestamp;
  if (tombstone_kept) {
    o.delete_horizon = true;
    o.base_timestamp_ms = horizon_set ? horizon : c.now_ms + c.cfg.delete_retention_ms;
    c.out.next_horizon_ms = std::min(c.out.next_horizon_ms, *o.base_timestamp_ms);
  }
  std::vector<records::record_input> in;
  in.reserve(kept.size());
  for (const auto* r : kept) {
    records::record_input ri;
    if (r->key) ri.key = copy_of(*r->key);
    if (r->value) ri.value = copy_of(*r->value);
    for (const auto& hd : r->headers) {
      std::optional<std::vector<uint8_t>> v;
      if (hd.value) v = copy_of(*hd.value);
      ri.headers.emplace_back(
          std::string(reinterpret_cast<const char*>(hd.key.data()), hd.key.size()), std::move(v));
    }
    ri.timestamp_ms = d->header.base_timestamp + r->timestamp_delta;
    ri.offset_delta = r->offset_delta;
    in.push_back(std::move(ri));
  }
  SLUICE_ASSIGN_OR_RETURN(auto built, records::build_batch(o, in));
  const auto* p = reinterpret_cast<const std::byte*>(built.data());
  out.insert(out.end(), p, p + built.size());
  return {};
}

// Rewrites the closed segments [first, after) of `segs` as one cleaned copy.
status clean_group(clean_context& c, const std::vector<storage::segment_info>& segs, size_t first,
                   size_t after) {
  SLUICE_ASSIGN_OR_RETURN(auto rw, c.log.begin_rewrite(segs[first].base, segs[after].base));
  std::vector<std::byte> out;
  uint64_t read = 0;
  for (size_t i = first; i < after; ++i) {
    read += segs[i].size_bytes;
    SLUICE_TRY(for_each_batch(c.log, segs[i].base, c.stop,
                              [&](const batch::header& h, std::span<const std::byte> b) -> status {
                                SLUICE_TRY(filter_batch(c, h, b, out));
                                if (out.size() >= limits::cleaner_write_chunk_bytes) {
                                  SLUICE_TRY(rw->append(out));
                                  out.clear();
                                }
                                return status();
                              }));
  }
  SLUICE_TRY(rw->append(out));
  const uint64_t written = rw->size_bytes();
  SLUICE_TRY(c.log.replace_segments(std::move(rw)));
  c.out.bytes_read += read;
  c.out.bytes_written += written;
  c.out.cleaned = true;
  return {};
}

}  // namespace

result<clean_result> clean_log(storage::log& log, const config::topic_config& cfg, offset_map& map,
                               const std::vector<offset>& producer_last, offset stable_end,
                               const std::vector<storage::aborted_txn>& aborted, int64_t now_ms,
                               const std::atomic<bool>& stop) {
  clean_result out;
  clean_context c{log, cfg, map, {}, now_ms, log.log_start_offset(), stop, out, {}};
  for (const auto& a : aborted) c.aborted[a.producer_id].emplace_back(a.first.value(), a.last.value());
  for (auto o : producer_last) c.producer_last.insert(o.value());
  const auto segs = log.segments();
  const offset first_dirty = log.cleaner_checkpoint();
  out.map_end = first_dirty;
  if (segs.size() < 2) return out;
  const auto d = measure_dirtiness(segs, first_dirty, stable_end, now_ms, cfg.min_compaction_lag_ms,
                                   cfg.max_compaction_lag_ms);
  map.clear();
  SLUICE_ASSIGN_OR_RETURN(out.map_end, build_map(c, segs, first_dirty, d.cleanable_end));
  // Clean every closed segment that starts below the mapped end: the clean
  // part against the map, and the dirty part as far as the map reached.
  const offset upto = std::max(out.map_end, first_dirty);
  size_t i = 0;
  while (i + 1 < segs.size() && segs[i].base < upto && segs[i].base < d.cleanable_end) {
    size_t j = i + 1;
    uint64_t bytes = segs[i].size_bytes;
    while (j + 1 < segs.size() && segs[j].base < upto && segs[j].base < d.cleanable_end &&
           bytes + segs[j].size_bytes <= static_cast<uint64_t>(cfg.segment_bytes) &&
           segs[j + 1].base - segs[i].base <= INT32_MAX) {
      bytes += segs[j].size_bytes;
      ++j;
    }
    if (segs[i].next > c.log_start || j > i + 1) SLUICE_TRY(clean_group(c, segs, i, j));
    i = j;
  }
  if (out.map_end > first_dirty) SLUICE_TRY(log.set_cleaner_checkpoint(out.map_end));
  return out;
}

// ---- the cleaner threads ---------------------------------------------------------------

log_cleaner::log_cleaner(partition_manager& pm, sluice::clock& clk, int threads,
                         int64_t dedupe_buffer_bytes, int64_t backoff_ms)
    : pm_(pm),
      clk_(clk),
      threads_(threads),
      map_bytes_per_thread_(static_cast<size_t>(dedupe_buffer_bytes) /
                            static_cast<size_t>(std::max(threads, 1))),
      backoff_ms_(backoff_ms) {}

log_cleaner::~log_cleaner() {
  stop();
}

void log_cleaner::start() {
  for (int i = 0; i < threads_; ++i)
    workers_.emplace_back([this, i] { run(static_cast<size_t>(i)); });
}

void log_cleaner::stop() {
  {
    std::lock_guard g(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

void log_cleaner::run(size_t) {
  std::unique_ptr<offset_map> map;  // allocated when a log first needs cleaning
  while (!stopping_) {
    if (clean_one(map)) continue;
    std::unique_lock g(mu_);
    cv_.wait_for(g, std::chrono::milliseconds(backoff_ms_), [this] { return stopping_.load(); });
  }
}

bool log_cleaner::run_once() { return clean_one(shared_map_); }

cleaner_stats log_cleaner::stats(const std::string& log_name) const {
  std::lock_guard g(mu_);
  auto it = stats_.find(log_name);
  return it == stats_.end() ? cleaner_stats{} : it->second;
}

bool log_cleaner::clean_one(std::unique_ptr<offset_map>& map) {
  const int64_t now = clk_.now_ms();
  std::shared_ptr<partition> best;
  double best_score = -1;
  double best_ratio = 0;
  {
    std::lock_guard g(mu_);
    for (const auto& part : pm_.replicas().all()) {
      if (part->closed()) continue;
      const auto cfg = part->config();
      if (!cfg.cleanup_compact) continue;
      auto& lg = part->log();
      if (busy_.count(lg.name()) || lg.offline()) continue;
      const auto d = measure_dirtiness(lg.segments(), lg.cleaner_checkpoint(), part->last_stable_offset(), now,
                                       cfg.min_compaction_lag_ms, cfg.max_compaction_lag_ms);
      double score = d.ratio;
      const bool dirty_enough = d.dirty_bytes > 0 && d.ratio >= cfg.min_cleanable_dirty_ratio;
      auto h = horizons_.find(lg.name());
      const bool horizon_due = h != horizons_.end() && h->second <= now;
      if (!dirty_enough && !(d.past_max_lag && d.dirty_bytes > 0) && !horizon_due) continue;
      if (d.past_max_lag || horizon_due) score += 1;  // overdue logs first
      if (score > best_score) {
        best_score = score;
        best_ratio = d.ratio;
        best = part;
      }
    }
    if (!best) return false;
    busy_.insert(best->log().name());
  }
  auto& lg = best->log();
  // The map's memory is taken only once there is something to clean, so a
  // broker without compacted topics never pays for it.
  if (!map) map = std::make_unique<offset_map>(map_bytes_per_thread_);
  const offset stable = best->last_stable_offset();
  auto aborted = best->aborted_below(stable, limits::max_aborted_txns_per_clean);
  result<clean_result> r = aborted.ok() && aborted->size() < limits::max_aborted_txns_per_clean
                               ? clean_log(lg, best->config(), *map, best->producer_last_batch_bases(), stable,
                                           *aborted, now, stopping_)
                               : result<clean_result>(error{errc::policy_violation,
                                                            "too many aborted transactions to clean around"});
  std::lock_guard g(mu_);
  busy_.erase(lg.name());
  if (!r.ok()) {
    if (r.code() != errc::shutting_down && r.code() != errc::not_found)
      SLUICE_LOG_WARN("cleaner: {}: {}", lg.name(), r.err().message);
    horizons_.erase(lg.name());
    return r.code() == errc::not_found;  // the log changed: look again at once
  }
  auto& st = stats_[lg.name()];
  ++st.cleans;
  st.bytes_read += r->bytes_read;
  st.bytes_written += r->bytes_written;
  st.records_removed += r->records_removed;
  st.last_clean_ms = clk_.now_ms();
  st.last_dirty_ratio = best_ratio;
  if (r->next_horizon_ms < INT64_MAX)
    horizons_[lg.name()] = r->next_horizon_ms;
  else
    horizons_.erase(lg.name());
  if (r->cleaned)
    SLUICE_LOG_INFO(
        "cleaner: {} cleaned: {} bytes read, {} written, {} records removed, checkpoint {}",
        lg.name(), r->bytes_read, r->bytes_written, r->records_removed, r->map_end.value());
  return r->cleaned;
}

}  // namespace sluice::cluster
