#pragma once

// The classic consumer-group coordinator (Kafka's GroupCoordinator with its
// GroupMetadataManager): the one object the handlers and the broker call. A
// thin facade that holds the mutex and delegates:
//
//   membership.h      join, sync, heartbeat, leave, static members,
//                     rebalances and their timeouts, DescribeGroups and
//                     ListGroups; the registry of groups in memory
//   offsets.h         OffsetCommit, OffsetFetch, OffsetDelete, DeleteGroups,
//                     offsets of deleted topics, expiry; tombstones
//   partitions.h      the partitions of __consumer_offsets it serves (loading,
//                     loaded, not owned), appends and their completions
//
// A state machine over records in __consumer_offsets (docs/group_records.md):
// durable facts (committed offsets, each group's last completed rebalance)
// change only when their record is applied: a request builds the records,
// appends them through record_log, and the completion (on the
// coordinator's executor) applies them and answers the client. Loading
// applies the same records to rebuild the state.
//
// Thread safety: every public method is thread-safe (one mutex, held while
// membership, offset_manager and offsets_partitions run). Response
// callbacks are called exactly once, from the calling thread or from the
// executor, never with the mutex held. Timers advance only through tick(),
// which the owner calls periodically (group::service every
// limits::tick_interval_ms; unit tests with a manual clock).

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "group/config.h"
#include "group/membership.h"
#include "group/offsets.h"
#include "group/partitions.h"
#include "group/records.h"
#include "protocol/messages.h"

namespace sluice::group {

class coordinator {
 public:
  // Runs a task on the coordinator's executor (one task at a time).
  using post_fn = offsets_partitions::post_fn;
  // The topic a name resolves to now (offsets.h): OffsetCommit refuses
  // unknown topic partitions and records the topic's id; OffsetFetch
  // answers only offsets of the current topic of a name.
  using topic_lookup_fn = group::topic_lookup_fn;
  template <class T>
  using reply = std::function<void(T)>;
  using committed_offset = group::committed_offset;
  using offset_observer = group::offset_observer;

  coordinator(coordinator_config cfg, record_log& log, sluice::clock& clk, post_fn post,
              topic_lookup_fn topics = {});
  ~coordinator();
  coordinator(const coordinator&) = delete;
  coordinator& operator=(const coordinator&) = delete;

  // ---- Loading ------------------------------------------------------------
  // A new coordinator serves no group yet: every partition of
  // __consumer_offsets is loading, and its groups' requests are answered
  // COORDINATOR_LOAD_IN_PROGRESS. The single-node broker loads them all at
  // start (load_partition each, then set_loaded); a broker in a cluster
  // loads and unloads the partitions it gains and loses.

  // What load_partition() did.
  struct load_result {
    size_t records = 0;   // read back, skipped ones included
    size_t skipped = 0;   // undecodable or foreign: logged, not applied
    bool loaded = false;  // false: unloaded, shut down or the owner stopping meanwhile
    status read;          // the log's error; the records before it stay applied
  };
  // Replays partition `p` of __consumer_offsets (the groups that hash to it
  // and their offsets) from the record_log, then serves its groups; their
  // members get a full session timeout from then. Meanwhile its groups get
  // COORDINATOR_LOAD_IN_PROGRESS; other partitions are served as usual (the
  // mutex is taken per record). A loaded partition stays as it is. Calls for
  // one partition come from one thread at a time (the service's thread).
  load_result load_partition(int32_t p);
  // Drops partition `p`'s groups and offsets from memory (the offset
  // observer is not told: the offsets are not lost, another coordinator
  // has them). Waiting JoinGroup and SyncGroup requests of its groups are
  // answered NOT_COORDINATOR, appends in flight complete NOT_COORDINATOR
  // without changing anything, and later requests for its groups get
  // NOT_COORDINATOR until load_partition(p).
  void unload_partition(int32_t p);

  // True when no partition is loading and unload() was not called.
  bool loaded() const;
  // Ends the start-up load: partitions still loading (records given by
  // replay()) are served. Returns false, changing nothing, once unload()
  // has been called: a replay that finishes during shutdown must not open
  // the coordinator again, or requests would park in it while the server
  // drains.
  bool set_loaded();
  // Shutdown, before the network server drains: answers every waiting
  // JoinGroup and SyncGroup with NOT_COORDINATOR (clients look for the
  // coordinator again) and makes later requests wait for a load that will
  // not come, so the drain is not held up by parked requests. Final: the
  // coordinator never loads again, whether its replay has finished or not.
  void unload();
  // True once unload() was called (a replay in progress stops early).
  bool unloaded() const;
  // Applies one record read back from __consumer_offsets (value nullopt: a
  // tombstone) to a partition still loading (tests; load_partition reads
  // the record_log itself). Undecodable records are skipped with an
  // error value for the caller to log.
  status replay(std::span<const uint8_t> key, std::optional<std::span<const uint8_t>> value);
  // The same for one entry of partition `p` as record_log::read gives it
  // (a record with where it lies in the log, or a marker): tests of
  // transactional offsets.
  status replay(int32_t p, const log_entry& e);

