#pragma once

// The group coordinator as the broker runs it: the coordinator state
// machine, its records written to and replayed from __consumer_offsets
// through the broker's partitions, and the one thread that runs the
// coordinator's completions and timers.
//
// Lifecycle: open() (creates __consumer_offsets when missing), start()
// (the thread loads the topic's partitions one by one, then ticks every
// limits::tick_interval_ms; requests for a partition not loaded yet get
// COORDINATOR_LOAD_IN_PROGRESS), stop() (joins the
// thread; completions still queued are dropped, which drops the waiting
// requests' callbacks; the network server must be stopped first).
//
// Thread safety: coordinator() may be used from any thread between start()
// and stop().

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "base/clock.h"
#include "base/result.h"
#include "group/coordinator.h"

namespace sluice::cluster {
class partition_manager;
}
namespace sluice::config {
struct broker_config;
}

namespace sluice::group {

class service {
 public:
  static result<std::unique_ptr<service>> open(cluster::partition_manager& partitions, sluice::clock& clk,
                                               const config::broker_config& cfg);
  ~service();  // stop()s

  // KIP-890 for TxnOffsetCommit: before the coordinator writes a
  // producer's transactional offsets to partition `p` of
  // __consumer_offsets, the producer's transaction coordinator confirms
  // that partition is in its ongoing transaction, calling `done` once
  // (on any thread) with its word; an error refuses the write
  // (errc::transaction_abortable: not in it; others: the coordinator could
  // not tell, retriable). Set before start(); unset, the write is not
  // verified.
  using txn_verifier =
      std::function<void(const txn_producer& producer, int32_t p, std::function<void(errc)> done)>;
  void set_txn_verifier(txn_verifier v) { verify_txn_ = std::move(v); }

  void start();
  void stop();  // idempotent
  group::coordinator& coordinator() { return *coord_; }
  // In a cluster: this broker started (true) or stopped leading partition
  // `p` of __consumer_offsets. Stopping unloads its groups at once, on the
  // calling thread (NOT_COORDINATOR from then on: another broker may take
  // their commits now); starting queues the load for the service thread,
  // which loads only if this broker still leads `p` then. Any thread.
  void on_leadership(int32_t p, bool leads);
  // In a cluster: this broker stops leading everything (shutdown, after
  // partition_manager::stop_leading, which tells no listener): every
  // partition is unloaded at once, so nothing is answered from memory
  // while the others take the groups over. Any thread.
  void resign();

 private:
  class partition_log;
  service(cluster::partition_manager& partitions, sluice::clock& clk, coordinator_config cfg);
  void post(std::function<void()> fn);
  void run();
  void load();
  bool stopping();  // takes mu_

  cluster::partition_manager& partitions_;
  const bool cluster_;  // leadership of __consumer_offsets partitions moves
  std::set<int32_t> led_;  // partitions loaded as their leader; the service thread only
  sluice::clock& clk_;
  const coordinator_config cfg_;
  std::unique_ptr<partition_log> log_;
  txn_verifier verify_txn_;
  std::unique_ptr<group::coordinator> coord_;

  std::mutex mu_;  // guards queue_, stopping_
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sluice::group
