#pragma once

// Group membership, Kafka's classic protocol (its GroupCoordinator): JoinGroup,
// SyncGroup, Heartbeat and LeaveGroup, static members (KIP-345), generations,
// session and rebalance timeouts, the initial rebalance delay, and the admin
// views (DescribeGroups, ListGroups). It also holds the registry of groups:
// every group in memory has an entry here, including a group that only holds
// committed offsets (offset_manager keeps the offsets; it creates and
// removes entries through ensure(), begin_removal() and erase()).
//
// Durable: each group's last completed rebalance, as its group record,
// written when a rebalance ends Empty or the leader's assignment is synced
// (Stable); apply() takes one back at replay. Memory only, as in Kafka: a
// rebalance in progress (who rejoined, waiting requests, heartbeat times).
//
// States: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, back
// to PreparingRebalance on any membership change, Empty when the last member
// goes, Dead while a removal is written (then the group is forgotten).
//
// Thread rules: not thread-safe. Every method is called with the
// coordinator's mutex held (coordinator.h); answers go to the caller's
// outbox and are sent after the mutex is released. A request callback is
// answered exactly once: at once, from a later request or tick, from an
// append's completion, or by answer_waiting() when the group's partition is
// unloaded or the coordinator closes.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/clock.h"
#include "group/config.h"
#include "group/partitions.h"
#include "group/records.h"
#include "protocol/error_code.h"
#include "protocol/messages.h"

namespace sluice::group {

enum class group_state { empty, preparing_rebalance, completing_rebalance, stable, dead };
// Kafka's names: "Empty", "PreparingRebalance", ...
std::string_view state_name(group_state s);

class membership {
 public:
  template <class T>
  using reply = std::function<void(T)>;

  // `cfg` is the coordinator's (update_config() changes it under the mutex).
  membership(const coordinator_config& cfg, offsets_partitions& partitions, sluice::clock& clk);
  ~membership();
  membership(const membership&) = delete;
  membership& operator=(const membership&) = delete;

  // ---- Requests (each checks partitions.gate() first) ----------------------
  void join_group(const protocol::join_group_request& req, int16_t version, const std::string& client_id,
                  const std::string& client_host, reply<protocol::join_group_response> cb, outbox& out);
  void sync_group(const protocol::sync_group_request& req, reply<protocol::sync_group_response> cb, outbox& out);
  protocol::heartbeat_response heartbeat(const protocol::heartbeat_request& req);
  protocol::leave_group_response leave_group(const protocol::leave_group_request& req, int16_t version, outbox& out);
  protocol::describe_groups_response describe_groups(const protocol::describe_groups_request& req);
  protocol::list_groups_response list_groups(const protocol::list_groups_request& req);

  // Session and rebalance timeouts, the initial rebalance delay and pending
  // member ids, for the groups of served partitions.
  void tick(outbox& out);

  // ---- Records and loading ----------------------------------------------------
  // Takes a group record read back from __consumer_offsets (replay): the
  // group's last completed rebalance. Tombstones go to offset_manager.
  void apply(const std::string& id, const group_value& v);
  // Members of partition `p` get a full session timeout from now (after
  // its load: replayed members have not heartbeated to this coordinator).
  void restart_sessions(int32_t p);
  // Answers every waiting JoinGroup and SyncGroup of partition `p` (every
  // partition when nullopt) with `e`.
  void answer_waiting(std::optional<int32_t> p, kafka::error_code e, outbox& out);
  // The ids of the groups of partition `p`.
  std::vector<std::string> groups_of(int32_t p) const;

  // ---- The registry -------------------------------------------------------------
  size_t size() const { return groups_.size(); }
  bool contains(const std::string& id) const { return find(id) != nullptr; }
  // A group that only holds offsets, made if missing (Empty, no state
  // timestamp: its offsets expire by their commit time alone).
  void ensure(const std::string& id);
  void erase(const std::string& id);

