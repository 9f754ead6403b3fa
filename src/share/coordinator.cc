#include "share/coordinator.h"

#include "base/assert.h"
#include "base/limits.h"

namespace sluice::share {

coordinator::coordinator(int32_t num_partitions) : num_partitions_(num_partitions) {
  SLUICE_ASSERT(num_partitions > 0, "__share_group_state has partitions");
}

void coordinator::begin_load(int32_t p) {
  unload(p);
  loading_.insert(p);
}

status coordinator::replay(int32_t p, std::span<const uint8_t> key, std::optional<std::span<const uint8_t>> value) {
  SLUICE_ASSERT(loading_.count(p), "replay into a partition being loaded");
  auto k = decode_key(key);
  if (!k.ok()) return k.err();
  if (partition_for(*k) != p) {
    return status(errc::corrupt_data, "share state of " + to_string(*k) + " found in partition " + std::to_string(p));
  }
  if (!value) {
    states_.erase(*k);
    leader_epochs_.erase(*k);
    return {};
  }
  auto s = decode_snapshot(*value);
  if (!s.ok()) return status(s.err().code, to_string(*k) + ": " + s.err().message);
  leader_epochs_[*k] = s->leader_epoch;
  states_[*k] = std::move(*s);
  return {};
}

void coordinator::finish_load(int32_t p) {
  SLUICE_ASSERT(loading_.count(p), "finishing a load that began");
  loading_.erase(p);
  loaded_.insert(p);
}

void coordinator::unload(int32_t p) {
  loading_.erase(p);
  loaded_.erase(p);
  for (auto it = states_.begin(); it != states_.end();) {
    if (partition_for(it->first) == p) {
      leader_epochs_.erase(it->first);
      it = states_.erase(it);
    } else {
      ++it;
    }
  }
  std::erase_if(leader_epochs_, [&](const auto& e) { return partition_for(e.first) == p; });
}

status coordinator::servable(const share_key& k, int32_t p) const {
  if (k.group_id.empty() || k.partition < 0) return status(errc::invalid_argument, "a share partition names its group and partition");
  if (loading_.count(p)) return status(errc::coordinator_load_in_progress, "__share_group_state-" + std::to_string(p) + " is loading");
  if (!loaded_.count(p)) return status(errc::not_coordinator, "__share_group_state-" + std::to_string(p) + " is not led here");
  return {};
}

state_write coordinator::make_write(int32_t p, const share_key& k, const share_snapshot& s) const {
  return state_write{p, k, encode_key(k), encode_snapshot(s)};
}

result<std::optional<share_snapshot>> coordinator::read(const share_key& k, int32_t leader_epoch) {
  const int32_t p = partition_for(k);
  if (auto s = servable(k, p); !s.ok()) return s.err();
  auto it = states_.find(k);
  if (leader_epoch < 0) {
    // Not a leader's read (the group coordinator's view for the admin
    // APIs): never fenced, and it fences no one.
    if (it == states_.end()) return std::optional<share_snapshot>{};
    return std::optional<share_snapshot>{it->second};
  }
  auto le = leader_epochs_.find(k);
  if (le != leader_epochs_.end() && leader_epoch < le->second) {
    return error{errc::fenced_leader_epoch, "leader epoch " + std::to_string(leader_epoch) + " is older than " +
                                                std::to_string(le->second) + " for " + to_string(k)};
  }
  if (it == states_.end()) return std::optional<share_snapshot>{};
  leader_epochs_[k] = leader_epoch;
  return std::optional<share_snapshot>{it->second};
}

result<state_write> coordinator::initialize(const share_key& k, int32_t leader_epoch, int64_t start_offset,
                                            int64_t now_ms, std::optional<int32_t> state_epoch) {
  const int32_t p = partition_for(k);
  if (auto s = servable(k, p); !s.ok()) return s.err();
  if (start_offset < 0) return error{errc::invalid_argument, "a share partition starts at an offset"};
  auto le = leader_epochs_.find(k);
  if (leader_epoch < 0) leader_epoch = le != leader_epochs_.end() ? le->second : -1;
  if (le != leader_epochs_.end() && leader_epoch < le->second) {
    return error{errc::fenced_leader_epoch, "leader epoch " + std::to_string(leader_epoch) + " is older than " +
                                                std::to_string(le->second) + " for " + to_string(k)};
  }
  auto it = states_.find(k);
  if (it == states_.end() && states_.size() >= limits::max_share_partitions) {
    return error{errc::coordinator_not_available, "this share coordinator holds the most share partitions it may"};
  }
  if (state_epoch && (*state_epoch < 0 || (it != states_.end() && *state_epoch <= it->second.state_epoch))) {
    return error{errc::fenced_state_epoch, "state epoch " + std::to_string(*state_epoch) + " is not newer than " +
                                               std::to_string(it != states_.end() ? it->second.state_epoch : -1) +
                                               " for " + to_string(k)};
  }
  share_snapshot s;
  s.state_epoch = state_epoch ? *state_epoch : it == states_.end() ? 0 : it->second.state_epoch + 1;
  s.leader_epoch = leader_epoch;
  s.state.start_offset = start_offset;
  s.write_timestamp_ms = now_ms;
  states_[k] = s;
  leader_epochs_[k] = leader_epoch;
  return make_write(p, k, s);
}

result<state_write> coordinator::write(const share_key& k, int32_t state_epoch, int32_t leader_epoch,
                                       const durable_state& d, int64_t now_ms) {
  const int32_t p = partition_for(k);
  if (auto s = servable(k, p); !s.ok()) return s.err();
  auto it = states_.find(k);
  // No state: deleted (DeleteShareGroupOffsets, DeleteGroups) since the
  // writer read it, so the writer's state epoch names a state that is gone.
  if (it == states_.end()) return error{errc::fenced_state_epoch, to_string(k) + " has no state to write over"};
  auto le = leader_epochs_.find(k);
  if (le != leader_epochs_.end() && leader_epoch < le->second) {
    return error{errc::fenced_leader_epoch, "leader epoch " + std::to_string(leader_epoch) + " is older than " +
                                                std::to_string(le->second) + " for " + to_string(k)};
  }
  if (state_epoch != it->second.state_epoch) {
    return error{errc::fenced_state_epoch, "state epoch " + std::to_string(state_epoch) + " is not " +
                                               std::to_string(it->second.state_epoch) + " for " + to_string(k)};
  }
  if (auto v = validate(d); !v.ok()) return error{errc::invalid_argument, to_string(k) + ": " + v.err().message};
  if (d.start_offset < it->second.state.start_offset) {
    // The start offset only moves up within a state epoch: what was done
    // stays done.
    return error{errc::invalid_argument, "the start offset of " + to_string(k) + " would move back"};
  }
  share_snapshot s;
  s.state_epoch = state_epoch;
  s.leader_epoch = leader_epoch;
  s.state = d;
  s.write_timestamp_ms = now_ms;
  it->second = s;
  leader_epochs_[k] = leader_epoch;
  return make_write(p, k, s);
}

result<std::optional<state_write>> coordinator::remove(const share_key& k) {
  const int32_t p = partition_for(k);
  if (auto s = servable(k, p); !s.ok()) return s.err();
  if (!states_.erase(k)) return std::optional<state_write>{};
  leader_epochs_.erase(k);
  return std::optional<state_write>{state_write{p, k, encode_key(k), std::nullopt}};
}

std::vector<std::pair<share_key, share_snapshot>> coordinator::group_state(const std::string& group_id) const {
  std::vector<std::pair<share_key, share_snapshot>> out;
  for (auto it = states_.lower_bound(share_key{group_id, {}, 0}); it != states_.end() && it->first.group_id == group_id;
       ++it)
    out.emplace_back(it->first, it->second);
  return out;
}

}  // namespace sluice::share
