#pragma once

// Committed offsets (the offsets half of Kafka's GroupMetadataManager):
// OffsetCommit, OffsetFetch and OffsetDelete, offsets of deleted topics,
// expiry by offsets.retention.minutes, and the removal of whole groups
// (DeleteGroups, expiry of an idle group), all written as records and
// tombstones in __consumer_offsets. apply() takes an offset record, live
// (once durable) or replayed.
//
// Each offset carries the id of the topic it was committed against: it is
// answered only while its name still has that topic, and a deletion
// removes the offsets of the deleted topic, never those committed against
// a topic created again under the name (docs/group_records.md, "Topic
// ids").
//
// Membership (membership.h) decides who may commit and which topics a live
// group still reads; this class asks it, and keeps the registry in step: a
// group that gets its first offset is registered (membership::ensure), a
// removed group leaves both.
//
// Transactional offsets (TxnOffsetCommit, Kafka's pending transactional
// offset commits): a transactional batch's offsets are pending for its
// producer until that producer's marker lands in the same partition of
// __consumer_offsets. COMMIT makes them the group's committed offsets,
// except where a commit written later in the log (a larger log offset)
// holds the partition already; ABORT drops them. Replay meets the markers
// in the log; live, the marker's writer reports each one
// (coordinator::on_transaction_completed). The rule compares log offsets
// only, so a marker heard twice, or heard live and replayed, changes
// nothing more. Pending offsets count toward limits::max_offsets_per_group;
// they are not answered by OffsetFetch (the committed offset is, or
// UNSTABLE_OFFSET_COMMIT when the request requires stable offsets), do not
// expire, keep their group from expiring, and go with the group
// (DeleteGroups) or with a tombstone of their key.
//
// Thread rules: not thread-safe. Every method is called with the
// coordinator's mutex held; answers go to the caller's outbox. The observer
// runs with that mutex held, on the thread that applies the change.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "group/config.h"
#include "group/membership.h"
#include "group/partitions.h"
#include "group/records.h"
#include "protocol/messages.h"

namespace sluice::group {

// One committed offset, as /metrics reports it.
struct committed_offset {
  std::string group;
  std::string topic;
  int32_t partition = 0;
  int64_t offset = 0;
};

// Called with a group's previous committed offset of a partition each time
// a live commit, an OffsetDelete, a group deletion or offset expiry
// replaces or removes it (not during replay, nor when a partition is
// unloaded: the offset is not lost, another coordinator has it), so the
// owner can account for messages the group lost to retention before the
// offset moved on. It must be quick and must not call back into the
// coordinator.
using offset_observer = std::function<void(const std::string& group, const std::string& topic,
                                           int32_t partition, int64_t previous_offset)>;

// What the coordinator needs to know of the topic a name resolves to now.
struct topic_ref {
  sluice::topic_id id{};  // never all zero
  int32_t partitions = 0;
};
// The topic that has `name` now in the broker's metadata, nullopt when
// none has. Called with the coordinator's mutex held: it must not call
// back into the coordinator.
using topic_lookup_fn = std::function<std::optional<topic_ref>(const std::string& name)>;

class offset_manager {
 public:
  template <class T>
  using reply = std::function<void(T)>;

  // `cfg` is the coordinator's (update_config() changes it under the
  // mutex). Without `topics` (tests) every topic partition exists and
  // topic ids are not checked.
  offset_manager(const coordinator_config& cfg, offsets_partitions& partitions, membership& members,
                 sluice::clock& clk, topic_lookup_fn topics);

