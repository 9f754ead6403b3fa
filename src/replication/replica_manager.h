#pragma once

// The partitions this broker hosts: one replica each, leader or follower as
// the metadata store's state says. The partition manager decides which
// partitions exist (topic lifecycle) and hands their opened logs here; the
// handlers, the group coordinator and log maintenance find a hosted
// partition through get(). In a cluster (start_replication) it also owns
// the follower fetchers, one per source broker (replica_fetcher.h), and the
// leader's ISR upkeep: every replica.lag.time.max.ms / 2 at most, each
// partition it leads proposes the ISR change its followers call for, which
// the `isr_writer` takes to the controller's store.
//
// A partition has a slot from the moment its topic records it until the
// topic is deleted; the slot is empty while the partition's log is being
// created (partition_manager's create_mode::background).
//
// Thread safety: every method is thread-safe. One shared mutex guards the
// slots; it is never held across file I/O or while calling into a
// partition other than apply_state (which takes only the partition's own
// locks). Lock order: the partition manager's change_mu_ and create_mu_,
// then this class's mutex.

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

#include "base/error.h"
#include "partition/partition.h"
#include "partition/state.h"
#include "replication/leadership_gate.h"
#include "replication/replica_fetcher.h"

namespace sluice::cluster {

class replica_manager {
 public:
  explicit replica_manager(int32_t node_id) : node_id_(node_id) {}
  ~replica_manager();

  // Sends a leader's ISR change to the controller's store (asynchronously:
  // the outcome arrives as a state change, or not at all).
  using isr_writer = std::function<void(const isr_request&)>;
  struct replication_options {
    fetcher_options fetch;  // node_id and the fetch settings; source is per fetcher
    int64_t lag_max_ms = 0;  // replica.lag.time.max.ms (its default is the schema's)
    endpoint_lookup endpoints;
    // How fetchers reach their leaders; null: Kafka over TCP to
    // `endpoints` (tcp_links).
    link_factory links;
    isr_writer write_isr;
    // Called every limits::high_watermark_checkpoint_interval_ms from the
    // upkeep thread (the partition manager's checkpoint_high_watermarks).
    std::function<void()> checkpoint;
    // Asked each round for every partition this broker leads: one it
    // refuses (session lost, or in doubt with its followers gone) has its
    // waiting acks=all writes answered NOT_LEADER_OR_FOLLOWER at once, not
    // at their timeout, and proposes no ISR change (nobody could write
    // it). Null: always open. Must outlive replication.
    const leadership_gate* gate = nullptr;
    // False: no thread of its own, for the fetchers or the upkeep; the
    // owner runs their rounds (run_fetch_rounds, run_upkeep_round), as a
    // simulation does from one thread in the order its seed decides.
    bool own_threads = true;
  };
  // Starts following leaders: partitions led by other brokers are fetched
  // from them from now on, and the ISR upkeep runs. Call once, before the
  // first state that names another leader is applied (a single node never
  // calls it).
  void start_replication(replication_options opts, const sluice::clock& clk);
  // Stops every fetcher and the upkeep (shutdown; idempotent).
  void stop_replication();
  // Without threads of its own (replication_options::own_threads false):
  // one round of every fetcher, in the order of their source brokers;
  // true when any exchanged with its leader.
  bool run_fetch_rounds();
  // The same for the fetcher from `source` alone (false when there is
  // none): a simulation runs one while another of this broker's fetchers
  // waits for its answer, as their threads would.
  bool run_fetch_round(int32_t source);
  // Without threads of its own: one round of the leaders' ISR upkeep
  // (proposals, and waiters of leaderships the gate refuses).
  void run_upkeep_round();
  // For /metrics: bytes appended from leaders, and the fetchers' partitions.
  uint64_t replication_bytes_in() const;

  int32_t node_id() const { return node_id_; }
  // Whether this broker holds one of `replicas`.
  bool hosts(const replica_list& replicas) const;

  // The topic's slot count (0: none).
  int32_t slot_count(const std::string& topic) const;
  // Gives `topic` `count` slots (never fewer than it has); new ones empty.
  void add_slots(const std::string& topic, int32_t count);
  // Publishes a partition whose log now exists, first applying the store's
  // assignment and state to it. `p` must be below the topic's slot count.
  void install(const std::string& topic, int32_t p, std::shared_ptr<partition> part,
               const replica_list& replicas, const partition_state& st);
  // Removes the topic's slots and returns the partitions that were in them
  // (the caller closes them and deletes their logs).
  std::vector<std::shared_ptr<partition>> remove_topic(const std::string& topic);
  // Applies a new state from the store to a hosted partition; false when
  // the partition is not hosted (yet) or the state is older than its own.
  bool apply(const std::string& topic, int32_t p, const replica_list& replicas, const partition_state& st);

  // The hosted partition, or nullptr when it is not hosted here or its log
  // is still being created.
  std::shared_ptr<partition> get(const std::string& topic, int32_t p) const;
  // Whether the partition has a slot whose log is still being created.
  bool being_created(const std::string& topic, int32_t p) const;
  // What a request for a partition get() did not return answers:
  // errc::not_leader while its log is being created (retriable), else
  // errc::not_found (and errc::invalid_topic for a name Kafka forbids).
  errc missing_partition_error(const std::string& topic, int32_t p) const;
  // Every hosted partition whose log exists; of one topic.
  std::vector<std::shared_ptr<partition>> all() const;
  std::vector<std::shared_ptr<partition>> of_topic(const std::string& topic) const;

 private:
  // Moves `part` to the fetcher of its leader, or out of every fetcher when
  // it leads or has no leader.
  void follow(const std::shared_ptr<partition>& part);
  void unfollow(const std::shared_ptr<partition>& part);
  void upkeep();
  void upkeep_round(int64_t lag_max, const isr_writer& write, const leadership_gate* gate);

  const int32_t node_id_;
  // Replication (start_replication); guarded by rep_mu_.
  mutable std::mutex rep_mu_;
  std::condition_variable rep_cv_;
  std::optional<replication_options> rep_;
  const sluice::clock* clk_ = nullptr;
  std::map<int32_t, std::unique_ptr<replica_fetcher>> fetchers_;
  uint64_t retired_bytes_in_ = 0;  // of fetchers stopped
  bool rep_stopping_ = false;
  std::thread upkeep_thread_;

  mutable std::shared_mutex mu_;
  std::map<std::string, std::vector<std::shared_ptr<partition>>, std::less<>> slots_;  // mu_
};

}  // namespace sluice::cluster
