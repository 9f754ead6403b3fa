#pragma once

// Share groups' membership as their coordinator keeps it (KIP-932's
// ShareGroupHeartbeat), as plain decisions over a test clock: members join
// with epoch 0, heartbeat at their epoch, leave with -1 or are dropped when
// their session times out; the coordinator computes every member's
// assignment itself (Kafka's simple share assignor, below). No revocation
// phase: a partition may be shared by many members at once, so a member
// takes its new assignment at once and its epoch follows the group's.
//
// Epochs. The group epoch goes up by one with every change of membership or
// of a member's subscription (or of a subscribed topic's partitions), and
// the assignment is computed again at once; a member's epoch is the epoch
// of the assignment it was last told (each answer tells the newest). A heartbeat at an epoch other than the
// member's is FENCED_MEMBER_EPOCH, from a member the group does not know
// UNKNOWN_MEMBER_ID: the client rejoins at epoch 0.
//
// What lives here is memory only (as the rebalance state of a classic
// group): after the coordinator moves or restarts, members heartbeating at
// their old epoch are told UNKNOWN_MEMBER_ID and rejoin. What must survive
// (which records each share partition has delivered, acknowledged or
// archived) is kept by the share partitions and the share coordinator, not
// here.
//
// Not thread-safe.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/limits.h"
#include "base/types.h"
#include "protocol/error_code.h"

namespace sluice::share {

struct membership_settings {
  int32_t session_timeout_ms = limits::default_share_session_timeout_ms;        // group.share.session.timeout.ms
  int32_t heartbeat_interval_ms = limits::default_share_heartbeat_interval_ms;  // group.share.heartbeat.interval.ms
  int32_t max_size = limits::default_share_group_max_size;                      // group.share.max.size
};

struct topic_info {
  sluice::topic_id id{};
  int32_t partitions = 0;
};
// A topic's id and partition count by name; nullopt when it does not exist.
using topic_lookup = std::function<std::optional<topic_info>(const std::string& name)>;

// A member's assignment: topic id -> partitions, sorted.
using assignment = std::map<sluice::topic_id, std::vector<int32_t>>;

struct heartbeat_request {
  std::string group_id;
  std::string member_id;
  int32_t member_epoch = 0;
  std::optional<std::string> rack_id;
  std::optional<std::vector<std::string>> subscribed_topic_names;  // nullopt: unchanged
  std::string client_id;
  std::string client_host;
};

struct heartbeat_answer {
  kafka::error_code error = kafka::error_code::none;
  std::string message;
  std::string member_id;
  int32_t member_epoch = 0;
  int32_t heartbeat_interval_ms = 0;
  std::optional<assignment> assigned;  // sent when new to the member
};

struct member_view {
  std::string member_id;
  std::optional<std::string> rack_id;
  int32_t member_epoch = 0;
  std::string client_id;
  std::string client_host;
  std::vector<std::string> subscribed_topic_names;
  assignment assigned;
};

struct group_view {
  std::string group_id;
  std::string state;  // "Empty" or "Stable"
  int32_t group_epoch = 0;
  int32_t assignment_epoch = 0;
  std::vector<member_view> members;
};

// Kafka's simple share assignor for one topic of `partitions` partitions
// and the sorted `members` subscribed to it: with no more members than
// partitions each partition goes to one member, round robin; with more,
// every member gets one partition, round robin, so each partition is
// shared by members / partitions (rounded) members. Every partition is
// assigned when anyone subscribes.
std::map<std::string, std::vector<int32_t>> simple_assign(const std::vector<std::string>& members, int32_t partitions);

class share_groups {
 public:
  explicit share_groups(membership_settings s) : settings_(s) {}
  void set_settings(membership_settings s) { settings_ = s; }

  heartbeat_answer heartbeat(const heartbeat_request& req, const topic_lookup& topics, int64_t now_ms);

  // Drops members whose session ran out; returns the (group, member) pairs
  // dropped.
  std::vector<std::pair<std::string, std::string>> expire(int64_t now_ms, const topic_lookup& topics);

  // Topics changed (created, deleted, partitions added): assignments are
  // computed again for the groups subscribed to `topic`.
  void topic_changed(const std::string& topic, const topic_lookup& topics);

  bool exists(const std::string& group_id) const { return groups_.count(group_id) > 0; }
  std::optional<group_view> describe(const std::string& group_id, const topic_lookup& topics) const;
  std::vector<std::string> list() const;
  // DeleteGroups: only an empty group (NON_EMPTY_GROUP otherwise).
  kafka::error_code remove(const std::string& group_id);

  // For the admin offset APIs (AlterShareGroupOffsets,
  // DeleteShareGroupOffsets), which change only an empty group: NONE when
  // `group_id` is empty now (created empty when unknown, so an operator can
  // place a group's start offsets before its consumers start, or after a
  // restart forgot it), NON_EMPTY_GROUP when it has members.
  kafka::error_code prepare_admin_change(const std::string& group_id);
  // Every topic a member of the group has subscribed to since this
  // coordinator has known the group (sorted), less those forgotten: where
  // its share partitions may have state.
  std::vector<std::string> topics(const std::string& group_id) const;
  // DeleteShareGroupOffsets of `topic`: no longer one of topics().
  void forget_topic(const std::string& group_id, const std::string& topic);
  // A group id must name one kind of group: the caller asks before a classic
  // group of this id is created, and answers GROUP_ID_NOT_FOUND here when a
  // classic group holds the id.
  size_t size() const { return groups_.size(); }

 private:
  struct member {
    std::string id;
    std::optional<std::string> rack_id;
    int32_t epoch = 0;
    std::vector<std::string> subscribed;
    std::string client_id, client_host;
    int64_t deadline_ms = 0;
    assignment assigned;
    bool assignment_sent = false;
  };
  struct group {
    std::string id;
    int32_t epoch = 0;
    int32_t assignment_epoch = 0;
    std::map<std::string, member> members;
    std::set<std::string> topics;  // see topics()
  };

  void reassign(group& g, const topic_lookup& topics);

  membership_settings settings_;
  std::map<std::string, group> groups_;
};

}  // namespace sluice::share
