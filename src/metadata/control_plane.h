#pragma once

// This broker's part in the cluster's control plane (docs/controller.md,
// "The control plane"): it registers the broker in etcd under a session
// lease, follows the cluster's metadata into a metadata_image, runs for
// controller whenever there is none, and while it is the controller makes
// the elections that brokers coming and going, or unclean leader election
// being turned on, call for. Message traffic
// never passes here; only metadata does.
//
// One thread, the metadata thread, does all of it in order: it applies the
// watch's events to the image, then lets the controller decide over the
// image it just built, then tells the listeners (partition manager,
// metadata cache) what changed, then runs the admin operations submitted
// to the controller. Decisions and the image therefore never race, and
// listeners see changes in revision order.
//
// Failures:
//   - etcd unreachable: the image stays as it was (brokers keep serving what
//     they lead); campaigns and admin operations fail with errc::unavailable;
//     the watch resumes where it stopped when etcd is back.
//   - the session lease lost (this broker was silent longer than
//     sluice.etcd.session.timeout.ms, or etcd was away that long): the
//     broker is dead to the cluster; it stops being the controller at once,
//     and registers again under a new lease as soon as etcd answers.
//   - another live broker registered with this node.id: start() refuses.
//
// Thread safety: every public method is thread-safe. Listeners and
// submitted operations run on the metadata thread and must not block on
// other metadata work (they may read the image they are given).

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "controller/controller.h"
#include "controller/metadata_image.h"
#include "etcd/client.h"
#include "etcd/lease_keeper.h"
#include "partition/replica_tracker.h"
#include "replication/leadership_gate.h"

namespace sluice::cluster {

class control_plane {
 public:
  struct options {
    int32_t node_id = -1;
    // unclean.leader.election.enable of the broker (its static setting),
    // for topics when neither the topic nor the cluster-wide dynamic
    // default in etcd sets it.
    bool unclean_default = false;
    std::optional<std::string> rack;
    std::string prefix = "/sluice/";
    int64_t session_timeout_ms = 10'000;
    // The cluster id to create when etcd holds none yet.
    std::string new_cluster_id;
    // The controller creates the group coordinator's __consumer_offsets
    // when it does not exist: this many partitions, min(replication
    // factor, live brokers) replicas, with these configs. 0 partitions:
    // not at all.
    int32_t offsets_partitions = 0;
    // auto.leader.rebalance.enable: every leader_imbalance_check_interval_ms
    // the controller gives partitions back to their preferred leaders on
    // brokers whose share of lost leaderships is above the percentage.
    bool auto_leader_rebalance = true;
    int32_t leader_imbalance_percentage = controller::default_leader_imbalance_percentage;
    int64_t leader_imbalance_check_interval_ms = 300'000;
    int16_t offsets_replication_factor = 3;
    controller::config_text offsets_configs;
    // Likewise the transaction coordinator's __transaction_state
    // (transaction.state.log.*).
    int32_t txn_partitions = 0;
    int16_t txn_replication_factor = 3;
    controller::config_text txn_configs;
    // __share_group_state, as share.coordinator.state.topic.* lays it out.
    int32_t share_state_partitions = 0;
    int16_t share_state_replication_factor = 3;
    controller::config_text share_state_configs;
  };

  // Grants the session lease, creates or reads the cluster id, checks that
  // no live broker holds this node id (errc::already_exists, naming it),
  // reads the whole metadata and starts following it. The broker is not
  // registered yet: register_broker() does that once it can serve.
  static result<std::unique_ptr<control_plane>> start(etcd::client& etcd, const sluice::clock& clk, options opts);
  ~control_plane();

  // Registers this broker (its advertised endpoint) under the session
  // lease; from then on it is live to the cluster and runs for controller.
  status register_broker(const std::string& host, int32_t port);

  const std::string& cluster_id() const { return cluster_id_; }
  int32_t node_id() const { return opts_.node_id; }
  // This broker's broker epoch (Kafka's, KIP-903): the etcd mod revision of
  // its current registration as its image shows it, new at every
  // registration (a restart, a lost session). -1 until the image shows a
  // registration of this process. Followers send it with every fetch.
  int64_t broker_epoch() const;

