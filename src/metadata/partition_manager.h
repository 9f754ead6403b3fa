#pragma once

// The topics' lifecycle on this broker: the metadata store (what exists),
// the operations that change it (create, delete, add partitions, alter
// configs) and the opening, creation and deletion of the logs of the
// partitions this broker hosts, which it hands to the replica manager
// (replication/replica_manager.h) that serves them. The Kafka handlers go
// through this class for everything about topics; in a cluster it follows
// the controller's decisions (through the etcd store) instead of deciding
// alone.
//
// Thread safety: every method is thread-safe. Lookups go to the store and
// the replica manager, neither of which holds a lock across file I/O;
// changes to the set of topics and to configuration are serialised by
// change_mu_ so that two CreateTopics of one name cannot both succeed and
// every partition ends with the config of the last change. Logs of topics
// created in the background are made by one thread of this class without
// either lock and published one by one (see create_mode).
//
// The broker's configuration is an immutable snapshot replaced as a whole
// by alter_broker_config; broker_config() hands out the current one. Code
// that must see a change reads the snapshot at use (handlers, retention's
// interval) or holds a partition's effective topic config, which the
// change recomputes for every partition (topic overrides win over it).

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "config/broker_config.h"
#include "config/dynamic.h"
#include "metadata/group_configs.h"
#include "metadata/metadata_store.h"
#include "metadata/producer_ids.h"
#include "partition/partition.h"
#include "replication/replica_manager.h"
#include "storage/log_manager.h"

namespace sluice::cluster {

class partition_manager {
 public:
  // Opens the metadata store (`store`, or when null the file-backed
  // topic_table under <data_dir>/meta), opens every partition of every
  // topic (creating logs that are missing) and deletes log directories and
  // producer snapshots of topics that no longer exist (leftovers of an
  // interrupted deletion; a failure to delete them is logged, not returned).
  static result<std::unique_ptr<partition_manager>> open(io::filesystem& fs, sluice::clock& clk,
                                                         std::shared_ptr<const config::broker_config> cfg,
                                                         storage::log_manager& logs,
                                                         std::unique_ptr<metadata_store> store = nullptr);

  // The current snapshot; it does not change under the caller.
  std::shared_ptr<const config::broker_config> broker_config() const;

  // The partition, or nullptr when the topic or partition does not exist
  // or its log is still being created (see create_mode::background).
  std::shared_ptr<partition> get(const std::string& topic, int32_t partition) const;
  // What a request for a partition get() did not return answers:
  // NOT_LEADER_OR_FOLLOWER while the partition is in the topic table but its
  // log is still being created (retriable: clients refresh metadata, which
  // shows LEADER_NOT_AVAILABLE, and retry, as while Kafka elects a leader),
  // UNKNOWN_TOPIC_OR_PARTITION otherwise.
  errc missing_partition_error(const std::string& topic, int32_t partition) const;
  std::optional<topic_info> topic(const std::string& name) const;
  // By topic id (KIP-516); an id of a deleted topic finds nothing.
  std::optional<topic_info> topic_by_id(const topic_id& id) const;
  std::vector<topic_info> topics() const;
  // The store the topics live in, and the partitions this broker hosts.
  const metadata_store& store() const { return *table_; }
  const replica_manager& replicas() const { return *replicas_; }
  replica_manager& replicas() { return *replicas_; }

  // Applies the store's current assignment and state of a partition to the
  // replica this broker hosts (when the store tells of a change: a new
  // leader, epoch or ISR). False when the partition is not hosted here (or
  // its log is being created: it is published with the state of then) or
  // the state is older than the one it holds.
  bool refresh_state(const std::string& topic, int32_t partition);
  // The same for an assignment and state the caller holds (the metadata
  // listener applies them from the image it is handed): read nothing again.
  bool apply_state(const std::string& topic, int32_t partition, const replica_list& replicas,
                   const partition_state& st);

  // For a store that follows a controller (metadata_store::
  // follows_controller, a cluster): the store changed `topic` (created,
  // grown, its configs changed, or deleted). The background thread brings
  // this broker's replicas of it in line: logs created for partitions it
  // now hosts, configs applied, states refreshed, and every log deleted
  // when the topic is gone (or is another topic of the same name now).
  // Returns at once; call it in the store's order of changes.
  void on_store_change(const std::string& topic);
  // The store's cluster-wide broker defaults (metadata_store::
  // broker_defaults, a cluster's etcd) changed: the background thread
  // publishes a snapshot with them, as alter_broker_config does. Returns at
  // once; the metadata thread calls it, which must not wait for
  // change_mu_ (its holders may wait for the metadata thread).
  void on_broker_defaults_change();