  // ---- What offset_manager asks -------------------------------------------------
  // Whether this request may commit offsets for the group: none for a member
  // of the current generation (whose session this refreshes) or a commit
  // without a generation to a group without members (or none yet); the error
  // otherwise.
  kafka::error_code may_commit(const std::string& group_id, int32_t generation, const std::string& member_id,
                               const std::optional<std::string>& instance_id, int16_t version);
  // The same for a transactional commit (TxnOffsetCommit), by Kafka's rules
  // for a classic group: a generation of -1 with no member id and no
  // instance id (every request below v3) is not checked, whatever the
  // group's state; otherwise the member must be the group's (or its static
  // instance: FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID) and the generation the
  // current one (ILLEGAL_GENERATION, also for a group that does not exist).
  // A rebalance in progress does not refuse it, and no session is
  // refreshed. A Dead group (being deleted) is COORDINATOR_NOT_AVAILABLE.
  kafka::error_code may_commit_txn(const std::string& group_id, int32_t generation, const std::string& member_id,
                                   const std::optional<std::string>& instance_id) const;
  // The topics the members of a live consumer group subscribe to, whose
  // offsets OffsetDelete must keep. GROUP_ID_NOT_FOUND for a missing or
  // Dead group, NON_EMPTY_GROUP for a live group of another protocol type.
  kafka::error_code subscribed_topics(const std::string& group_id, std::set<std::string>& topics) const;
  // Removal of a whole group (DeleteGroups, expiry): an Empty group turns
  // Dead while its tombstones are written, so joins and commits are refused
  // (retriably) meanwhile. GROUP_ID_NOT_FOUND (missing or Dead) or
  // NON_EMPTY_GROUP refuse. end_removal() erases the group when the
  // tombstones are durable, or makes it Empty again.
  kafka::error_code begin_removal(const std::string& id);
  void end_removal(const std::string& id, bool removed);
  // Calls fn(id, state timestamp) for every Empty group of a served
  // partition with no pending member: those whose offsets may expire.
  void for_each_idle(const std::function<void(const std::string&, int64_t state_timestamp_ms)>& fn) const;

 private:
  struct member;
  struct group;

  group* find(const std::string& id);
  const group* find(const std::string& id) const;
  group* create(const std::string& id);
  // True when `instance_id` is a static member held by another member id
  // (FENCED_INSTANCE_ID).
  static bool fenced(const group& g, const std::optional<std::string>& instance_id, const std::string& member_id);
  // The checks SyncGroup and Heartbeat share: a served partition, a valid
  // and live group, an unfenced known member of this generation. On success
  // `error` is none and both pointers are set.
  struct member_lookup {
    kafka::error_code error = kafka::error_code::none;
    group* g = nullptr;
    member* m = nullptr;
  };
  member_lookup lookup_member(const std::string& group_id, const std::optional<std::string>& instance_id,
                              const std::string& member_id, int32_t generation);
  bool new_member_fits(const group& g) const;
  std::string new_member_id(const std::string& client_id);

  // JoinGroup, in steps.
  kafka::error_code join_error(const protocol::join_group_request& req) const;
  static bool protocol_fits(const group& g, const protocol::join_group_request& req);
  void join_new(group& g, const protocol::join_group_request& req, int16_t version, const std::string& client_id,
                const std::string& client_host, reply<protocol::join_group_response>& cb, outbox& out);
  void join_static(group& g, const protocol::join_group_request& req, const std::string& client_id,
                   const std::string& client_host, reply<protocol::join_group_response>& cb, outbox& out);
  void confirm_static_rejoin(group& g, const std::string& new_id, reply<protocol::join_group_response>& cb);
  void rejoin(group& g, member& m, const protocol::join_group_request& req, reply<protocol::join_group_response>& cb,
              outbox& out);
  // A member added or readmitted waits in the rebalance it starts or joins.
  void wait_in_rebalance(group& g, member& m, reply<protocol::join_group_response>& cb, outbox& out,
                         const char* why);
  member& add_member(group& g, const std::string& member_id, const protocol::join_group_request& req,
                     const std::string& client_id, const std::string& client_host);

  // The rebalance.
  void prepare_rebalance(group& g, outbox& out, const char* why);
  void maybe_complete_join(group& g, outbox& out);
  void complete_join(group& g, outbox& out);
  static std::string choose_protocol(const group& g);
  void remove_member(group& g, const std::string& member_id, outbox& out);
  void after_member_removed(group& g, outbox& out);
  kafka::error_code leave_one(group* g, const protocol::leave_group_request::member_identity& l, bool& removed,
                              outbox& out);
  void finish_sync(group& g, int32_t generation, status s, outbox& out);
  void expire_members(group& g, int64_t now, outbox& out);
  protocol::join_group_response join_response(const group& g, const member& m) const;

  // The group record.
  group_value snapshot(const group& g) const;
  void append_group(group& g, offsets_partitions::then_fn then);

  const coordinator_config& cfg_;
  offsets_partitions& partitions_;
  sluice::clock& clk_;
  std::map<std::string, std::unique_ptr<group>, std::less<>> groups_;
  std::mt19937_64 rng_;
};

}  // namespace sluice::group