  // Reads the image under the lock: `fn` must be quick.
  template <class F>
  auto with_image(F&& fn) const {
    std::lock_guard g(image_mu_);
    return fn(image_);
  }
  // The image's revision (what this broker has applied).
  int64_t revision() const;
  bool is_controller() const;
  // Whether this broker's view of the cluster (what Metadata answers from
  // the metadata cache) is known to be current:
  //   - it is registered under a session lease that is certainly alive
  //     (granted or renewed less than a TTL ago by this process's clock),
  //     and
  //   - its listeners have applied the metadata up to the revision of its
  //     latest registration.
  // False just after a resume from SIGSTOP or a network cut that outlasted
  // the session: the controller has moved this broker's leaderships
  // meanwhile, and the image does not show it yet (the lease keeper's
  // thread may not even have run). A client told the old leaders then
  // could flip back and forth between two leaders (librdkafka before 2.1
  // ignores leader epochs, and can be left stuck on the wrong broker).
  // Any thread; lock-free.
  bool view_current() const;
  // Whether what this broker holds from the cluster may be acted on: its
  // session is not lost (session_lost, which an etcd without a quorum does
  // not count) and its metadata is applied up to its latest registration.
  // Unlike view_current it holds through an etcd quorum loss longer than
  // the session (nobody can expire this broker's lease or take its
  // partitions meanwhile), so the group coordinator, which needs no etcd,
  // keeps serving then; it fails, as view_current does, for a broker back
  // from a pause or a cut that outlasted its session. Any thread; lock-free.
  bool view_trusted() const;
  // Whether this broker, once registered, may have lost its session: the
  // lease keeper declared the lease lost, or no renewal succeeded within a
  // TTL by this process's clock (etcd may have expired it and deleted the
  // registration), and it has not registered again since. The cluster
  // then counts it dead and elects other leaders for its partitions, so
  // meanwhile it must not claim to be the controller or a leader (Metadata
  // answers neither) nor take writes as one (Produce answers
  // NOT_LEADER_OR_FOLLOWER). False before the first registration, and
  // false while an etcd member it reaches answers that it knows no leader
  // (etcd::client::leaderless_within, over the last session timeout): etcd
  // has lost its quorum, so nobody can expire the lease or elect another
  // leader meanwhile. A broker that reaches only members of a minority
  // while a majority elsewhere has a quorum sees the same; it cannot tell
  // them apart, and its partitions decide by their followers (standing(),
  // in_doubt; docs/controller.md, "Failures"). Any thread.
  bool session_lost() const;
  // Where this broker's session stands (leadership_gate.h):
  //   - lost: session_lost(), or registered again but the metadata up to
  //     that registration not applied yet (!view_trusted()): what the
  //     image says this broker leads cannot be acted on;
  //   - in_doubt: registered, no renewal confirmed within a TTL, and an
  //     etcd member it reaches answered that it knows no leader (within the
  //     last session timeout). Either etcd lost its quorum (nobody can
  //     expire the lease or elect meanwhile, and the leaderships hold) or
  //     this broker reaches only a minority while the majority expired its
  //     lease and elected other leaders; it cannot tell which, so each
  //     partition it leads decides by its followers (leadership_gate);
  //   - live: otherwise (and always before the first registration).
  // Any thread; lock-free.
  session_standing standing() const;
  // Called once each time the session is found lost (on the lease
  // keeper's thread), so waiting acks=all produces are answered at once
  // rather than time out. Must be quick and must not call back into the
  // control plane. Register before register_broker().
  void on_session_lost(std::function<void()> fn);
  // For /metrics; any thread. How many controllers (controller epochs)
  // this broker's image has shown one after another, the first included;
  // and the leaders elected while this broker was the controller.
  uint64_t controller_changes_total() const { return controller_changes_total_.load(std::memory_order_relaxed); }
  uint64_t clean_elections_total() const { return controller_->clean_elections_total(); }
  uint64_t unclean_elections_total() const { return controller_->unclean_elections_total(); }
  // ISR changes this broker wrote as a leader: removals and additions.
  uint64_t isr_shrinks_total() const { return isr_shrinks_.load(std::memory_order_relaxed); }
  uint64_t isr_expands_total() const { return isr_expands_.load(std::memory_order_relaxed); }

  // Called on the metadata thread after each applied batch of changes,
  // with the image and what changed. Register before register_broker():
  // the thread applies nothing before it, so a listener misses no change
  // after the image the broker opened its partitions from.
  using listener = std::function<void(const controller::metadata_image&,
                                      const std::vector<controller::image_change>&)>;
  void on_change(listener fn);

  // Runs `op` on the metadata thread as the controller, then waits until
  // this broker's image has caught up with etcd as of the op's end, so the
  // caller reads what it wrote. errc::not_controller when this broker is
  // not the controller; `timeout_ms` bounds the whole wait
  // (errc::unavailable): an op not started by then never runs, so `op` may
  // capture the caller's locals by reference. (One already running is
  // waited for, past the timeout: it cannot be stopped halfway.)
  using controller_op = std::function<status(controller::controller&, const controller::metadata_image&)>;
  status submit(controller_op op, int64_t timeout_ms);

  // A leader's ISR change (controller::write_isr_changes), made on the
  // metadata thread over its image together with the others queued;
  // returns at once. The outcome shows as
  // a state change through the watch, or, refused, as none (logged): the
  // leader proposes again at its next upkeep.
  void request_isr_change(isr_request c);

