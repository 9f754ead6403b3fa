#pragma once

// The active controller: how a broker becomes the controller, and every
// metadata write the controller makes, each an etcd transaction that holds
// only while this broker still is the controller (fencing). The decisions
// themselves are placement.h's and election.h's; this class reads the
// metadata_image the broker follows, asks them, and writes the answer.
// docs/metadata_format.md lists the keys; docs/controller.md the rules.
//
// Fencing. campaign() creates the controller key under the broker's
// session lease only if it is absent; the key's create revision is the
// controller epoch. Every write compares the controller key's create
// revision with that epoch, so a controller that was deposed (its lease
// expired while it was paused or cut off, and another broker won) can
// change nothing: its transaction fails, it sees another's key, steps
// down, and answers errc::not_controller. Each write also compares the
// mod revision of every record it replaces with the one in the image it
// decided over (errc::invalid_update_version when one moved on: the
// caller retries once its image has caught up).
//
// Atomicity over many partitions. etcd bounds the operations of one
// transaction (128 by default), so a topic's partition records are written
// in chunks before its topic record, the commit point: followers ignore
// partition records whose topic id no topic record has. A controller that
// dies between the chunks leaves such orphans; reconcile() deletes them.
// A topic is deleted by removing its topic record and all its partition
// records in one transaction (one ranged delete).
//
// Errors: not_controller (this broker is not, or no longer, the
// controller), invalid_update_version (a record changed since the image was
// read), unavailable (etcd did not answer: the write may or may not have
// applied; the caller learns which from its watch and decides again), the
// decisions' own errors (invalid_replication_factor,
// invalid_replica_assignment, ...), already_exists / not_found for topics.
//
// Thread safety: none; the broker calls it from the one thread that also
// applies the watch to the image, so decisions and image never race.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/limits.h"
#include "controller/election.h"
#include "controller/metadata_image.h"
#include "controller/placement.h"
#include "controller/records.h"
#include "etcd/client.h"