  // ---- Requests (each checks partitions.gate() first) ----------------------
  void commit(const protocol::offset_commit_request& req, int16_t version,
              reply<protocol::offset_commit_response> cb, outbox& out);
  // TxnOffsetCommit: the offsets become pending for the producer once its
  // batch is durable (and the answer is sent then).
  void txn_commit(const protocol::txn_offset_commit_request& req, int16_t version,
                  reply<protocol::txn_offset_commit_response> cb, outbox& out);
  protocol::offset_fetch_response fetch(const protocol::offset_fetch_request& req, int16_t version) const;
  void delete_offsets(const protocol::offset_delete_request& req, reply<protocol::offset_delete_response> cb,
                      outbox& out);
  void delete_groups(const protocol::delete_groups_request& req, reply<protocol::delete_groups_response> cb,
                     outbox& out);
  // Tombstones for the offsets of topic `topic` whose id `id` was deleted,
  // in the groups of served partitions: those of `id` and of any other
  // topic of the name but its current one (coordinator::delete_topic_offsets
  // has the why, docs/group_records.md "Topic ids" the rule).
  void delete_topic(const std::string& topic, const sluice::topic_id& id);
  // Tombstones for the offsets, in the groups of partition `p` just
  // loaded, of topic partitions that no longer exist or whose topic was
  // replaced by another of the name: a deletion this coordinator did not
  // apply because `p` was loading or another broker held it (whose
  // tombstones, if any, were replayed already).
  void delete_missing_topics(int32_t p);

  // ---- Expiry -------------------------------------------------------------------
  // The next expiry pass comes offsets_retention_check_interval_ms from now.
  void schedule_expiry();
  // Runs the expiry pass when it is due.
  void tick();

  // ---- Records and loading ------------------------------------------------------
  // Takes an offset record (value nullopt: a tombstone), replayed or live,
  // written in the batch at `log_offset` (-1: not known, older than any).
  // A tombstone removes the key's pending transactional offsets too.
  void apply(const offset_key& k, const std::optional<offset_value>& v, int64_t log_offset = -1);
  // Takes an offset record of a transactional batch of `producer_id` at
  // `log_offset`: pending for that producer (a later one of the same key
  // replaces it).
  void apply_txn(const offset_key& k, const offset_value& v, int64_t producer_id, int64_t log_offset);
  // The marker of `producer_id` at `marker_offset` in partition `p`
  // (replayed, or reported live): its pending offsets written below the
  // marker are committed or dropped (the header comment has the rule).
  void complete_txn(int32_t p, int64_t producer_id, bool commit, int64_t marker_offset);
  // A marker reported live (coordinator::on_transaction_completed): applied
  // at once to a loaded partition; kept for a partition loading until
  // finish_load(), and for a transactional commit of the producer still in
  // flight until it completes (its batch may lie below the marker);
  // nothing for a partition not owned here.
  void on_marker(int32_t p, int64_t producer_id, bool commit, int64_t marker_offset);
  // The load of `p` ended: the markers reported meanwhile are applied.
  void finish_load(int32_t p);
  // Forgets a group and its offsets: a group tombstone, or a removal made
  // durable (the observer hears of each offset if the group is served).
  void remove_group(const std::string& id);
  // Forgets the groups and offsets of partition `p` without telling the
  // observer (unload: another coordinator takes them over).
  void drop_partition(int32_t p);
  // Whether the group holds pending transactional offsets.
  bool has_pending(const std::string& group_id) const { return pending_.count(group_id) > 0; }

  // ---- Operator's view ------------------------------------------------------------
  std::vector<committed_offset> committed_offsets() const;
  void set_observer(offset_observer fn) { observer_ = std::move(fn); }

 private:
  using topic_partition = std::pair<std::string, int32_t>;
  // An offset and the log offset of the batch that wrote it (-1: not known).
  struct stored_offset {
    offset_value value;
    int64_t log_offset = -1;
  };
  using offset_map = std::map<topic_partition, stored_offset>;
  // A group's pending transactional offsets, by producer id.
  using pending_map = std::map<int64_t, std::map<topic_partition, stored_offset>>;
  // A marker reported while it could not be applied yet (on_marker).
  struct heard_marker {
    int64_t producer_id = -1;
    bool commit = false;
    int64_t offset = -1;
  };
  // Whether an offset of a deleted or replaced topic goes: called with the
  // offset's key and value when the tombstones are decided and again when
  // they are durable (the offset goes from memory only if it still holds).
  using stale_fn = std::function<bool(const offset_key&, const offset_value&)>;

  // The records of one OffsetCommit and what each changes once durable.
  struct commit_batch {
    std::vector<protocol::records::record_input> records;
    std::vector<std::pair<offset_key, offset_value>> applied;
    std::vector<int16_t*> written;  // error codes of the partitions in `records`
  };
  // The fields of one partition of an OffsetCommit or a TxnOffsetCommit.
  struct commit_fields {
    int32_t partition_index = 0;
    int64_t committed_offset = 0;
    int32_t committed_leader_epoch = -1;
    const std::optional<std::string>& committed_metadata;
  };

