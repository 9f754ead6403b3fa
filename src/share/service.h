#pragma once

// Share groups as the broker runs them (docs/share_groups.md): three roles,
// one service.
//
//  * Group coordinator (for groups whose __consumer_offsets partition is led
//    here, as for classic groups): membership, heartbeats and assignments
//    (share/membership.h).
//  * Share-partition leader (for topic partitions led here): each share
//    group's share_partition of them (share/share_partition.h), loaded from
//    the share coordinator on first use, acquiring records for ShareFetch,
//    taking acknowledgements, expiring locks, and writing its whole state to
//    the share coordinator after every change; an answer waits until the
//    change it carries is durable.
//  * Share coordinator (for partitions of __share_group_state led here): the
//    durable state of share partitions (share/coordinator.h), written to and
//    replayed from __share_group_state.
//
// A share partition is tied to its topic partition's leadership: it is
// dropped (its locks forgotten, its records offered again by the next
// leader, counts kept) when this broker stops leading the topic partition or
// leads it at another leader epoch.
//
// Lifecycle: open() (creates __share_group_state on a single broker),
// start() (a thread loads the coordinator partitions led here, then ticks:
// lock expiry, member sessions), stop().
//
// Thread safety: every public method may be called from any thread between
// start() and stop(); one mutex guards the state. Callbacks run on the
// calling thread or on the thread an append completed on, never under the
// mutex.

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
#include "base/keyed_workers.h"
#include "base/result.h"
#include "base/types.h"
#include "config/dynamic.h"
#include "protocol/codec.h"
#include "protocol/error_code.h"
#include "share/coordinator.h"
#include "share/membership.h"
#include "share/share_partition.h"

namespace sluice::cluster {
class internal_log;
class partition;
class partition_manager;
}  // namespace sluice::cluster
namespace sluice::config {
struct broker_config;
}

namespace sluice::share {

// share.auto.offset.reset: where a share partition seen for the first time
// starts.
enum class offset_reset : int8_t { latest, earliest, by_duration };

// A share group's settings: the broker's group.share.* defaults with the
// group's own share.* overrides (GROUP config resources) applied.
struct group_settings {
  settings partition;
  offset_reset reset = offset_reset::latest;
  int64_t reset_duration_ms = 0;  // by_duration: the first record no older than this
  bool read_committed = false;  // share.isolation.level
  // errors.deadletterqueue.topic.name (KIP-1191): where archived records go.
  std::optional<std::string> dead_letter_topic;
  bool dead_letter_copy_record = false;  // errors.deadletterqueue.copy.record.enable
  // share.session.timeout.ms and share.heartbeat.interval.ms; 0: the
  // broker's group.share.* (membership_settings).
  int32_t session_timeout_ms = 0;
  int32_t heartbeat_interval_ms = 0;
};

struct service_config {
  membership_settings membership;
  group_settings defaults;
  int32_t state_partitions = 0;
  static service_config from(const config::broker_config& b);
};

// The topic configs __share_group_state is created with when it gets
// `replicas` replicas: compacted, and share.coordinator.state.topic.min.isr
// as its min.insync.replicas, at most `replicas`.
std::vector<config::config_entry> share_state_configs(const config::broker_config& b, int32_t replicas);

// One partition of a ShareFetch or ShareAcknowledge.
struct partition_request {
  sluice::topic_id topic_id{};
  int32_t partition = 0;
  std::vector<ack_batch> acks;
};

// Its answer.
struct partition_answer {
  sluice::topic_id topic_id{};
  int32_t partition = 0;
  kafka::error_code error = kafka::error_code::none;
  std::string message;
  kafka::error_code ack_error = kafka::error_code::none;
  std::string ack_message;
  int32_t leader_id = -1;
  int32_t leader_epoch = -1;
  // The batches holding the acquired records: regions of the log's files,
  // sent as they are (sendfile), each keeping its file open.
  std::vector<protocol::file_region> records;
  std::vector<acquired_range> acquired;
};

// Another broker, as the share service reaches it in a cluster: its share
// coordinator (the state APIs 83-86) and, for dead letters, its partitions.
// Blocking calls, each made on the service's worker thread for that broker
// (base/keyed_workers.h), so one slow broker holds up only its own work.
class remote_brokers {
 public:
  virtual ~remote_brokers() = default;
  // ReadShareGroupState: nullopt when the share partition has no state.
  virtual result<std::optional<share_snapshot>> read_state(int32_t broker, const share_key& k, int32_t leader_epoch) = 0;
  // InitializeShareGroupState at `state_epoch`, starting at `start_offset`.
  virtual status initialize_state(int32_t broker, const share_key& k, int32_t state_epoch, int64_t start_offset) = 0;
  // WriteShareGroupState: the whole state, committed there when ok.
  virtual status write_state(int32_t broker, const share_key& k, int32_t state_epoch, int32_t leader_epoch,
                             const durable_state& d) = 0;
  virtual status delete_state(int32_t broker, const share_key& k) = 0;
  // Produce (acks=all) of one idempotent batch to `topic`-`partition` at
  // its leader `broker`.
  virtual status produce(int32_t broker, const std::string& topic, int32_t partition, std::vector<uint8_t> batch) = 0;
};

class service {
 public:
  using answer_fn = std::function<void(std::vector<partition_answer>)>;
  // The settings of a group (its overrides over the defaults). Unset: the
  // defaults for every group.
  using group_settings_fn = std::function<group_settings(const std::string& group_id, const group_settings& defaults)>;

