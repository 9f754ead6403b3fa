#pragma once

// The classic consumer-group coordinator (Kafka's GroupCoordinator): group
// membership (join, sync, heartbeat, leave, static members), committed
// offsets, and the admin views. A state machine over records in
// __consumer_offsets (docs/group_records.md):
//
// - Durable facts (committed offsets, each group's last completed
//   rebalance) change only when their record is applied: a request builds
//   the records, appends them through record_log, and the completion (on the
//   coordinator's executor) applies them and answers the client. At start,
//   replay() applies the same records to rebuild the state.
// - The state of a rebalance in progress (who rejoined, waiting requests,
//   heartbeat times) is memory only, as in Kafka.
//
// States: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, back
// to PreparingRebalance on any membership change, Empty when the last member
// goes, Dead while a deletion is written (then the group is forgotten).
//
// Thread safety: every public method is thread-safe (one mutex). Response
// callbacks are called exactly once, from the calling thread or from the
// executor, never with the mutex held. Timers advance only through tick(),
// which the owner calls periodically (group::service every
// limits::tick_interval_ms; unit tests with a manual clock).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "protocol/error_code.h"
#include "protocol/messages.h"
#include "protocol/records/record_batch.h"
#include "group/records.h"

namespace sluice::config {
struct broker_config;
}

namespace sluice::group {

struct coordinator_config {
  int32_t min_session_timeout_ms = 6000;
  int32_t max_session_timeout_ms = 1'800'000;
  int32_t max_group_size = 10'000;
  int32_t initial_rebalance_delay_ms = 3000;
  int32_t num_partitions = 50;  // of __consumer_offsets
  int64_t offsets_retention_ms = 7ll * 24 * 3600 * 1000;
  int64_t offsets_retention_check_interval_ms = 600'000;

  static coordinator_config from(const config::broker_config& b);
};

// Where the coordinator's records go: partition `p` of __consumer_offsets.
class record_log {
 public:
  virtual ~record_log() = default;
  // Appends `records` as one batch and calls `done` once it is durable (or
  // failed). `done` may run on any thread, even before append returns.
  virtual void append(int32_t p, std::vector<protocol::records::record_input> records,
                      std::function<void(status)> done) = 0;
};

enum class group_state { empty, preparing_rebalance, completing_rebalance, stable, dead };
// Kafka's names: "Empty", "PreparingRebalance", ...
std::string_view state_name(group_state s);

class coordinator {
 public:
  // Runs a task on the coordinator's executor (one task at a time).
  using post_fn = std::function<void(std::function<void()>)>;
  // Whether a topic partition exists (OffsetCommit refuses unknown ones).
  using partition_exists_fn = std::function<bool(const std::string& topic, int32_t partition)>;

  coordinator(coordinator_config cfg, record_log& log, sluice::clock& clk, post_fn post,
              partition_exists_fn partition_exists = {});
  ~coordinator();
  coordinator(const coordinator&) = delete;
  coordinator& operator=(const coordinator&) = delete;

  // ---- Loading ------------------------------------------------------------
  // Until set_loaded(), requests are answered COORDINATOR_LOAD_IN_PROGRESS.
  bool loaded() const;
  // Ends the load. Returns false, changing nothing, once unload() has been
  // called: a replay that finishes during shutdown must not open the
  // coordinator again, or requests would park in it while the server drains.
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
  // tombstone). Undecodable or foreign records are skipped with an error
  // value for the caller to log.
  status replay(std::span<const uint8_t> key, std::optional<std::span<const uint8_t>> value);

  // ---- Requests --------------------------------------------------------------
  // Each answers through its callback exactly once.
  template <class T>
  using reply = std::function<void(T)>;

  void join_group(const protocol::join_group_request& req, int16_t version, const std::string& client_id,
                  const std::string& client_host, reply<protocol::join_group_response> cb);
  void sync_group(const protocol::sync_group_request& req, int16_t version, reply<protocol::sync_group_response> cb);
  protocol::heartbeat_response heartbeat(const protocol::heartbeat_request& req, int16_t version);
  protocol::leave_group_response leave_group(const protocol::leave_group_request& req, int16_t version);
  void offset_commit(const protocol::offset_commit_request& req, int16_t version,
                     reply<protocol::offset_commit_response> cb);
  protocol::offset_fetch_response offset_fetch(const protocol::offset_fetch_request& req, int16_t version);
  void offset_delete(const protocol::offset_delete_request& req, reply<protocol::offset_delete_response> cb);
  protocol::describe_groups_response describe_groups(const protocol::describe_groups_request& req);
  protocol::list_groups_response list_groups(const protocol::list_groups_request& req);
  void delete_groups(const protocol::delete_groups_request& req, reply<protocol::delete_groups_response> cb);