namespace sluice::controller {

// A leader's ISR change (Kafka's AlterPartition), written by the leader
// itself rather than through the controller: validate_isr_change over `img`
// (this broker's image) with the live brokers as the eligible ones, then
// one transaction that holds only while the partition record is the one
// `img` shows (its mod revision), so a leader deposed meanwhile, or one
// paused while the controller moved on, changes nothing
// (errc::invalid_update_version). The controller's own writes compare the
// same revision, so an election and an ISR change never both apply. Each
// member the change adds must come with the broker epoch the leader saw it
// fetch with (`added_broker_epochs`, KIP-903), and the transaction also
// holds only while that is still the broker's registration (the mod
// revision of its key): a broker that restarted since, and may have lost
// what it had not synced, is not added on its earlier process's word.
// Errors: validate_isr_change's, not_found (no such partition),
// ineligible_replica (an added member without a broker epoch),
// invalid_update_version (the partition changed, or an added broker
// registered again), unavailable (etcd; may have applied).
status write_isr_change(etcd::client& etcd, const metadata_image& img, const std::string& topic,
                        int32_t partition, int32_t requester, int32_t leader_epoch, int32_t partition_epoch,
                        const std::vector<int32_t>& new_isr,
                        const std::map<int32_t, int64_t>& added_broker_epochs);

// One ISR change of a batch: the arguments of write_isr_change but the
// requester's.
struct isr_change {
  std::string topic;
  int32_t partition = 0;
  int32_t leader_epoch = 0;
  int32_t partition_epoch = 0;
  std::vector<int32_t> isr;
  std::map<int32_t, int64_t> added_broker_epochs;
};

// Many ISR changes of one leader at once, as Kafka's AlterPartition carries
// many partitions: each is validated as write_isr_change validates it, and
// the valid ones go to etcd together, in transactions of at most `max_ops`
// compares, puts and reads each and `max_bytes` of keys and values (etcd's
// --max-txn-ops and --max-request-bytes). Each change keeps its own
// compares (its partition record's mod revision, the epochs of the members
// it adds), so one refused change must not sink the others: a transaction
// whose compares fail reads, in its else branch, every key it compared;
// the changes whose keys moved are refused (invalid_update_version) and
// the rest go again in the next transaction. Returns one status per change,
// in order, with write_isr_change's errors; an etcd error answers for every
// change of the transaction it failed (unavailable: may have applied).
// Transactions: ceil(valid changes / per-transaction capacity) when nothing
// conflicts, plus one per round of refusals.
std::vector<status> write_isr_changes(etcd::client& etcd, const metadata_image& img, int32_t requester,
                                      const std::vector<isr_change>& changes,
                                      size_t max_ops = limits::isr_txn_max_ops,
                                      size_t max_bytes = limits::isr_txn_max_bytes);

// unclean.leader.election.enable for `topic` as the controller reads it,
// in Kafka's lookup order (KRaft, KAFKA-12670): the topic's own config,
// else the cluster-wide dynamic default (`configs/brokers`), else
// `static_default`, the controller's own setting. A topic the image does
// not hold reads the defaults.
bool unclean_election_enabled(const metadata_image& img, const std::string& topic, bool static_default);

// Whether a batch of changes applied to the image calls for the
// controller's elections (controller::elect_after_broker_change over every
// partition): a broker registered or vanished, the controller changed, or
// unclean.leader.election.enable may have been turned on, that is a topic
// record was written (its configs) or the cluster-wide defaults changed.
// On the last two, an offline partition with a live replica outside its ISR
// is elected uncleanly at once, as Kafka's ZooKeeper controller did on a
// config change (KAFKA-6526, KAFKA-6835); Kafka's KRaft controller instead
// scans for leaderless partitions every unclean.leader.election.interval.ms
// (5 minutes). The elections change nothing where nothing calls for it, so
// a change that did not touch the setting costs a scan and no write.
bool elections_due(const std::vector<image_change>& changes);

class controller {
 public:
  // `self`: this broker (id and incarnation), as written in the controller key.
  controller(etcd::client& etcd, key_layout keys, controller_record self);

  // Tries to become the controller under `lease` (this broker's session
  // lease). true when this broker is the controller now (also when it
  // already was: the key holds this incarnation), false when another broker
  // is (active() is then false).
  result<bool> campaign(int64_t lease);
  bool active() const { return epoch_ > 0; }
  // The controller epoch while active() (the key's create revision), else 0.
  int64_t epoch() const { return epoch_; }
  // Forgets being the controller (the session lease was lost, or the image
  // shows another broker's key).
  void step_down() { epoch_ = 0; }
  // The etcd revision of this controller's latest successful write (0:
  // none yet): a reader whose image has reached it sees every write made.
  int64_t last_write_revision() const { return last_write_revision_; }
  // Steps down when `img` shows a controller key that is not this one's.
  void observe(const metadata_image& img);

  // ---- Topics ------------------------------------------------------------
  // Creates a topic of `partitions` partitions and replication factor `rf`
  // placed over the live brokers (or `manual`, checked), with `configs`.
  // Every partition starts led by its first replica, all replicas in sync,
  // epochs 0. Returns the record written.
  result<topic_record> create_topic(const metadata_image& img, const std::string& name, int32_t partitions,
                                    int16_t rf, const std::vector<manual_assignment>* manual,
                                    const config_text& configs);
  // Raises a topic's partition count to `total`, placing the new
  // partitions with the topic's replication factor.
  status add_partitions(const metadata_image& img, const std::string& name, int32_t total,
                        const std::vector<manual_assignment>* manual);
  status delete_topic(const metadata_image& img, const std::string& name);
  status set_topic_configs(const metadata_image& img, const std::string& name, const config_text& configs);
  status set_broker_configs(const metadata_image& img, const config_text& configs);
  // Replaces one group's configs (configs/groups/<id>); empty deletes the
  // record. Compares the record's revision in `img`, so two changes of one
  // group made over the same image cannot both apply
  // (errc::invalid_update_version). A group that has no record yet is
  // refused (errc::invalid_config) once limits::max_groups_with_configs
  // groups have one.
  status set_group_configs(const metadata_image& img, const std::string& group, const config_text& configs);