  const offset_map* offsets_of(const std::string& group_id) const;
  // `known`: the key is held already (replacing it adds nothing to `held`,
  // the group's count of offsets, pending ones included).
  kafka::error_code add_commit(const std::string& group_id, const std::string& topic,
                               const std::optional<topic_ref>& current, const commit_fields& p, bool known,
                               size_t& held, int64_t now_ms, commit_batch& batch) const;
  // The group's committed and pending offsets, for the limit.
  size_t held_count(const std::string& group_id) const;
  // Whether a pending transactional offset of any producer holds `tp`.
  bool pending_for(const std::string& group_id, const topic_partition& tp) const;
  // The keys that hold pending offsets and no committed one.
  std::vector<offset_key> pending_only_keys(const std::string& group_id) const;
  // A transactional commit of `producer_id` to partition `p` completed,
  // its batch at `base_offset` (-1: it failed; its offsets were made
  // pending already): markers heard while it was in flight are applied.
  void txn_append_done(int32_t p, int64_t producer_id, int64_t base_offset);
  // The topic that has `name` now; nullopt when none has, or without a
  // lookup (tests).
  std::optional<topic_ref> current_topic(const std::string& name) const;
  // Whether `v`, an offset of topic `name`, is answered (OffsetFetch,
  // /metrics): its topic is the one that has the name now `current`, or it
  // has no id (a record older than ids).
  bool answered(const offset_value& v, const std::optional<topic_ref>& current) const;
  // Tombstones for `keys` of deleted or replaced topics, as one write;
  // once durable each offset goes from memory if `stale` still says so.
  void write_deletion(const std::string& group_id, std::vector<offset_key> keys, stale_fn stale);
  // A commit of `k` against topic `id` completed (whatever its outcome).
  void forget_in_flight(const offset_key& k, const sluice::topic_id& id);
  std::vector<offset_key> keys_of(const std::string& group_id) const;
  // `require_stable`: a partition with pending transactional offsets is
  // answered UNSTABLE_OFFSET_COMMIT rather than with its committed offset.
  protocol::offset_fetch_response::offset_fetch_response_group fetch_group(
      const std::string& group_id,
      const std::optional<std::vector<
          protocol::offset_fetch_request::offset_fetch_request_group::offset_fetch_request_topics>>& topics,
      bool require_stable) const;
  // Writes tombstones for `keys` (and the group record when
  // `whole_group`); `then` runs once the write is durable or failed.
  void write_tombstones(const std::string& group_id, const std::vector<offset_key>& keys, bool whole_group,
                        offsets_partitions::then_fn then);
  // Removes an idle group (DeleteGroups, expiry), Dead until the tombstones
  // are durable; `done` gets the outcome.
  void remove_whole_group(const std::string& id, std::vector<offset_key> expired,
                          std::function<void(status, outbox&)> done);
  void expire(int64_t now_ms);

  const coordinator_config& cfg_;
  offsets_partitions& partitions_;
  membership& members_;
  sluice::clock& clk_;
  const topic_lookup_fn topics_;
  offset_observer observer_;
  std::map<std::string, offset_map, std::less<>> offsets_;  // by group
  std::map<std::string, pending_map, std::less<>> pending_;  // by group; no empty entries
  // Markers reported and not applied yet, by partition (on_marker); bounded
  // by the transactional commits in flight and the markers of one load.
  std::map<int32_t, std::vector<heard_marker>> heard_;
  // Transactional commits appended and not completed, by (partition,
  // producer id).
  std::map<std::pair<int32_t, int64_t>, size_t> txn_in_flight_;
  // The topic ids of the commits appended and not completed yet, by key
  // (one entry per commit): a topic's deletion must not write a tombstone
  // that lands after a commit in flight against the name's current topic.
  // Bounded by the appends in flight (offsets_partitions times them out).
  std::map<offset_key, std::vector<sluice::topic_id>> in_flight_;
  int64_t next_expiry_check_ms_ = 0;                         // monotonic
};

}  // namespace sluice::group
