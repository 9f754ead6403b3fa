#pragma once

// The transaction coordinator as the broker runs it (docs/transactions.md,
// "Handlers and wiring"): the coordinator's decisions (txn/coordinator.h),
// their records written to and replayed from __transaction_state through the
// broker's partitions, the markers it has the partitions of an ending
// transaction write, and the one thread that runs completions, marker
// retries and the coordinator's timers.
//
// Lifecycle: open() (creates __transaction_state when missing on a single
// broker, laid out by the transaction.state.log.* settings), start() (the thread loads every partition this broker leads,
// then ticks; requests for a partition still loading answer
// COORDINATOR_LOAD_IN_PROGRESS), stop() (joins the thread; requests still
// waiting are dropped with their callbacks; the network server must be
// stopped first).
//
// Markers: a marker for a partition this broker leads is appended here
// (cluster::partition::append_marker) and counts once committed; one
// another broker leads is sent to it as WriteTxnMarkers through
// `send_remote` (set by the broker in a cluster), on a sending thread of
// that broker's, so a slow or unreachable leader holds up only the markers
// it leads. A marker that fails is tried again every
// limits::txn_marker_retry_ms until it lands or its partition is gone;
// then the transaction's completion record is written. The service thread
// never waits for a marker.
//
// Thread safety: every public method may be called from any thread between
// start() and stop(); one mutex serialises the coordinator. Replies run on
// the calling thread (answers at once) or on the service thread.

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "base/clock.h"
#include "base/limits.h"
#include "base/result.h"
#include "config/dynamic.h"
#include "txn/coordinator.h"

namespace sluice::cluster {
class internal_log;
class partition_manager;
}
namespace sluice::config {
struct broker_config;
}

namespace sluice::txn {

// The service's settings, from the broker's transaction.* settings.
struct service_config {
  coordinator_config coordinator;
  // transaction.abort.timed.out.transaction.cleanup.interval.ms: how often
  // coordinator::expire_timed_out runs.
  int64_t abort_interval_ms = limits::default_transaction_abort_interval_ms;
  // transaction.remove.expired.transaction.cleanup.interval.ms: how often
  // coordinator::expire_ids runs.
  int64_t id_removal_interval_ms = limits::default_transactional_id_removal_interval_ms;
  static service_config from(const config::broker_config& b);
};

// The topic configs __transaction_state is created with when it gets
// `replicas` replicas: compacted, max.message.bytes for the largest
// record, transaction.state.log.segment.bytes, and
// transaction.state.log.min.isr as its min.insync.replicas, but at most
// `replicas` (with fewer in-sync replicas than that no record could be
// written, so no transaction could run).
std::vector<config::config_entry> transaction_state_configs(const config::broker_config& b, int32_t replicas);

class service {
 public:
  using reply_fn = std::function<void(const answer&)>;
  // Writes the markers of `m` for `partitions` at their leader `leader`
  // (WriteTxnMarkers); returns each partition's outcome (errc::ok when
  // written and committed there). Blocking; called on the sending thread
  // the service keeps for `leader`, never on the service thread.
  using remote_markers_fn =
      std::function<std::map<topic_partition, errc>(int32_t leader, const markers& m,
                                                    const std::vector<topic_partition>& partitions)>;
  // A marker was committed on a partition of __consumer_offsets: the group
  // coordinator materializes or drops the producer's pending offsets there.
  using offsets_marker_fn =
      std::function<void(int32_t partition, int64_t producer_id, bool commit, int64_t marker_offset)>;

  static result<std::unique_ptr<service>> open(cluster::partition_manager& partitions, sluice::clock& clk,
                                               const config::broker_config& cfg);
  ~service();  // stop()s

  // Set before start().
  void set_remote_markers(remote_markers_fn fn) { send_remote_ = std::move(fn); }
  void set_offsets_marker_listener(offsets_marker_fn fn) { offsets_marker_ = std::move(fn); }

  void start();
  void stop();  // idempotent
  // In a cluster: this broker started or stopped leading partition `p` of
  // __transaction_state (as group::service::on_leadership).
  void on_leadership(int32_t p, bool leads);
  // In a cluster: this broker stops leading everything.
  void resign();

  int32_t partition_for(std::string_view transactional_id) const;
  // The broker that coordinates `transactional_id`: the leader of its
  // partition of __transaction_state as this broker's image shows it; -1
  // when it has none or the topic does not exist yet. In a cluster only.
  int32_t coordinator_of(std::string_view transactional_id) const;
  int32_t num_partitions() const;