  static result<std::unique_ptr<service>> open(cluster::partition_manager& partitions, sluice::clock& clk,
                                               const config::broker_config& cfg, int32_t node_id);
  ~service();  // stop()s

  void set_group_settings(group_settings_fn fn) { group_settings_ = std::move(fn); }
  // In a cluster, before start(): how share partitions reach the share
  // coordinators and dead-letter partitions of other brokers.
  void set_remote(std::unique_ptr<remote_brokers> r) { remote_ = std::move(r); }
  void start();
  void stop();  // idempotent
  // In a cluster: this broker started or stopped leading partition `p` of
  // __share_group_state.
  void on_leadership(int32_t p, bool leads);

  // ---- Group coordinator ----------------------------------------------------
  heartbeat_answer heartbeat(const heartbeat_request& req);
  std::optional<group_view> describe(const std::string& group_id);
  std::vector<std::string> list_groups();
  bool is_share_group(const std::string& group_id);
  // DeleteGroups: an empty group goes, with the state of its share
  // partitions held here.
  kafka::error_code delete_group(const std::string& group_id);

  // ---- Group coordinator: the admin offset APIs (90-92) ------------------
  // Each runs on the share coordinators of the keys' states (this broker's
  // or, in a cluster, another's on its worker) and calls `done` once with
  // an answer per key, in the keys' order.
  //
  // A share-partition leader that holds a state in memory learns of a
  // change made here when its next write is fenced (the state epoch moved,
  // or the state is gone), or when a member opens a new share session
  // while it holds no records (fetch's `new_session`): it then reads the
  // state again.
  struct offset_answer {
    share_key key;
    kafka::error_code error = kafka::error_code::none;
    std::string message;
    int64_t start_offset = -1;  // -1: the share partition has no state
    int32_t leader_epoch = -1;
    int64_t lag = -1;  // -1: not known here (no replica of the partition here)
    int64_t in_flight = -1;  // share_in_flight; -1: no state
    int64_t archived = -1;   // durable_state::archived_count; -1: no state
  };
  using offsets_fn = std::function<void(std::vector<offset_answer>)>;
  // The topics a group's share partitions may have state for: those its
  // members subscribed to while this coordinator knew the group
  // (share_groups::topics), and those of the states held here.
  std::vector<std::string> group_topics(const std::string& group_id);
  // AlterShareGroupOffsets and DeleteShareGroupOffsets change only an
  // empty group: share_groups::prepare_admin_change.
  kafka::error_code prepare_admin_change(const std::string& group_id);
  // DescribeShareGroupOffsets: each key's start offset, leader epoch and lag.
  void describe_offsets(std::vector<share_key> keys, offsets_fn done);
  // AlterShareGroupOffsets: each key's state starts again at its start
  // offset, at a new state epoch, with nothing in flight.
  void alter_offsets(std::vector<std::pair<share_key, int64_t>> starts, offsets_fn done);
  // DeleteShareGroupOffsets: the keys' states are deleted (a share
  // partition read later starts at share.auto.offset.reset), and `topics`
  // are forgotten by the group.
  void delete_offsets(const std::string& group_id, const std::vector<std::string>& topics,
                      std::vector<share_key> keys, offsets_fn done);

  // ---- Share-partition leader -----------------------------------------------
  // Applies each partition's acknowledgements, then, when `acquire`,
  // acquires for `member` up to `max_records` records (0: no limit) in at
  // most `max_bytes` of batches, over the partitions in order. `done` runs
  // once, when every change made is durable (or failed). `new_session`: the
  // fetch opens a share session, so a share partition holding no records
  // is read again from its share coordinator first (an admin change may
  // have reset it).
  void fetch(const std::string& group_id, const std::string& member_id, std::vector<partition_request> parts,
             bool acquire, int32_t max_records, int32_t max_bytes, answer_fn done, bool new_session = false);
  // A member's share session ended (closed, replaced or evicted): the
  // records it holds in `parts` are offered again.
  void release(const std::string& group_id, const std::string& member_id,
               const std::vector<std::pair<sluice::topic_id, int32_t>>& parts);
  // The lock duration answered in ShareFetch for `group_id`.
  int32_t lock_duration_ms(const std::string& group_id);

