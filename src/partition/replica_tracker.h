#pragma once

// A leader's rules over its followers (docs/replication.md): what each
// follower has, the high watermark, and which followers are in sync. Plain
// logic over the times and offsets it is given, so tests drive it with a
// test clock; the partition holds one under its state lock.
//
// What a follower has. A follower fetches at the offset after the last it
// holds, and it fsyncs what it appended before it asks for more, so a fetch
// at offset F says: every offset below F is on the follower's disk. The
// leader's own log end offset counts for itself: acks=all waits for the
// leader's fsync separately (partition::on_committed).
//
// High watermark: the smallest log end offset over the in-sync replicas,
// the leader included. A follower that has not fetched since this broker
// became leader holds it where it is. It never moves backwards. Which
// replicas count is the "maximal" ISR (Kafka's KIP-497 rule): the ISR the
// controller's store holds, plus followers this leader has asked to add and
// the store has not confirmed yet. A follower the leader asked to remove
// still counts until the store confirms it, so the high watermark never
// passes an offset some replica the store still calls in sync may lack.
//
// In sync: a follower is caught up when it fetches at or past the leader's
// log end offset, or at or past the end the leader had at its previous
// fetch (it caught up to that point then). One not caught up for
// `lag_max_ms` (replica.lag.time.max.ms) is proposed for removal; one
// outside the ISR whose log reaches the high watermark and the start of
// this leader's epoch is proposed for addition.
//
// Thread safety: none; the caller locks.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/types.h"

namespace sluice::cluster {

// An ISR change a leader asks the controller's store for: `isr` in place of
// the ISR it holds at `partition_epoch`, while leading at `leader_epoch`.
struct isr_request {
  std::string topic;
  int32_t partition = 0;
  int32_t leader_epoch = 0;
  int32_t partition_epoch = 0;
  std::vector<int32_t> isr;
  // For each member `isr` adds: the broker epoch it fetched with (KIP-903's
  // AlterPartition broker epochs). The write holds only while that is still
  // the broker's registration, so a broker that restarted since (and may
  // have lost what it had not synced) is not added on its earlier
  // process's word.
  std::map<int32_t, int64_t> added_broker_epochs;
};

struct follower_progress {
  int32_t id = -1;
  offset log_end{-1};  // -1: not fetched since this broker became leader
  int64_t last_caught_up_ms = 0;
  int64_t last_fetch_ms = 0;
  offset leader_end_at_last_fetch{-1};
  int64_t broker_epoch = -1;  // the broker epoch of its last fetch (-1: not given)
  offset log_start{-1};       // its log start offset, as its last fetch said (-1: not given)
};

// Whether a Fetch claiming to come from a follower speaks for it, so that
// it may move the leader's view of that follower (its log end offset, and
// with it the high watermark and the ISR): it names, in Fetch v15's
// ReplicaState.ReplicaEpoch (KIP-903), the broker epoch of the live
// registration the leader's metadata shows for that broker
// (`registered_epoch`; nullopt when none is live). A fetch without one (-1,
// every version before 15), from a broker not registered, or from a
// registration the leader does not know (an earlier process of that broker,
// or a later one the leader's image has not reached yet) is refused with
// STALE_BROKER_EPOCH. Kafka stores the epoch a follower sent and checks it
// only before adding the follower to the ISR (Partition.isReplicaIsrEligible,
// -1 passing); Sluice's followers always send it, so every replica fetch is
// held to it, and a client that only claims a broker's replica id moves
// nothing. It fences stale processes and careless clients; it is not
// authentication (epochs are etcd revisions, which can be guessed).
bool replica_fetch_trusted(int64_t fetch_epoch, std::optional<int64_t> registered_epoch);

class replica_tracker {
 public:
  // This broker (`self`) leads from now on: `replicas` are the assigned
  // replicas, `isr` the store's ISR, `hw` the high watermark it had as a
  // follower (never moved back), `leader_end` its log end offset, which is
  // where this leader's epoch starts. Every follower counts as caught up
  // now, so none is removed before it had `lag_max_ms` to fetch.
  void become_leader(int32_t self, const std::vector<int32_t>& replicas, const std::vector<int32_t>& isr,
                     offset hw, offset leader_end, int64_t now_ms);
  // The store's ISR or assignment changed under the same leadership.
  // Returns true when the high watermark moved.
  bool set_isr(const std::vector<int32_t>& replicas, const std::vector<int32_t>& isr, offset leader_end,
               int64_t now_ms);
  // Follower `id` fetched at `fetch_offset` while the leader's log ended
  // at `leader_end`. Returns true when the high watermark moved. A
  // replica that is not assigned changes nothing.
  // `broker_epoch` is the broker epoch the fetch was trusted with
  // (replica_fetch_trusted), or -1.
  // `log_start`: the follower's log start offset its fetch named (-1: not
  // given), for low_watermark.
  bool on_fetch(int32_t id, offset fetch_offset, offset leader_end, int64_t now_ms, int64_t broker_epoch = -1,
                offset log_start = offset(-1));
  // The leader's log end offset moved (an append). Returns true when the
  // high watermark moved (only when the leader is the only one counted).
  bool on_leader_end(offset leader_end);

  offset high_watermark() const { return hw_; }
  // The smallest log start offset over the store's ISR, the leader's own
  // (`leader_start`) included (Kafka's low watermark, which a DeleteRecords
  // waits on): -1 while a member has not said its own since this
  // leadership began.
  offset low_watermark(offset leader_start) const;
  // The store's ISR (what min.insync.replicas counts).
  const std::vector<int32_t>& isr() const { return isr_; }
  // The size of the maximal ISR, the replicas the high watermark counts:
  // the store's ISR plus the followers asked to be added (Kafka's
  // PartitionState.maximalIsr, which min.insync.replicas counts once a
  // batch is appended).
  size_t maximal_isr_size() const { return isr_.size() + pending_.size(); }
  const std::vector<follower_progress>& followers() const { return followers_; }
  offset epoch_start() const { return epoch_start_; }

  // The ISR the leader should ask the store for now, or nullopt when it
  // is right: the store's ISR without the followers that lagged longer
  // than `lag_max_ms`, with the followers that caught up. Records the
  // additions as pending: they count for the high watermark at once, and
  // until the store's next state (set_isr), even if they lag meanwhile,
  // since the proposal naming them may still be written (a follower added
  // to the ISR below the high watermark would let a clean election lose
  // committed records; the simulation found it). A pending addition that
  // lags makes this propose the store's ISR unchanged, which moves the
  // partition epoch past the old proposal.
  std::optional<std::vector<int32_t>> propose_isr(int64_t now_ms, int64_t lag_max_ms);
  // Whether every member of the store's ISR but the leader caught up
  // within `lag_max_ms` (none would be proposed for removal): the ISR
  // still follows this leader. True for a leader alone in its ISR.
  bool isr_following(int64_t now_ms, int64_t lag_max_ms) const;

 private:
  follower_progress* find(int32_t id);
  const follower_progress* find(int32_t id) const;
  bool counted(int32_t id) const;
  bool advance(offset leader_end);
  bool caught_up(const follower_progress& f) const;

  int32_t self_ = -1;
  std::vector<int32_t> replicas_;
  std::vector<int32_t> isr_;      // the store's
  std::vector<int32_t> pending_;  // asked to be added, not yet in the store's ISR
  std::vector<follower_progress> followers_;
  offset hw_{0};
  offset leader_end_{0};
  offset epoch_start_{0};
};

}  // namespace sluice::cluster
