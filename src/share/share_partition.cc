#include "share/share_partition.h"

#include <algorithm>

#include "base/assert.h"

namespace sluice::share {

const char* record_state_name(record_state s) {
  switch (s) {
    case record_state::available: return "available";
    case record_state::acquired: return "acquired";
    case record_state::acknowledged: return "acknowledged";
    case record_state::archived: return "archived";
  }
  return "unknown";
}

int64_t share_lag(const durable_state& d, int64_t end) {
  if (end <= d.start_offset) return 0;
  int64_t done = 0;
  for (const auto& b : d.batches) {
    if (b.state != record_state::acknowledged && b.state != record_state::archived) continue;
    const int64_t first = std::max(b.first_offset, d.start_offset);
    const int64_t last = std::min(b.last_offset, end - 1);
    if (first <= last) done += last - first + 1;
  }
  return std::max<int64_t>(end - d.start_offset - done, 0);
}

int64_t share_in_flight(const durable_state& d) {
  int64_t n = 0;
  for (const auto& b : d.batches)
    if (b.state == record_state::available && b.delivery_count > 0) n += b.last_offset - b.first_offset + 1;
  return n;
}

const char* archive_reason_name(archive_reason r) {
  switch (r) {
    case archive_reason::rejected: return "rejected";
    case archive_reason::delivery_count_exhausted: return "delivery_count_exhausted";
  }
  return "unknown";
}

share_partition::share_partition(int64_t start_offset, settings s) : settings_(s), start_(start_offset) {
  SLUICE_ASSERT(start_offset >= 0, "a share partition starts at an offset");
}

share_partition::share_partition(const durable_state& d, settings s)
    : settings_(s),
      start_(d.start_offset),
      dl_producer_id_(d.dead_letter_producer_id),
      dl_producer_epoch_(d.dead_letter_producer_epoch),
      dl_sequence_(d.dead_letter_sequence),
      pending_(d.pending_dead_letters),
      archived_total_(d.archived_count) {
  SLUICE_ASSERT(d.start_offset >= 0, "a share partition starts at an offset");
  int64_t next = start_;
  for (const auto& b : d.batches) {
    // The durable state was checked when it was decoded (records.cc);
    // what reaches here is in order and past the start.
    SLUICE_ASSERT(b.first_offset >= next && b.last_offset >= b.first_offset, "durable batches in order");
    SLUICE_ASSERT(b.state != record_state::acquired, "acquired is never durable");
    window_.resize(static_cast<size_t>(b.first_offset - start_));  // never-delivered gap: available, count 0
    for (int64_t o = b.first_offset; o <= b.last_offset; ++o) {
      window_.push_back(slot{b.state, b.delivery_count, 0, 0});
    }
    next = b.last_offset + 1;
  }
  // Trailing never-delivered records carry nothing: the end offset is
  // where the last listed batch ends.
  advance_start();
  check_invariants();
}

share_partition::slot* share_partition::at(int64_t offset) {
  if (offset < start_ || offset >= end_offset()) return nullptr;
  return &window_[static_cast<size_t>(offset - start_)];
}

uint32_t share_partition::member_index(const std::string& member) {
  if (acquired_ == 0 && !members_.empty()) {
    // Nothing is held: forget the members seen so far, so the table is
    // bounded by the members holding records now.
    members_.clear();
    member_ids_.clear();
  }
  auto [it, inserted] = member_ids_.try_emplace(member, static_cast<uint32_t>(members_.size()));
  if (inserted) members_.push_back(member);
  return it->second;
}

std::optional<int64_t> share_partition::next_fetch_offset() const {
  if (static_cast<int64_t>(pending_.size()) >= settings_.max_record_locks) return std::nullopt;
  for (size_t i = 0; i < window_.size(); ++i) {
    if (window_[i].state == record_state::available) return start_ + static_cast<int64_t>(i);
  }
  if (static_cast<int64_t>(window_.size()) >= settings_.max_record_locks) return std::nullopt;
  return end_offset();
}

int64_t share_partition::acquire_limit(int64_t from, int64_t max_records) const {
  const int64_t window_end = start_ + settings_.max_record_locks;
  if (max_records <= 0 || max_records >= settings_.max_record_locks) return window_end;
  int64_t o = std::max(from, start_);
  int64_t left = max_records;
  for (; o < end_offset() && left > 0; ++o) {
    if (window_[static_cast<size_t>(o - start_)].state == record_state::available) --left;
  }
  // Past the end offset every record is available.
  return std::min(window_end, o + left);
}

std::vector<acquired_range> share_partition::acquire(const std::string& member, const std::vector<log_batch>& batches,
                                                     int32_t max_records, int64_t now_ms,
                                                     std::vector<archived_record>& archived) {
  std::vector<acquired_range> out;
  const uint32_t who = member_index(member);
  const int64_t deadline = now_ms + settings_.record_lock_duration_ms;
  int64_t taken = 0;
  auto take = [&](int64_t offset, slot& s) {
    s.state = record_state::acquired;
    s.delivery_count = static_cast<int16_t>(s.delivery_count + 1);
    s.member = who;
    s.deadline_ms = deadline;
    earliest_deadline_ = std::min(earliest_deadline_, deadline);
    ++acquired_;
    ++taken;
    if (!out.empty() && out.back().last_offset + 1 == offset && out.back().delivery_count == s.delivery_count) {
      out.back().last_offset = offset;
    } else {
      out.push_back({offset, offset, s.delivery_count});
    }
  };
  int64_t prev_last = -1;
  for (const auto& b : batches) {
    SLUICE_ASSERT(b.last_offset >= b.base_offset && b.base_offset > prev_last, "log batches in offset order");
    prev_last = b.last_offset;
    for (int64_t o = std::max(b.base_offset, start_); o <= b.last_offset; ++o) {
      if (max_records > 0 && taken >= max_records) break;
      if (o >= end_offset()) {
        // The window is full when the offset would be max_record_locks or
        // more past the start.
        if (o - start_ >= settings_.max_record_locks) break;
        // Offsets skipped between the end and this batch (nothing in the
        // log there: compacted away) are done; so are markers and aborted
        // records, which nobody is handed.
        while (end_offset() < o) window_.push_back(slot{record_state::acknowledged, 0, 0, 0});
        window_.push_back(slot{});
      }
      slot& s = *at(o);
      if (s.state != record_state::available) continue;
      if (b.control || b.aborted) {
        s.state = record_state::acknowledged;
        continue;
      }
      if (s.delivery_count >= settings_.delivery_count_limit) {
        // Released or expired at the limit by an older leader's state:
        // archived, not delivered again.
        s.state = record_state::archived;
        ++archived_total_;
        archived.push_back({o, s.delivery_count, archive_reason::delivery_count_exhausted});
        continue;
      }
      take(o, s);
    }
    if (max_records > 0 && taken >= max_records) break;
  }
  advance_start();
  check_invariants();
  return out;
}

void share_partition::end_lock(slot& s, int64_t offset, std::vector<archived_record>& archived) {
  SLUICE_ASSERT(s.state == record_state::acquired && acquired_ > 0, "ending a lock that is held");
  --acquired_;
  if (s.delivery_count >= settings_.delivery_count_limit) {
    s.state = record_state::archived;
    ++archived_total_;
    archived.push_back({offset, s.delivery_count, archive_reason::delivery_count_exhausted});
  } else {
    s.state = record_state::available;
  }
}

std::vector<status> share_partition::acknowledge(const std::string& member, const std::vector<ack_batch>& batches,
                                                 int64_t now_ms, std::vector<archived_record>& archived) {
  (void)now_ms;
  std::vector<status> out;
  out.reserve(batches.size());
  auto it = member_ids_.find(member);
  for (const auto& b : batches) {
    if (b.first_offset > b.last_offset || b.types.empty()) {
      out.push_back(status(errc::invalid_argument,
                           "an acknowledgement batch names first <= last and one type, or one type per offset"));
      continue;
    }
    if (b.first_offset < start_ || b.last_offset >= end_offset()) {
      // Outside the window nothing is acquired (and a client's far-off
      // range cannot overflow the count below).
      out.push_back(status(errc::invalid_record_state, "offsets " + std::to_string(b.first_offset) + "-" +
                                                           std::to_string(b.last_offset) +
                                                           " are not all acquired by this member"));
      continue;
    }
    const int64_t n = b.last_offset - b.first_offset + 1;
    if (b.types.size() != 1 && static_cast<int64_t>(b.types.size()) != n) {
      out.push_back(status(errc::invalid_argument,
                           "an acknowledgement batch names first <= last and one type, or one type per offset"));
      continue;
    }
    bool ok = true;
    for (auto t : b.types) ok = ok && static_cast<int8_t>(t) >= 0 && static_cast<int8_t>(t) <= 3;
    if (!ok) {
      out.push_back(status(errc::invalid_argument, "an acknowledge type is 0 (gap) to 3 (reject)"));
      continue;
    }
    // All or nothing: check every offset first.
    for (int64_t o = b.first_offset; ok && o <= b.last_offset; ++o) {
      const slot* s = at(o);
      ok = s && s->state == record_state::acquired && it != member_ids_.end() && s->member == it->second;
    }
    if (!ok) {
      out.push_back(status(errc::invalid_record_state, "offsets " + std::to_string(b.first_offset) + "-" +
                                                           std::to_string(b.last_offset) +
                                                           " are not all acquired by this member"));
      continue;
    }
    for (int64_t o = b.first_offset; o <= b.last_offset; ++o) {
      slot& s = *at(o);
      const ack_type t = b.types.size() == 1 ? b.types[0] : b.types[static_cast<size_t>(o - b.first_offset)];
      switch (t) {
        case ack_type::gap:
        case ack_type::accept:
          --acquired_;
          s.state = record_state::acknowledged;
          break;
        case ack_type::release: end_lock(s, o, archived); break;
        case ack_type::reject:
          --acquired_;
          s.state = record_state::archived;
          ++archived_total_;
          archived.push_back({o, s.delivery_count, archive_reason::rejected});
          break;
      }
    }
    out.push_back(status{});
  }
  advance_start();
  check_invariants();
  return out;
}

bool share_partition::expire_locks(int64_t now_ms, std::vector<archived_record>& archived) {
  // Called on every tick for every share partition: no scan before the
  // earliest lock can have run out.
  if (acquired_ == 0 || now_ms < earliest_deadline_) return false;
  bool changed = false;
  int64_t earliest = INT64_MAX;
  for (size_t i = 0; i < window_.size(); ++i) {
    slot& s = window_[i];
    if (s.state != record_state::acquired) continue;
    if (s.deadline_ms <= now_ms) {
      end_lock(s, start_ + static_cast<int64_t>(i), archived);
      changed = true;
    } else {
      earliest = std::min(earliest, s.deadline_ms);
    }
  }
  earliest_deadline_ = earliest;
  if (changed) advance_start();
  check_invariants();
  return changed;
}

std::optional<int64_t> share_partition::next_lock_deadline() const {
  std::optional<int64_t> best;
  if (acquired_ == 0) return best;
  for (const auto& s : window_) {
    if (s.state == record_state::acquired && (!best || s.deadline_ms < *best)) best = s.deadline_ms;
  }
  return best;
}

bool share_partition::release_member(const std::string& member, std::vector<archived_record>& archived) {
  auto it = member_ids_.find(member);
  if (it == member_ids_.end()) return false;
  bool changed = false;
  for (size_t i = 0; i < window_.size() && acquired_ > 0; ++i) {
    slot& s = window_[i];
    if (s.state == record_state::acquired && s.member == it->second) {
      end_lock(s, start_ + static_cast<int64_t>(i), archived);
      changed = true;
    }
  }
  if (changed) advance_start();
  check_invariants();
  return changed;
}

void share_partition::log_start_moved(int64_t log_start) {
  while (start_ < log_start && !window_.empty()) {
    if (window_.front().state == record_state::acquired) --acquired_;
    window_.pop_front();
    ++start_;
  }
  if (start_ < log_start) start_ = log_start;
  advance_start();
  check_invariants();
}

status share_partition::reset(int64_t start_offset) {
  if (acquired_ > 0) {
    return status(errc::invalid_argument, "records of the partition are held by consumers");
  }
  if (start_offset < 0) return status(errc::invalid_argument, "a start offset is not negative");
  window_.clear();
  start_ = start_offset;
  check_invariants();
  return {};
}

void share_partition::advance_start() {
  while (!window_.empty() && (window_.front().state == record_state::acknowledged ||
                              window_.front().state == record_state::archived)) {
    window_.pop_front();
    ++start_;
  }
}

int64_t share_partition::count(record_state st) const {
  if (st == record_state::acquired) return acquired_;
  return std::count_if(window_.begin(), window_.end(), [st](const slot& s) { return s.state == st; });
}

record_state share_partition::state_of(int64_t offset) const {
  if (offset < start_) return record_state::acknowledged;  // done (or archived: the window forgot which)
  if (offset >= end_offset()) return record_state::available;
  return window_[static_cast<size_t>(offset - start_)].state;
}

int16_t share_partition::delivery_count_of(int64_t offset) const {
  if (offset < start_ || offset >= end_offset()) return 0;
  return window_[static_cast<size_t>(offset - start_)].delivery_count;
}

void share_partition::set_dead_letter_producer(int64_t id, int16_t epoch) {
  if (id == dl_producer_id_ && epoch == dl_producer_epoch_) return;
  dl_producer_id_ = id;
  dl_producer_epoch_ = epoch;
  dl_sequence_ = 0;
  for (auto& d : pending_) d.sequence = dl_sequence_++;
}

void share_partition::add_dead_letters(const std::vector<archived_record>& archived) {
  for (const auto& a : archived) {
    pending_.push_back({a.offset, a.delivery_count, a.reason, dl_sequence_});
    dl_sequence_ = dl_sequence_ == INT32_MAX ? 0 : dl_sequence_ + 1;  // Kafka's sequences wrap to 0
  }
}

void share_partition::dead_letters_written(int32_t sequence) {
  // Sequences are in order and wrap: drop from the front up to `sequence`.
  size_t n = 0;
  while (n < pending_.size() && pending_[n].sequence != sequence) ++n;
  if (n == pending_.size()) return;  // not pending (written twice, or numbered again)
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<ptrdiff_t>(n + 1));
}

