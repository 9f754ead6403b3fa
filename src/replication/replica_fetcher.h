#pragma once

// A follower's fetcher (docs/replication.md): one thread per source broker,
// carrying every partition this broker follows there. Each round it
//
//   1. for partitions that start following (a new leader, a new leader
//      epoch, a fetch the leader refused as out of range), asks the leader
//      with OffsetForLeaderEpoch where this replica's latest epoch ended and
//      truncates what diverged (partition/truncation.h), round by round until
//      the logs agree;
//   2. fetches the others with Kafka's replica Fetch (the replica id, the
//      leader epoch this broker knows, the log end offset as fetch offset),
//      held by the leader up to replica.fetch.wait.max.ms until there is
//      data;
//   3. appends the leader's bytes unchanged (partition::append_replicated)
//      and waits until they are durable (one group commit over all the
//      partitions of the round) before the next fetch, whose offsets then
//      tell the leader what is on this replica's disk: the leader's high
//      watermark, and acks=all, count only fsynced copies;
//   4. takes the leader's high watermark for each partition.
//
// Failures: a leader that cannot be reached or does not answer in
// replica.socket.timeout.ms costs the connection and replica.fetch.backoff.ms;
// a partition the leader refuses (not the leader, another leader epoch)
// waits the backoff while the metadata catches up, then tries again; an
// append or truncation that fails (the disk) takes the partition out of
// this fetcher until the next state change adds it again.
//
// Fencing: an answer is applied only to entries still current (same
// partition, leader epoch and phase) under mu_, the lock add() and remove()
// take, and a replicated append only at the epoch and log end its fetch was
// sent with (partition::append_replicated); each fetch names the epoch of
// the replica's last batch, and a leader that answers diverging_epoch gets
// the tail truncated before the next fetch (KIP-320, KIP-595).
//
// The leader is reached through a leader_link (replication/leader_link.h): a
// broker's are TCP connections; a test's or a simulation's deliver the
// requests in-process. A fetcher runs its rounds on a thread of its own, or,
// built without one, when its owner calls run_round() (a simulation steps
// every fetcher from one thread, in the order its seed decides).
//
// Thread safety: add/remove/size from any thread (remove waits while an
// answer is being applied, so once it returns the partition is appended to
// by no fetch sent before); the rest is the fetcher thread's (or the
// caller's of run_round).

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "partition/partition.h"
#include "replication/leader_link.h"

namespace sluice::cluster {

struct fetcher_options {
  int32_t node_id = -1;  // this broker: the replica id of its fetches
  // This broker's current broker epoch (control_plane::broker_epoch), sent
  // with every fetch (Fetch v15's ReplicaState.ReplicaEpoch): the leader
  // counts a fetch only when it names the registration it knows. -1: not
  // known yet; the fetcher then sends no fetch (OffsetForLeaderEpoch goes
  // on) and asks again after limits::replica_fetch_epoch_poll_ms. Null:
  // never known; fetches go with -1 (and are refused).
  std::function<int64_t()> broker_epoch;
  int32_t source = -1;   // the leader broker fetched from
  int32_t min_bytes = 1;
  // The broker's replica.fetch.wait.max.ms, replica.fetch.max.bytes,
  // replica.fetch.response.max.bytes, replica.fetch.backoff.ms and
  // replica.socket.timeout.ms: their defaults are the configuration
  // schema's (config/schema.cc), not repeated here.
  int32_t wait_max_ms = 0;
  int32_t partition_max_bytes = 0;
  int32_t response_max_bytes = 0;
  int32_t backoff_ms = 0;
  int32_t socket_timeout_ms = 0;
};

class replica_fetcher {
 public:
  // Follows partitions led by opts.source, reached through `links`; with
  // `own_thread` false nothing runs until run_round() is called.
  replica_fetcher(fetcher_options opts, link_factory links, const sluice::clock& clk, bool own_thread = true);
  ~replica_fetcher();  // stops the thread
  replica_fetcher(const replica_fetcher&) = delete;
  replica_fetcher& operator=(const replica_fetcher&) = delete;

  // Follows `p` from this fetcher's source at the partition's current
  // leader epoch: truncation first. Adding it again at the same epoch
  // changes nothing; at another epoch truncation starts again.
  void add(const std::shared_ptr<partition>& p);
  void remove(const std::shared_ptr<partition>& p);
  size_t size() const;
  int32_t source() const { return opts_.source; }
  // Bytes of batches appended from this source (sluice_replication_bytes_in).
  uint64_t bytes_in() const { return bytes_in_.load(std::memory_order_relaxed); }

  // What one round did: exchanged with the leader (`worked`); found nothing
  // due (`next_retry_ms`, monotonic: when a backoff ends, INT64_MAX: none);
  // or had work but no link (`link_down`: it tries again after
  // replica.fetch.backoff.ms).
  struct round_outcome {
    bool worked = false;
    bool link_down = false;
    int64_t next_retry_ms = INT64_MAX;
  };
  // One round: truncation for the partitions starting to follow, then one
  // Fetch for the others, on the caller's thread. Only for a fetcher built
  // without its own thread.
  round_outcome run_round();

 private:
  enum class phase { truncating, fetching };
  struct entry {
    std::shared_ptr<partition> part;
    int32_t epoch = 0;  // the leader epoch it follows at
    phase ph = phase::truncating;
    int64_t retry_at_ms = 0;  // monotonic; backoff after a refusal
  };
  using key = std::pair<std::string, int32_t>;

  void run();
  round_outcome round();
  bool connect();
  // One OffsetForLeaderEpoch exchange for the partitions truncating.
  void truncate_round(std::vector<std::pair<key, entry>>& work);
  // One Fetch for the partitions fetching.
  void fetch_round(std::vector<std::pair<key, entry>>& work);
  // Waits until every partition of `work` is durable to its log end, so
  // that a fetch from there tells the truth; a partition whose sync failed
  // (its log is offline) is dropped from `work` and from this fetcher.
  void sync_before_fetch(std::vector<std::pair<key, entry>>& work);
  // Marks a partition (still at `epoch`) with a new phase or a backoff.
  void update(const key& k, int32_t epoch, std::optional<phase> ph, int64_t retry_at_ms);
  void update_locked(const key& k, int32_t epoch, std::optional<phase> ph, int64_t retry_at_ms);  // mu_ held
  void drop(const key& k, int32_t epoch);
  // Whether `e` is still k's entry, in phase `ph` (mu_ held).
  bool current_locked(const key& k, const entry& e, phase ph) const;
  void lost_connection(const std::string& why);
  // A truncation (or a reset) a leader's answer called for, run after mu_
  // is released; the partition refuses it once its leader epoch moved on.
  // `next`: the phase to go on in when it is done.
  struct cut {
    enum class kind { truncate, reset };
    key k;
    entry e;
    kind what;
    offset to;
    std::optional<phase> next;
  };
  void apply_cut(const cut& c);

  const fetcher_options opts_;
  const link_factory links_;
  const sluice::clock& clk_;
  const bool own_thread_;
  std::unique_ptr<leader_link> link_;  // the fetcher thread's
  std::atomic<uint64_t> bytes_in_{0};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<key, entry> parts_;  // mu_
  uint64_t changes_ = 0;        // mu_: add and remove count, so a waiting thread misses none
  bool stopping_ = false;       // mu_
  std::thread thread_;
};

}  // namespace sluice::cluster