  // ---- Share coordinator (the state APIs, from other brokers' leaders) ------
  result<std::optional<share_snapshot>> state_read(const share_key& k, int32_t leader_epoch);
  // `done` runs once, when the change is committed (or failed).
  void state_initialize(const share_key& k, int32_t state_epoch, int64_t start_offset, std::function<void(status)> done);
  void state_write(const share_key& k, int32_t state_epoch, int32_t leader_epoch, const durable_state& d,
                   std::function<void(status)> done);
  void state_delete(const share_key& k, std::function<void(status)> done);

  struct figures {
    size_t groups = 0;
    size_t members = 0;
    size_t share_partitions = 0;  // led here
    int64_t acquired = 0;
    int64_t archived_total = 0;
    int64_t dead_letters_total = 0;
    size_t states = 0;  // held as coordinator
  };
  figures current_figures();

 private:
  struct entry;
  struct fetch_job;
  service(cluster::partition_manager& partitions, sluice::clock& clk, service_config cfg, int32_t node_id);
  void run();
  void load_partition(int32_t p);
  group_settings settings_for(const std::string& group_id);
  std::optional<topic_info> lookup_topic(const std::string& name);
  // The broker that coordinates `key`'s state (this one on a single
  // broker); -1 when __share_group_state has no leader now.
  int32_t coordinator_of(const share_key& key);
  // Where a share partition seen for the first time starts
  // (share.auto.offset.reset).
  int64_t reset_point(cluster::partition& part, const group_settings& gs);
  // Calls `ready` with the entry of `key` for the topic partition `part`
  // as led now, loaded from (or initialised at) its share coordinator when
  // new: at once (in `after`) when it is here or the coordinator is this
  // broker, else once the coordinator has answered (on its worker). Under mu_.
  void with_entry_locked(const share_key& key, const std::shared_ptr<cluster::partition>& part,
                         std::function<void(result<std::shared_ptr<entry>>)> ready,
                         std::vector<std::function<void()>>& after, bool reload_if_idle = false);
  // The admin offset APIs' work on one key at its share coordinator.
  enum class admin_op { describe, alter, remove };
  struct admin_job;
  void admin_run(admin_op op, std::vector<std::pair<share_key, int64_t>> keys, offsets_fn done);
  void admin_one(admin_op op, const std::shared_ptr<admin_job>& job, size_t i);
  // Writes `w` (from this broker's coordinator) and answers key i of `job`.
  void admin_append_locked(const std::shared_ptr<admin_job>& job, size_t i, const share::state_write& w,
                           std::vector<std::function<void()>>& after);
  // Fills the start offset, leader epoch and lag of an answer from a state.
  void fill_offsets(offset_answer& a, const std::optional<share_snapshot>& s);
  // An entry whose state is at another broker's coordinator: loads it there.
  void load_remote(const std::shared_ptr<entry>& e);
  // One partition of a fetch, once its entry is ready.
  void fetch_partition(const std::shared_ptr<fetch_job>& job, size_t i, result<std::shared_ptr<entry>> r);
  // Appends a coordinator record and calls `done` once committed.
  void append_state(const share::state_write& w, std::function<void(status)> done);
  void drop_locked(const share_key& key, status why, std::vector<std::function<void()>>& after);
  // Coordinator partition `cp` could not append (memory is ahead of the
  // log, share/coordinator.h): unloaded, and loaded again from the log.
  void reload_locked(int32_t cp);
  // Writes the entry's state if it changed since its last write.
  void persist_locked(const std::shared_ptr<entry>& e, std::vector<std::function<void()>>& after);
  void written(const std::shared_ptr<entry>& e, uint64_t version, status s);
  void note_archived_locked(const std::shared_ptr<entry>& e, const std::vector<archived_record>& archived);
  // Writes the entry's pending dead letters (those whose archiving is
  // durable) to the group's dead-letter topic, one batch at a time.
  void write_dead_letters_locked(const std::shared_ptr<entry>& e, std::vector<std::function<void()>>& after);
  void dead_letters_written(const std::shared_ptr<entry>& e, int32_t last_sequence, status s);
  void tick();

  cluster::partition_manager& partitions_;
  sluice::clock& clk_;
  service_config cfg_;
  const int32_t node_id_;
  const bool cluster_;
  std::unique_ptr<cluster::internal_log> log_;
  group_settings_fn group_settings_;
  std::unique_ptr<remote_brokers> remote_;
  keyed_workers<int32_t> workers_;

  std::mutex mu_;
  share_groups groups_;
  coordinator coord_;
  std::map<share_key, std::shared_ptr<entry>> entries_;
  int64_t archived_total_ = 0;
  int64_t dead_letters_total_ = 0;

  std::mutex run_mu_;
  std::condition_variable run_cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sluice::share