  // ---- Requests --------------------------------------------------------------
  // Each answers through its callback exactly once.
  void join_group(const protocol::join_group_request& req, int16_t version, const std::string& client_id,
                  const std::string& client_host, reply<protocol::join_group_response> cb);
  void sync_group(const protocol::sync_group_request& req, int16_t version, reply<protocol::sync_group_response> cb);
  protocol::heartbeat_response heartbeat(const protocol::heartbeat_request& req, int16_t version);
  protocol::leave_group_response leave_group(const protocol::leave_group_request& req, int16_t version);
  void offset_commit(const protocol::offset_commit_request& req, int16_t version,
                     reply<protocol::offset_commit_response> cb);
  // TxnOffsetCommit: the offsets are written as one transactional batch of
  // the producer (its id and epoch) to the group's partition with acks=all,
  // answered once durable, and pending until the producer's marker there
  // (offsets.h has the rules). Checked as Kafka checks it: the group must
  // be coordinated here, and from v3 the generation and member (a
  // generation of -1 without a member id is not checked); unknown topic
  // partitions and oversized metadata are refused per partition. Nothing
  // is asked of the transaction coordinator here: record_log::append is
  // where that verification goes.
  void txn_offset_commit(const protocol::txn_offset_commit_request& req, int16_t version,
                         reply<protocol::txn_offset_commit_response> cb);
  protocol::offset_fetch_response offset_fetch(const protocol::offset_fetch_request& req, int16_t version);
  void offset_delete(const protocol::offset_delete_request& req, reply<protocol::offset_delete_response> cb);
  protocol::describe_groups_response describe_groups(const protocol::describe_groups_request& req);
  protocol::list_groups_response list_groups(const protocol::list_groups_request& req);
  void delete_groups(const protocol::delete_groups_request& req, reply<protocol::delete_groups_response> cb);

  // Topic `topic` with id `id` was deleted (`id` all zero: not known
  // here): its committed offsets go from every group (tombstones in
  // __consumer_offsets), as Kafka's coordinator drops them
  // (onPartitionsDeleted), so that a topic created again under the name is
  // read from the group's reset policy, not from an offset of the old one.
  // The deletion may come late, after the name was taken again: offsets
  // committed against the topic that has the name now stay, and so do
  // commits of it still in flight (docs/group_records.md, "Topic ids"). A
  // group left with no offsets and no members stays until it expires.
  // Partitions of __consumer_offsets loading now, or held by another
  // broker, drop them when they finish loading here: a load ends with
  // tombstones for the offsets of topic partitions that no longer exist or
  // whose topic was replaced. Until then a fetch does not answer them.
  void delete_topic_offsets(const std::string& topic, const sluice::topic_id& id);

  // ---- Transactions -------------------------------------------------------------
  // The marker of `producer_id` (COMMIT when `commit`) at `marker_offset` in
  // partition `p` of __consumer_offsets is committed (Kafka's
  // GroupCoordinator.onTransactionCompleted): the producer's pending
  // offsets in the groups of `p` written below it are committed or
  // dropped. The WriteTxnMarkers path calls it for every marker it wrote to
  // a partition of __consumer_offsets, once the marker is committed and
  // before it answers. A partition still loading applies it when its load
  // ends; one not owned here ignores it (its coordinator replays the
  // marker). Any thread, not under a partition's lock.
  void on_transaction_completed(int32_t p, int64_t producer_id, bool commit, int64_t marker_offset);

  // ---- Timers -----------------------------------------------------------------
  // Session and rebalance timeouts, the initial rebalance delay, pending
  // member ids, appends not committed within offsets_commit_timeout_ms, and
  // (every offsets_retention_check_interval_ms) offset expiry.
  void tick();

  // Number of groups held (tests and metrics).
  size_t group_count() const;
  // For the share groups kept beside the classic ones (share/membership.h):
  // what a request for `group_id` gets before anything else is checked
  // (none: coordinated and served here; NOT_COORDINATOR or
  // COORDINATOR_LOAD_IN_PROGRESS), and whether a classic group holds the
  // id (one id names one kind of group).
  kafka::error_code gate(const std::string& group_id) const;
  bool has_classic_group(const std::string& group_id) const;

  // A dynamic broker config change: takes the settings that may change at
  // runtime (session timeout bounds, group size, initial rebalance delay,
  // offsets retention) from `next`; the partition count of __consumer_offsets
  // and the expiry check interval stay. Members already in a group keep
  // their session timeouts; later joins and the next expiry pass see the new
  // values. Any thread.
  void update_config(const coordinator_config& next);

  // ---- Operator's view ---------------------------------------------------------
  // A copy of every committed offset, taken under the mutex (one scrape's
  // worth; bounded by limits::max_groups and max_offsets_per_group).
  std::vector<committed_offset> committed_offsets() const;
  // The offset observer (offsets.h): runs with the coordinator's mutex
  // held. Set once, before start (not synchronised with the callers).
  void set_offset_observer(offset_observer fn) { offsets_.set_observer(std::move(fn)); }
  // In a cluster: whether this broker's view of the cluster is current
  // (offsets_partitions::set_view_check has the contract). Set once, before
  // start.
  void set_view_check(std::function<bool()> current) { partitions_.set_view_check(std::move(current)); }

 private:
  // Applies one record read back; with `partition`, a record of a group
  // that hashes elsewhere is refused as foreign.
  status apply_locked(std::span<const uint8_t> key, std::optional<std::span<const uint8_t>> value,
                      std::optional<int32_t> partition = std::nullopt, int64_t log_offset = -1);
  // The same for an entry of partition `p` read back with its place in the
  // log: a marker resolves pending offsets; a record of a transactional
  // batch becomes pending (a group record or tombstone there is foreign).
  status apply_entry_locked(int32_t p, const log_entry& e);

  // num_partitions and the expiry interval never change; the fields
  // update_config() replaces are read and written under mu_.
  coordinator_config cfg_;
  record_log& log_;
  mutable std::mutex mu_;
  offsets_partitions partitions_;  // guarded by mu_, as are the two below
  membership members_;
  offset_manager offsets_;
};

}  // namespace sluice::group