  // ---- Leadership ----------------------------------------------------------
  // How many partitions a call changed, and how.
  struct election_report {
    int32_t changed = 0;
    int32_t clean = 0;
    int32_t unclean = 0;
    int32_t offline = 0;
  };
  // Whether unclean leader election is allowed for a topic (its config, or
  // the broker default).
  using unclean_policy = std::function<bool(const std::string& topic)>;
  // After brokers registered or vanished: every partition's election
  // (election.h's on_brokers_changed) over the live brokers of `img`.
  result<election_report> elect_after_broker_change(const metadata_image& img, const unclean_policy& unclean);
  // Broker `leaving` shuts down: leadership moves off it first.
  result<election_report> controlled_shutdown(const metadata_image& img, int32_t leaving);
  // Preferred leader election for `partitions` (topic, index), or for every
  // partition when empty.
  result<election_report> elect_preferred(const metadata_image& img,
                                          const std::vector<std::pair<std::string, int32_t>>& partitions);
  // Elections an operator asked for (ElectLeaders): election.h's
  // elect_on_request for each of `partitions`, or for every partition when
  // `partitions` is null, and one write of the changes. Each partition's
  // outcome comes back in the order asked (every partition: image order):
  // ok when its leadership moved, not_found when the topic or partition
  // does not exist, else elect_on_request's reason. The write's own errors
  // (not_controller, invalid_update_version, unavailable) fail the call.
  struct election_outcome {
    std::string topic;
    int32_t partition = 0;
    status result;
  };
  struct requested_elections {
    std::vector<election_outcome> outcomes;
    election_report report;
  };
  result<requested_elections> elect_on_request(const metadata_image& img, requested_election kind,
                                               const std::vector<std::pair<std::string, int32_t>>* partitions);
  // Leaders this controller has elected (written), over its lifetime: from
  // the ISR (clean) and from outside it (unclean). Any thread may read
  // them (the broker's /metrics).
  uint64_t clean_elections_total() const { return clean_elections_total_.load(std::memory_order_relaxed); }
  uint64_t unclean_elections_total() const { return unclean_elections_total_.load(std::memory_order_relaxed); }

  // Deletes partition records no topic record owns (a creation cut short
  // by an earlier controller): those written before this controller's
  // epoch whose topic record is absent, of another topic id, or shorter.
  // Called once the image has caught up with the epoch.
  result<int32_t> remove_orphans(const metadata_image& img);

 private:
  struct write {
    std::vector<etcd::compare> compares;
    std::vector<etcd::txn_op> ops;
  };
  // Runs `w` guarded by the controller key; on a failed compare finds out
  // whether this broker was deposed (not_controller, stepping down) or a
  // record moved (invalid_update_version).
  status commit(write w);
  // Partition writes in chunks no larger than etcd allows per transaction.
  status commit_chunks(const std::vector<etcd::compare>& compares, std::vector<etcd::txn_op> ops);
  // Writes each changed partition (its mod revision compared), in chunks.
  using partition_decision = std::function<std::optional<partition_change>(
      const std::string& topic, const partition_assignment& a, const partition_state& s)>;
  result<election_report> decide_partitions(const metadata_image& img,
                                            const std::vector<std::pair<std::string, int32_t>>* only,
                                            const partition_decision& decide);
  status check_active() const;

  etcd::client& etcd_;
  const key_layout keys_;
  const controller_record self_;
  int64_t epoch_ = 0;
  int64_t last_write_revision_ = 0;
  std::atomic<uint64_t> clean_elections_total_{0};
  std::atomic<uint64_t> unclean_elections_total_{0};
};

}  // namespace sluice::controller