  // A topic was deleted: its committed offsets go from every group
  // (tombstones in __consumer_offsets), as Kafka's coordinator drops them
  // (onPartitionsDeleted), so that a topic created again under the name is
  // read from the group's reset policy, not from an offset of the old one.
  // A group left with no offsets and no members stays until it expires.
  void delete_topic_offsets(const std::string& topic);

  // ---- Timers -----------------------------------------------------------------
  // Session and rebalance timeouts, the initial rebalance delay, pending
  // member ids, and (every offsets_retention_check_interval_ms) offset expiry.
  void tick();

  // Number of groups held (tests and metrics).
  size_t group_count() const;

  // A dynamic broker config change: takes the settings that may change at
  // runtime (session timeout bounds, group size, initial rebalance delay,
  // offsets retention) from `next`; the partition count of __consumer_offsets
  // and the expiry check interval stay. Members already in a group keep
  // their session timeouts; later joins and the next expiry pass see the new
  // values. Any thread.
  void update_config(const coordinator_config& next);

  // ---- Operator's view ---------------------------------------------------------
  // One committed offset, as /metrics reports it.
  struct committed_offset {
    std::string group;
    std::string topic;
    int32_t partition = 0;
    int64_t offset = 0;
  };
  // A copy of every committed offset, taken under the mutex (one scrape's
  // worth; bounded by limits::max_groups and max_offsets_per_group).
  std::vector<committed_offset> committed_offsets() const;
  // Called with a group's previous committed offset of a partition each time
  // a live commit, an OffsetDelete, a group deletion or offset expiry
  // replaces or removes it (not during replay), so the owner can account
  // for messages the group lost to retention before the offset moved on.
  // Runs on the thread that applies the change with the coordinator's mutex
  // held: it must be quick and must not call back into the coordinator.
  using offset_observer = std::function<void(const std::string& group, const std::string& topic,
                                             int32_t partition, int64_t previous_offset)>;
  // Set once, before start (not synchronised with the callers).
  void set_offset_observer(offset_observer fn) { observer_ = std::move(fn); }

 private:
  struct member;
  struct group;
  struct committed;
  class outbox;

  group* find_locked(const std::string& id);
  // True when `instance_id` is a static member held by another member id
  // (FENCED_INSTANCE_ID).
  static bool fenced_locked(const group& g, const std::optional<std::string>& instance_id,
                            const std::string& member_id);
  // The checks SyncGroup and Heartbeat share: a loaded coordinator, a valid
  // and live group, an unfenced known member of this generation. On success
  // `error` is none and both pointers are set.
  struct member_lookup {
    kafka::error_code error = kafka::error_code::none;
    group* g = nullptr;
    member* m = nullptr;
  };
  member_lookup lookup_member_locked(const std::string& group_id, const std::optional<std::string>& instance_id,
                                     const std::string& member_id, int32_t generation);
  group* create_locked(const std::string& id);
  void erase_group_locked(const std::string& id);
  bool new_member_fits_locked(const group& g) const;

  void join_known_locked(group& g, member& m, const protocol::join_group_request& req, outbox& out);
  void join_static_locked(group& g, const protocol::join_group_request& req, const std::string& client_id,
                          const std::string& client_host, reply<protocol::join_group_response>& cb, outbox& out);
  member& add_member_locked(group& g, const std::string& member_id, const protocol::join_group_request& req,
                            const std::string& client_id, const std::string& client_host);
  void prepare_rebalance_locked(group& g, outbox& out, const char* why);
  void maybe_complete_join_locked(group& g, outbox& out);
  void complete_join_locked(group& g, outbox& out);
  void remove_member_locked(group& g, const std::string& member_id, outbox& out);
  void after_member_removed_locked(group& g, outbox& out);
  void finish_sync_locked(group& g, int32_t generation, status s, outbox& out);
  protocol::join_group_response join_response(const group& g, const member& m) const;

  group_value snapshot(const group& g) const;
  void append_locked(const std::string& group_id, std::vector<protocol::records::record_input> records,
                     std::function<void(status, outbox&)> then);
  void append_group_locked(group& g, std::function<void(status, outbox&)> then);
  void apply_offset_locked(const offset_key& k, const std::optional<offset_value>& v);
  void apply_group_locked(const std::string& id, const std::optional<group_value>& v);
  void expire_offsets_locked(int64_t now_ms);

  std::string new_member_id(const std::string& client_id);

  // num_partitions and the expiry interval never change; the fields
  // update_config() replaces are read and written under mu_.
  coordinator_config cfg_;
  record_log& log_;
  sluice::clock& clk_;
  const post_fn post_;
  const partition_exists_fn partition_exists_;
  offset_observer observer_;

  mutable std::mutex mu_;
  bool loaded_ = false;
  bool unloaded_ = false;  // set by unload(); never cleared
  std::map<std::string, std::unique_ptr<group>, std::less<>> groups_;
  std::mt19937_64 rng_;
  int64_t next_expiry_check_ms_ = 0;  // monotonic
};

}  // namespace sluice::group
