#pragma once

// The share coordinator's decisions (Kafka's ShareCoordinator): the durable
// state of every share partition whose key falls in a partition of
// __share_group_state this broker leads, and the rules for changing it.
// No threads, no I/O: the share service (share/service.h) appends the
// records these calls return, in the order they were returned, and replays
// a partition's records into a coordinator when it starts leading it.
//
// Fencing. A share partition's state is written only by the leader of its
// topic partition, which says its leader epoch: a write or read from an
// older leader epoch than the newest one seen is FENCED_LEADER_EPOCH, so a
// deposed leader can neither overwrite nor read back the state its
// successor is changing. And by state epoch: initialising (or resetting)
// the state bumps it, and a write that names another state epoch is
// FENCED_STATE_EPOCH.
//
// Memory is the log with the appends in flight: each call that returns a
// record has already applied it here, and the service appends records in
// the order they were returned, so the log says what memory says once they
// land. An append that fails leaves memory ahead of the log: the service
// then unloads the partition and loads it again from the log.
//
// Not thread-safe.

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "share/records.h"

namespace sluice::share {

// A record to append to partition `partition` of __share_group_state.
struct state_write {
  int32_t partition = 0;
  share_key key;
  std::vector<uint8_t> key_bytes;
  std::optional<std::vector<uint8_t>> value_bytes;  // nullopt: a tombstone
};

class coordinator {
 public:
  explicit coordinator(int32_t num_partitions);
  int32_t num_partitions() const { return num_partitions_; }
  int32_t partition_for(const share_key& k) const { return share::partition_for(k, num_partitions_); }

  // Loading: begin_load, replay every record in log order, finish_load.
  // Requests for a partition being loaded are COORDINATOR_LOAD_IN_PROGRESS;
  // for one not loaded here NOT_COORDINATOR.
  void begin_load(int32_t p);
  // A record that does not decode is an error (the load fails and the
  // partition is not served): state that cannot be read must not be
  // replaced by a fresh one.
  status replay(int32_t p, std::span<const uint8_t> key, std::optional<std::span<const uint8_t>> value);
  void finish_load(int32_t p);
  void unload(int32_t p);
  bool loaded(int32_t p) const { return loaded_.count(p) > 0; }

  // ReadShareGroupState: the share partition's state, nullopt when it has
  // none yet (the leader then initialises it). A read at a newer leader
  // epoch than the state's records that epoch (in memory only: the next
  // write of that leader makes it durable). A leader epoch of -1 is not a
  // leader's read (the admin offset APIs): never fenced, recording nothing.
  result<std::optional<share_snapshot>> read(const share_key& k, int32_t leader_epoch);
  // InitializeShareGroupState: the state starts again at `start_offset`
  // with nothing in flight, at the next state epoch, or at `state_epoch`
  // when given (a leader of another broker asks for one: it must be newer
  // than the state's, else FENCED_STATE_EPOCH). A `leader_epoch` of -1
  // (InitializeShareGroupState carries none) keeps the one last seen.
  result<state_write> initialize(const share_key& k, int32_t leader_epoch, int64_t start_offset, int64_t now_ms,
                                 std::optional<int32_t> state_epoch = std::nullopt);
  // WriteShareGroupState: the share partition's whole state; a state that
  // is not there (deleted since) is FENCED_STATE_EPOCH.
  result<state_write> write(const share_key& k, int32_t state_epoch, int32_t leader_epoch, const durable_state& d,
                            int64_t now_ms);
  // DeleteShareGroupState: a tombstone (nothing to write when there is no
  // state: nullopt).
  result<std::optional<state_write>> remove(const share_key& k);

  // The state of every share partition of `group_id` held here.
  std::vector<std::pair<share_key, share_snapshot>> group_state(const std::string& group_id) const;
  size_t size() const { return states_.size(); }

 private:
  status servable(const share_key& k, int32_t p) const;
  state_write make_write(int32_t p, const share_key& k, const share_snapshot& s) const;

  int32_t num_partitions_;
  std::set<int32_t> loading_, loaded_;
  std::map<share_key, share_snapshot> states_;
  // The newest leader epoch seen per key (reads included).
  std::map<share_key, int32_t> leader_epochs_;
};

}  // namespace sluice::share
