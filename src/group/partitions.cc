#include "group/partitions.h"

#include "base/assert.h"
#include "group/records.h"

namespace sluice::group {

using kafka::error_code;

offsets_partitions::offsets_partitions(int32_t num_partitions, record_log& log, post_fn post, std::mutex& mu,
                                       sluice::clock& clk, int64_t commit_timeout_ms)
    : log_(log),
      post_(std::move(post)),
      mu_(mu),
      clk_(clk),
      commit_timeout_ms_(commit_timeout_ms),
      parts_(static_cast<size_t>(num_partitions)) {
  SLUICE_ASSERT(num_partitions > 0, "__consumer_offsets has at least one partition");
  SLUICE_ASSERT(commit_timeout_ms > 0, "offsets.commit.timeout.ms is positive");
}

offsets_partitions::slot& offsets_partitions::at(int32_t p) {
  SLUICE_ASSERT(p >= 0 && p < count(), "a partition of __consumer_offsets");
  return parts_[static_cast<size_t>(p)];
}

const offsets_partitions::slot& offsets_partitions::at(int32_t p) const {
  SLUICE_ASSERT(p >= 0 && p < count(), "a partition of __consumer_offsets");
  return parts_[static_cast<size_t>(p)];
}

int32_t offsets_partitions::partition_of(std::string_view group_id) const {
  return partition_for(group_id, count());
}

partition_state offsets_partitions::state(int32_t p) const { return at(p).state; }

uint64_t offsets_partitions::epoch(int32_t p) const { return at(p).epoch; }

bool offsets_partitions::serves(int32_t p) const { return !closed_ && state(p) == partition_state::loaded; }

error_code offsets_partitions::gate(std::string_view group_id) const {
  if (closed_) return error_code::coordinator_load_in_progress;
  switch (state(partition_of(group_id))) {
    case partition_state::loaded:
      return view_current_ && !view_current_() ? error_code::not_coordinator : error_code::none;
    case partition_state::loading: return error_code::coordinator_load_in_progress;
    case partition_state::not_owned: return error_code::not_coordinator;
  }
  return error_code::not_coordinator;
}

bool offsets_partitions::any_loading() const {
  for (const auto& s : parts_)
    if (s.state == partition_state::loading) return true;
  return false;
}

void offsets_partitions::begin_load(int32_t p) {
  auto& s = at(p);
  s.state = partition_state::loading;
  ++s.epoch;
}

bool offsets_partitions::finish_load(int32_t p, uint64_t epoch) {
  auto& s = at(p);
  if (s.state != partition_state::loading || s.epoch != epoch) return false;
  SLUICE_ASSERT(!closed_, "a closed coordinator loads nothing");
  s.state = partition_state::loaded;
  return true;
}

void offsets_partitions::unload(int32_t p) {
  auto& s = at(p);
  s.state = partition_state::not_owned;
  ++s.epoch;
}

void offsets_partitions::append(std::string_view group_id, std::vector<protocol::records::record_input> records,
                                then_fn then) {
  append_at(group_id, std::move(records), std::nullopt,
            [then = std::move(then)](status s, int64_t, outbox& out) { then(std::move(s), out); });
}

void offsets_partitions::append_at(std::string_view group_id, std::vector<protocol::records::record_input> records,
                                   std::optional<txn_producer> txn, at_then_fn then) {
  const int32_t p = partition_of(group_id);
  const uint64_t id = next_append_id_++;
  pending_.emplace(id, pending{p, epoch(p), clk_.monotonic_ms() + commit_timeout_ms_, std::move(then)});
  // The completion may come on any thread, even inside append(); it is
  // posted to the executor so it never runs under the mutex.
  log_.append(p, std::move(records), txn ? &*txn : nullptr, [this, id](status s, int64_t base_offset) {
    post_([this, id, s, base_offset] { complete(id, s, base_offset); });
  });
}

void offsets_partitions::complete(uint64_t id, status s, int64_t base_offset) {
  outbox out;
  std::lock_guard g(mu_);
  auto it = pending_.find(id);
  if (it == pending_.end()) return;  // answered when it timed out; the next load replays it
  pending op = std::move(it->second);
  pending_.erase(it);
  if (epoch(op.p) != op.epoch) {
    op.then(status(errc::not_coordinator, "__consumer_offsets-" + std::to_string(op.p) + " changed hands"), -1, out);
    return;
  }
  op.then(s, s.ok() ? base_offset : -1, out);
}

void offsets_partitions::expire_appends(outbox& out) {
  const int64_t now = clk_.monotonic_ms();
  while (!pending_.empty() && pending_.begin()->second.deadline_ms <= now) {
    pending op = std::move(pending_.begin()->second);
    pending_.erase(pending_.begin());
    if (epoch(op.p) != op.epoch) {
      op.then(status(errc::not_coordinator, "__consumer_offsets-" + std::to_string(op.p) + " changed hands"), -1,
              out);
      continue;
    }
    op.then(status(errc::unavailable, "__consumer_offsets-" + std::to_string(op.p) + ": not committed within " +
                                          std::to_string(commit_timeout_ms_) + " ms (offsets.commit.timeout.ms)"),
            -1, out);
  }
}

}  // namespace sluice::group