  // How create_topic and add_partitions make the new partitions' logs.
  enum class create_mode {
    // Every log exists when the call returns (internal topics, automatic
    // creation with num.partitions): the caller may use them at once.
    wait,
    // The call returns once the topic table records the partitions
    // (durably), as Kafka's CreateTopics returns once the metadata is
    // recorded; one background thread then creates the logs, taking no
    // lock that produce, fetch or metadata wait on for longer than it takes
    // to publish one partition. Until its log exists a partition is
    // "being created" (get() is nullptr, missing_partition_error() says
    // NOT_LEADER_OR_FOLLOWER). A stop or crash before every log exists
    // is finished at the next start: the topic table is the truth.
    background,
  };

  // Creates a topic with `partitions` partitions (-1: num.partitions) and
  // replication factor `replication_factor` (-1: default.replication.factor).
  // Errors carry the errc the Kafka answer maps from (to_kafka_error).
  struct create_error {
    errc code;
    std::string message;
  };
  // `assignment`, when not empty, names each partition's replicas
  // (CreateTopics' explicit assignments; partitions and replication factor
  // then follow from it).
  std::optional<create_error> create_topic(const std::string& name, int32_t partitions,
                                           int16_t replication_factor,
                                           std::span<const config::config_entry> configs,
                                           bool validate_only,
                                           create_mode mode = create_mode::wait,
                                           std::vector<replica_list> assignment = {});
  // Deletes a topic and all its data (partitions still being created are
  // not created). When `deleted` is given it receives the topic as it was
  // (name and id) whenever the topic exists, even if it may not be deleted.
  std::optional<create_error> delete_topic(const std::string& name, topic_info* deleted = nullptr);
  // The same for the topic whose id is `id` (DeleteTopics v6,
  // UNKNOWN_TOPIC_ID when none has it). The id is looked up under the lock
  // that serialises deletions and creations, so a topic deleted and created
  // again under the same name meanwhile is never deleted in place of the
  // one the id named.
  std::optional<create_error> delete_topic_by_id(const topic_id& id, topic_info* deleted = nullptr);
  // Raises the partition count to `total`.
  // `assignment`, when not empty, names the new partitions' replicas.
  std::optional<create_error> add_partitions(const std::string& name, int32_t total,
                                             bool validate_only,
                                             create_mode mode = create_mode::wait,
                                             std::vector<replica_list> assignment = {});
  // Calls `fn` once no log of `topic` waits to be created: at once, on the
  // calling thread, when none does; otherwise on the background thread when
  // the topic's queued work ends (done, cancelled by delete_topic, or cut
  // short by shutdown). `fn` must be quick and must not call back into
  // topic creation.
  void when_created(const std::string& topic, std::function<void()> fn);
  // Blocks until no partition is waiting for the background thread to
  // create its log (tests, tools).
  void wait_for_creations();
  // Replaces a topic's overrides (already validated by config/dynamic.h)
  // and applies them to its partitions.
  status set_topic_overrides(const std::string& name, const config::config_map& overrides);
  // The same as one step: `compute` builds the topic's next overrides from
  // the current broker snapshot and the topic's current overrides, under the
  // lock that serialises changes, so two concurrent alters of one topic
  // cannot lose one another's keys. errc::not_found when the topic does not
  // exist; `compute`'s error unchanged; with `validate_only` nothing changes.
  using topic_overrides_fn = std::function<result<config::config_map>(
      const config::broker_config& broker, const config::config_map& current)>;
  status alter_topic_overrides(const std::string& name, const topic_overrides_fn& compute,
                               bool validate_only);

  // Changes one level of the broker's dynamic configuration:
  // `compute` builds the next snapshot from the current one
  // (config::alter_broker_config or replace_broker_config), under the lock
  // that serialises changes, so two concurrent alters cannot lose one
  // another's keys. Its error is returned unchanged and nothing changes.
  // Unless `validate_only`, the level `cluster_default` names is then
  // persisted (metadata/broker_configs.h; in a cluster the cluster-wide
  // default goes to the store instead, through the controller, and
  // `compute` starts from the store's defaults), the snapshot published, every
  // partition given its recomputed effective topic config, and every
  // listener called, in that order. A failed write changes nothing.
  using broker_config_fn =
      std::function<result<config::broker_config>(const config::broker_config& current)>;
  status alter_broker_config(bool cluster_default, const broker_config_fn& compute,
                             bool validate_only);
  // Called with each new snapshot after it is published (net limits, the
  // group coordinator). Register before the broker serves; a listener runs on
  // the altering thread with the change lock held and must not call back
  // into alter_broker_config or set_topic_overrides.
  void on_broker_config_change(std::function<void(const config::broker_config&)> fn);
  // Calls `fn(topic, partition, leads)` when a hosted partition is
  // published (with its first role) and each time this broker starts or
  // stops leading it, on the thread that made the change (the background
  // creator, the cluster's metadata thread, or the caller of create_topic);
  // no lock of this manager is held. `fn` must be quick (the group
  // coordinator posts the load or unload to its own thread). Register
  // before the broker serves.
  using role_listener = std::function<void(const std::string&, int32_t, bool)>;
  void on_role_change(role_listener fn);
  // Calls `fn` with the topic's name and id after each topic deletion, on
  // the deleting thread and with no lock of this manager held (the group
  // coordinator drops the topic's committed offsets, as Kafka does). The
  // id is all zero when this broker did not know it (a store that follows
  // a controller, whose deletion reached a broker holding no replica of
  // the topic). It may come late, after a topic of the same name was
  // created again, and more than once for one deletion.
  using deleted_listener = std::function<void(const std::string& name, const topic_id& id)>;
  void on_topic_deleted(deleted_listener fn);

