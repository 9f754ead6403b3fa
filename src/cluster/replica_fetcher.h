#pragma once

// A follower's fetcher (docs/replication.md): one thread per source broker,
// carrying every partition this broker follows there. Each round it
//
//   1. for partitions that start following (a new leader, a new leader
//      epoch, a fetch the leader refused as out of range), asks the leader
//      with OffsetForLeaderEpoch where this replica's latest epoch ended and
//      truncates what diverged (cluster/truncation.h), round by round until
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
// Thread safety: add/remove/size from any thread (remove waits while an
// answer is being applied, so once it returns the partition is appended to
// by no fetch sent before); the rest is the fetcher thread's.

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
#include "cluster/partition.h"

namespace sluice::protocol {
class raw_connection;
}  // namespace sluice::protocol

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
  int32_t wait_max_ms = 500;
  int32_t min_bytes = 1;
  int32_t partition_max_bytes = 1 << 20;
  int32_t response_max_bytes = 10 << 20;
  int32_t backoff_ms = 1000;
  int32_t socket_timeout_ms = 30'000;
};

// Where a broker listens ("host", port), or nullopt when it is not known
// (not registered).
using endpoint_lookup = std::function<std::optional<std::pair<std::string, int32_t>>(int32_t node_id)>;

class replica_fetcher {
 public:
  replica_fetcher(fetcher_options opts, endpoint_lookup endpoints, const sluice::clock& clk);
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
  const endpoint_lookup endpoints_;
  const sluice::clock& clk_;
  std::unique_ptr<protocol::raw_connection> conn_;  // the fetcher thread's
  std::atomic<uint64_t> bytes_in_{0};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<key, entry> parts_;  // mu_
  bool stopping_ = false;       // mu_
  std::thread thread_;
};

}  // namespace sluice::cluster