  // Reserves `count` producer ids for this broker in etcd (the
  // producer_ids key, advanced by compare-and-swap) and returns the first.
  // errc::unavailable when etcd does not answer. Any thread; it waits on
  // etcd, so not an I/O thread.
  result<int64_t> reserve_producer_ids(int64_t count);

  // Controlled shutdown: when this broker is the controller, it moves
  // leadership off itself; otherwise leaves it to the controller, which
  // does it when the registration goes. Then deregisters (revokes the
  // lease) and stops the thread. Returns how the controlled shutdown went
  // (ok when this broker was not the controller, or it moved leadership
  // off itself); a failure is also logged: the other brokers then elect
  // once the registration is gone, a session timeout later at most.
  // Idempotent: a second call returns ok.
  status shutdown();

 private:
  control_plane(etcd::client& etcd, const sluice::clock& clk, options opts);
  status init();
  void run();
  void on_watch(const etcd::watch_update& u);
  // The metadata thread's steps.
  // Applies the queued watch updates; returns what changed.
  std::vector<controller::image_change> apply_pending(std::deque<etcd::watch_update> updates);
  // Reads everything again (after a compaction lost events) and watches on.
  std::vector<controller::image_change> reload();
  status start_watch(int64_t from_revision);
  // `elections_due`: the changes just applied call for elections
  // (controller::elections_due).
  void decide(bool elections_due);
  // As the controller: creates __consumer_offsets and __transaction_state
  // if they are missing (ensure_internal_topic).
  void ensure_internal_topic(const std::string& name, int32_t partitions, int16_t replication_factor,
                             const controller::config_text& configs);
  // As the controller, when the interval has passed: preferred elections
  // where leadership is out of balance (auto.leader.rebalance.enable).
  void rebalance_if_due();
  bool unclean_allowed(const std::string& topic) const;
  void run_ops();
  // Writes the queued ISR changes in batches (controller::write_isr_changes,
  // a few transactions per limits::isr_changes_per_round); stops early (the
  // rest stay queued) once the session is lost or the broker stops, since
  // renewing the session, or stopping, must not wait behind them.
  void run_isr_changes();
  void write_isr_round(const std::vector<isr_request>& round);
  void renew_session();
  status grant_lease();
  // Returns the revision of the registration's write.
  result<int64_t> put_registration();

  etcd::client& etcd_;
  const sluice::clock& clk_;
  const options opts_;
  const controller::key_layout keys_;
  std::string cluster_id_;
  std::string incarnation_;
  std::unique_ptr<controller::controller> controller_;

  mutable std::mutex image_mu_;
  controller::metadata_image image_;  // guarded by image_mu_; written by the metadata thread

  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::deque<etcd::watch_update> updates_;
  // An op may hold references into its caller's frame, so it runs only
  // while the caller waits: a caller that times out before the op started
  // abandons it (it never runs); one that times out while it runs waits
  // for it to end.
  struct pending_op {
    controller_op op;
    bool started = false;
    bool ran = false;
    bool abandoned = false;
    bool done = false;
    status result;
    int64_t until_revision = 0;
  };
  std::deque<std::shared_ptr<pending_op>> ops_;
  // Keyed by partition: a newer proposal replaces one not yet written
  // without a scan (a leader of thousands re-proposes each every second
  // until etcd shows it).
  std::map<std::pair<std::string, int32_t>, isr_request> isr_changes_;
  std::vector<std::shared_ptr<pending_op>> waiting_;  // done, waiting for the image
  std::vector<listener> listeners_;
  std::vector<std::function<void()>> lost_listeners_;
  bool stopping_ = false;
  bool lease_lost_ = false;
  bool registered_ = false;
  bool watch_broken_ = false;  // compacted: re-read everything
  bool was_controller_ = false;   // metadata thread only
  bool election_due_ = false;     // metadata thread only: retry after a conflict
  int64_t controller_since_ms_ = 0;  // metadata thread only
  int64_t next_rebalance_ms_ = 0;    // metadata thread only
  std::string host_;
  int32_t port_ = 0;
  int64_t lease_ = 0;
  std::unique_ptr<etcd::lease_keeper> keeper_;
  std::unique_ptr<etcd::watch_handle> watch_;
  std::thread thread_;
  std::atomic<bool> controller_active_{false};
  // For view_current(): until when the session lease is alive for certain
  // (monotonic ms), whether this broker is registered under a lease not
  // known to be lost, the revision of its latest registration, and the
  // image revision the listeners have seen.
  std::atomic<int64_t> lease_good_until_ms_{0};
  std::atomic<bool> session_live_{false};
  std::atomic<int64_t> registered_revision_{INT64_MAX};
  std::atomic<int64_t> applied_revision_{0};
  std::atomic<uint64_t> isr_shrinks_{0};
  std::atomic<uint64_t> isr_expands_{0};
  int64_t last_controller_epoch_ = 0;  // metadata thread only
  std::atomic<uint64_t> controller_changes_total_{0};
};

}  // namespace sluice::cluster