  // The requests (txn/coordinator.h's); `reply` runs exactly once.
  void init_producer_id(const init_producer_id_request& req, reply_fn reply);
  void add_partitions(const add_partitions_request& req, reply_fn reply);
  void add_offsets(const add_offsets_request& req, reply_fn reply);
  void end_txn(const end_txn_request& req, reply_fn reply);
  // KIP-890's check before a leader appends a transactional batch.
  verify_answer verify(const std::string& transactional_id, int64_t producer_id, int16_t producer_epoch,
                       const partition_set& partitions);
  describe_answer describe(const std::string& transactional_id);
  list_answer list(const list_filter& filter);
  // The coordinator's figures for /metrics (coordinator::current_figures).
  coordinator::figures figures();

 private:
  class remote_senders;
  // The service thread's queue, shared with every callback that posts to
  // it (a partition's commit, a remote leader's answer): one that comes
  // after stop() finds it stopping and is dropped, whatever became of the
  // service.
  struct mailbox {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> queue;
    bool stopping = false;
    void post(std::function<void()> fn);
  };
  struct marker_job {
    markers m;
    std::set<topic_partition> left;       // not yet written
    std::set<topic_partition> in_flight;  // asked, the answer still to come
    int64_t due_ms = 0;                   // next try of what failed (monotonic)
  };
  service(cluster::partition_manager& partitions, sluice::clock& clk, service_config cfg);
  // Runs a decision: answers now, or appends its write and answers once
  // it is durable. mu_ held.
  void apply_locked(decision d, reply_fn reply);
  void append_locked(write w, reply_fn reply);
  // The write's outcome, on the service thread.
  void on_written(const write_ref& ref, const status& s, const reply_fn& reply);
  void start_markers_locked(markers m);
  // AddPartitionsToTxn and AddOffsetsToTxn answered CONCURRENT_TRANSACTIONS
  // (the id's last transaction completing, or its record in flight) wait,
  // until `deadline_ms` at most, for the id's next write to finish and are
  // asked again then: a producer that begins its next transaction at once
  // is answered when it can be, not told to come back (librdkafka waits
  // 20 ms before it asks again). coord_mu_ held.
  void add_partitions_until(const add_partitions_request& req, reply_fn reply, int64_t deadline_ms);
  void add_offsets_until(const add_offsets_request& req, reply_fn reply, int64_t deadline_ms);
  void park_or_apply_locked(const std::string& transactional_id, decision d, reply_fn reply, int64_t deadline_ms,
                            std::function<void(reply_fn, int64_t)> again);
  // Asks again (on the service thread) what waits for `transactional_id`;
  // every id's when `all`, else the ids with a request past its deadline.
  void wake_locked(const std::string& transactional_id);
  void wake_expired_locked(bool all);
  // Asks for every marker of a due job that is neither written nor asked
  // for (local leaders append it, remote ones are sent WriteTxnMarkers on
  // their sending thread) and writes the completion record of every job
  // whose markers are all written; service thread. Never waits.
  void run_markers();
  // A marker's outcome (ok: written and committed, or refused because a
  // newer epoch or coordinator ended the transaction there); service thread.
  void marker_done(uint64_t job, const topic_partition& tp, bool ok, int64_t local_offset);
  void load_partition(int32_t p);
  void post(std::function<void()> fn);
  void run();
  bool stopping();

  cluster::partition_manager& partitions_;
  const bool cluster_;
  sluice::clock& clk_;
  const coordinator_config cfg_;
  const int64_t abort_interval_ms_;
  const int64_t id_removal_interval_ms_;
  remote_markers_fn send_remote_;
  offsets_marker_fn offsets_marker_;

  std::unique_ptr<cluster::internal_log> log_;
  std::mutex coord_mu_;  // serialises coord_, jobs_, completions_, parked_
  std::unique_ptr<coordinator> coord_;
  std::map<uint64_t, marker_job> jobs_;
  uint64_t next_job_ = 1;
  struct parked {
    int64_t deadline_ms;
    reply_fn reply;
    std::function<void(reply_fn, int64_t)> again;
  };
  std::map<std::string, std::vector<parked>> parked_;  // by transactional id
  size_t parked_count_ = 0;
  // Completion records in flight, by write id: their markers, to try the
  // record again if it fails (coordinator::write_failure::retry_completion).
  std::map<uint64_t, markers> completions_;

  const std::shared_ptr<mailbox> mb_ = std::make_shared<mailbox>();
  std::unique_ptr<remote_senders> senders_;
  std::thread thread_;
};

}  // namespace sluice::txn