  producer_id_allocator& producer_ids() { return *producer_ids_; }

  // ---- Group configs (GROUP config resources, config/group_config.h) ----
  // Kept whether or not the group exists; a single broker's in
  // <data_dir>/meta/group_configs, a cluster's in etcd
  // (metadata/group_configs.h).

  // The lookup the coordinators call (the share service on every request
  // that needs a group's settings): the keys set for `group_id` as typed
  // values (int64_t for the integer keys, std::string, bool), only those;
  // empty when the group has none. A key not set has its inherited value:
  // config::effective_share_group_config(*broker_config(), group_config(id))
  // resolves every share-group key at once. Thread-safe, any thread;
  // cheap: a shared lock and a copy of the group's few values from this
  // broker's cached copy (no I/O, no etcd). In a cluster it shows a change
  // once this broker's metadata image has it (on the broker that made the
  // change, when the alter returns).
  config::config_map group_config(std::string_view group_id) const { return group_configs_.get(group_id); }
  // Every group's configs (DescribeConfigs, tests).
  config::group_config_table group_configs() const { return group_configs_.all(); }
  // Changes one group's configs: `compute` builds the next set from the
  // broker snapshot and the group's current configs (config::
  // alter_group_configs or replace_group_configs); its error is returned
  // unchanged and nothing changes. Unless `validate_only`, the result is
  // then persisted and published to group_config(): on a single broker
  // written to the local file, then set in the copy; in a cluster written
  // to the store through the controller (errc::not_controller on another
  // broker), which returns once this broker's metadata listener has applied
  // it to the copy. Changes of group configs are serialised
  // among themselves, not with topic changes. Errors: compute's,
  // errc::invalid_config when a new group would exceed
  // limits::max_groups_with_configs or the file its bound, the store's.
  using group_configs_fn = std::function<result<config::config_map>(const config::broker_config& broker,
                                                                    const config::config_map& current)>;
  status alter_group_configs(const std::string& group, const group_configs_fn& compute, bool validate_only);
  // A group the group coordinator deleted (DeleteGroups): its configs go
  // with it, as Kafka removes them. Ok when it had none.
  status delete_group_configs(const std::string& group);
  // A store that keeps group configs (a cluster) changed `group`'s:
  // `configs` is its new set as the metadata image holds it (empty: none). The metadata thread calls it (metadata_listener).
  void apply_group_configs(const std::string& group, const config::config_map& configs);
  // The same for every group at once (after the image was reloaded).
  void apply_all_group_configs(config::group_config_table groups);
  // Reads every group's configs from the store again (a cluster: after the
  // metadata listener is registered at start, and after the image is
  // reloaded). No effect on a single broker, whose file this broker alone
  // changes.
  void reload_group_configs();

  ~partition_manager();

  // A broker leaving its cluster: every hosted partition stops taking
  // appends (NOT_LEADER_OR_FOLLOWER) before the controller moves their
  // leadership, so nothing is acknowledged here that the new leaders lack.
  // For good: a state applied later (the control plane still running)
  // never makes this broker lead again (partition::leave).
  void stop_leading();

  // Stops the background creation of logs, writes producer-state snapshots
  // and wakes every fetch waiter. (Retention and the cleaner belong to
  // log_maintenance, stopped before this.) The logs
  // themselves are closed by the log manager.
  void shutdown();
  // Writes every hosted replica's high watermark to meta/high_watermarks
  // (atomically replaced), read back when the broker opens its partitions
  // next (a cluster only: a single node's high watermark is its log end).
  status checkpoint_high_watermarks();