durable_state share_partition::durable() const {
  durable_state d;
  d.start_offset = start_;
  d.dead_letter_producer_id = dl_producer_id_;
  d.dead_letter_producer_epoch = dl_producer_epoch_;
  d.dead_letter_sequence = dl_sequence_;
  d.pending_dead_letters = pending_;
  d.archived_count = archived_total_;
  for (size_t i = 0; i < window_.size(); ++i) {
    const slot& s = window_[i];
    const record_state st = s.state == record_state::acquired ? record_state::available : s.state;
    const int64_t o = start_ + static_cast<int64_t>(i);
    if (st == record_state::available && s.delivery_count == 0) continue;  // never delivered: implied
    if (!d.batches.empty() && d.batches.back().last_offset + 1 == o && d.batches.back().state == st &&
        d.batches.back().delivery_count == s.delivery_count) {
      d.batches.back().last_offset = o;
    } else {
      d.batches.push_back({o, o, st, s.delivery_count});
    }
  }
  return d;
}

void share_partition::check_invariants() const {
  SLUICE_ASSERT(start_ >= 0, "the start offset is an offset");
  SLUICE_ASSERT(window_.empty() || (window_.front().state != record_state::acknowledged &&
                                    window_.front().state != record_state::archived),
                "the start offset is the first record not done");
  SLUICE_ASSERT(acquired_ >= 0 && acquired_ <= static_cast<int64_t>(window_.size()),
                "acquired records are in flight");
}

}  // namespace sluice::share
