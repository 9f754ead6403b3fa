#include "group/partitions.h"

#include "base/assert.h"
#include "group/records.h"

namespace sluice::group {

using kafka::error_code;

offsets_partitions::offsets_partitions(int32_t num_partitions, record_log& log, post_fn post, std::mutex& mu)
    : log_(log), post_(std::move(post)), mu_(mu), parts_(static_cast<size_t>(num_partitions)) {
  SLUICE_ASSERT(num_partitions > 0, "__consumer_offsets has at least one partition");
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
    case partition_state::loaded: return error_code::none;
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
  const int32_t p = partition_of(group_id);
  const uint64_t issued = epoch(p);
  // The completion may come on any thread, even inside append(); it is
  // posted to the executor so it never runs under the mutex.
  log_.append(p, std::move(records), [this, p, issued, then = std::move(then)](status s) {
    post_([this, p, issued, then, s]() {
      outbox out;
      std::lock_guard g(mu_);
      if (epoch(p) != issued) {
        then(status(errc::not_coordinator, "__consumer_offsets-" + std::to_string(p) + " changed hands"), out);
        return;
      }
      then(s, out);
    });
  });
}

}  // namespace sluice::group