 private:
  partition_manager(io::filesystem& fs, sluice::clock& clk,
                    std::shared_ptr<const config::broker_config> cfg, storage::log_manager& logs)
      : fs_(fs), clk_(clk), data_dir_(cfg->data_dir), cfg_(std::move(cfg)), logs_(logs) {}
  // Logs the background thread is to create: partitions of one topic.
  // `cancelled` (guarded by create_mu_) is set by delete_topic.
  struct creation_job {
    std::string topic;
    std::vector<int32_t> partitions;
    bool cancelled = false;
    std::vector<std::function<void()>> done;  // when_created callbacks, create_mu_
    bool sync = false;  // on_store_change: bring the topic in line with the store
    bool broker_defaults = false;  // on_broker_defaults_change; `topic` is empty
  };

  status load(std::unique_ptr<metadata_store> store);
  result<std::shared_ptr<partition>> open_partition(const topic_info& t, int32_t p);
  // Creates the missing logs of `partitions` of `t` together, so that they
  // share the data directory's syncs (log_manager::get_or_create_all);
  // open_partition then finds them. A log that could not be created is left
  // for open_partition to try again and report.
  void create_logs_together(const topic_info& t, const std::vector<int32_t>& partitions);
  // Publishes a partition whose log now exists, with the store's state;
  // `p` < the topic's partition count.
  void install(const topic_info& t, int32_t p, std::shared_ptr<partition> part);
  // The partitions of `t` from `first` on that this broker hosts.
  std::vector<int32_t> hosted_from(const topic_info& t, int32_t first) const;
  void enqueue_creation(std::string topic, std::vector<int32_t> partitions);
  void start_creator();
  void stop_creator();
  void run_creator();
  void create_logs(creation_job& job);
  // The work of on_store_change, on the background thread.
  void sync_topic(const std::string& topic);
  // Closes and deletes this broker's logs of `topic` (slots and files);
  // change_mu_ held.
  void remove_local_locked(const std::string& topic, int32_t partitions);
  std::string snapshot_path(const std::string& topic, int32_t p) const;
  status set_topic_overrides_locked(const std::string& name, const config::config_map& overrides);
  // Publishes `next` as the broker's snapshot, recomputes every
  // partition's effective config and tells the listeners; change_mu_ held.
  status publish_broker_config_locked(config::broker_config next, std::string_view why);
  // The work of on_broker_defaults_change, on the background thread.
  void sync_broker_defaults();
  // Deletes the topic `find` returns under change_mu_ (`missing` when
  // none), then tells the on_topic_deleted listeners.
  std::optional<create_error> delete_found(const std::function<std::optional<topic_info>()>& find,
                                           create_error missing, topic_info* deleted);
  // Deletes `t` (from the table, then its logs); change_mu_ held.
  std::optional<create_error> delete_topic_locked(const topic_info& t);
  // Partitions of every topic; called with change_mu_ held.
  int64_t total_partitions() const;
  // An existing topic whose hashed directory names (storage::topic_partition::
  // dir_name) would equal those of `name`; called with change_mu_ held.
  std::optional<std::string> hashed_dir_collision(const std::string& name) const;

  io::filesystem& fs_;
  sluice::clock& clk_;
  const std::string data_dir_;  // log.dirs, which never changes at runtime
  // meta/high_watermarks as read at open: "topic partition" -> offset.
  std::map<std::pair<std::string, int32_t>, int64_t> checkpointed_hw_;
  std::mutex checkpoint_mu_;  // one checkpoint write at a time
  mutable std::mutex cfg_mu_;   // guards cfg_ (the pointer, not the snapshot)
  std::shared_ptr<const config::broker_config> cfg_;
  std::vector<std::function<void(const config::broker_config&)>> cfg_listeners_;  // change_mu_
  std::vector<deleted_listener> deleted_listeners_;                                // change_mu_
  mutable std::mutex role_mu_;                 // guards role_listeners_
  std::vector<role_listener> role_listeners_;
  void tell_role(const std::string& topic, int32_t p, bool leads) const;
  storage::log_manager& logs_;
  std::unique_ptr<metadata_store> table_;  // topics: read and changed only through it
  std::unique_ptr<producer_id_allocator> producer_ids_;

  std::unique_ptr<replica_manager> replicas_;

  // Group configs: the copy lookups read, and the lock that serialises
  // their changes (alone: DeleteGroups must not wait for a topic creation).
  group_config_cache group_configs_;
  std::mutex group_change_mu_;

  std::mutex change_mu_;  // serialises create/delete/add-partitions/alter

  // The background creation of logs (create_mode::background). Lock order:
  // change_mu_, then create_mu_, then the replica manager's.
  std::mutex create_mu_;
  std::condition_variable create_cv_;
  std::deque<std::shared_ptr<creation_job>> create_queue_;  // front() is being worked on
  bool create_stopping_ = false;
  std::thread creator_;
};

}  // namespace sluice::cluster
