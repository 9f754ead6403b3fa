#include "share/membership.h"

#include <algorithm>

#include "base/assert.h"

namespace sluice::share {

using kafka::error_code;

std::map<std::string, std::vector<int32_t>> simple_assign(const std::vector<std::string>& members, int32_t partitions) {
  std::map<std::string, std::vector<int32_t>> out;
  if (members.empty() || partitions <= 0) return out;
  const auto m = static_cast<int64_t>(members.size());
  if (m <= partitions) {
    for (int32_t p = 0; p < partitions; ++p) out[members[static_cast<size_t>(p % m)]].push_back(p);
  } else {
    for (int64_t i = 0; i < m; ++i) out[members[static_cast<size_t>(i)]].push_back(static_cast<int32_t>(i % partitions));
  }
  return out;
}

namespace {

std::string new_member_id() {
  // A member id only needs to be unique within its group: a random topic-id
  // style UUID, in hex.
  return to_hex(new_topic_id());
}

}  // namespace

heartbeat_answer share_groups::heartbeat(const heartbeat_request& req, const topic_lookup& topics, int64_t now_ms) {
  heartbeat_answer a;
  a.heartbeat_interval_ms = settings_.heartbeat_interval_ms;
  auto fail = [&](error_code e, std::string msg) {
    a.error = e;
    a.message = std::move(msg);
    return a;
  };
  if (req.group_id.empty()) return fail(error_code::invalid_request, "the group id is empty");
  if (req.member_epoch < -1) return fail(error_code::invalid_request, "a member epoch is -1, 0 or positive");
  if (req.member_epoch != 0 && req.member_id.empty())
    return fail(error_code::invalid_request, "a member id is required after joining");
  if (req.member_epoch == 0 && !req.subscribed_topic_names)
    return fail(error_code::invalid_request, "a member joins with its subscribed topic names");

  auto git = groups_.find(req.group_id);
  if (req.member_epoch == -1) {
    // Leaving: as Kafka, a member the group does not know is told so.
    if (git == groups_.end() || !git->second.members.count(req.member_id))
      return fail(error_code::unknown_member_id, "no such member in group " + req.group_id);
    git->second.members.erase(req.member_id);
    ++git->second.epoch;
    reassign(git->second, topics);
    a.member_id = req.member_id;
    a.member_epoch = -1;
    return a;
  }
  if (req.member_epoch == 0) {
    if (git == groups_.end()) git = groups_.emplace(req.group_id, group{req.group_id, 0, 0, {}, {}}).first;
    group& g = git->second;
    std::string id = req.member_id.empty() ? new_member_id() : req.member_id;
    auto mit = g.members.find(id);
    if (mit == g.members.end()) {
      if (static_cast<int32_t>(g.members.size()) >= settings_.max_size)
        return fail(error_code::group_max_size_reached,
                    "group " + req.group_id + " has " + std::to_string(settings_.max_size) + " members");
      mit = g.members.emplace(id, member{}).first;
      mit->second.id = id;
    }
    // A member rejoining under its id (after a fence) starts again.
    member& m = mit->second;
    m.rack_id = req.rack_id;
    m.subscribed = *req.subscribed_topic_names;
    std::sort(m.subscribed.begin(), m.subscribed.end());
    m.subscribed.erase(std::unique(m.subscribed.begin(), m.subscribed.end()), m.subscribed.end());
    m.client_id = req.client_id;
    m.client_host = req.client_host;
    m.assignment_sent = false;
    ++g.epoch;
    reassign(g, topics);
    m.deadline_ms = now_ms + settings_.session_timeout_ms;
    m.epoch = g.assignment_epoch;
    a.member_id = id;
    a.member_epoch = m.epoch;
    a.assigned = m.assigned;
    m.assignment_sent = true;
    return a;
  }
  if (git == groups_.end() || !git->second.members.count(req.member_id))
    return fail(error_code::unknown_member_id, "no such member in group " + req.group_id);
  group& g = git->second;
  member& m = g.members.at(req.member_id);
  if (req.member_epoch != m.epoch)
    return fail(error_code::fenced_member_epoch, "member epoch " + std::to_string(req.member_epoch) +
                                                     " is not the member's " + std::to_string(m.epoch));
  m.deadline_ms = now_ms + settings_.session_timeout_ms;
  if (req.rack_id) m.rack_id = req.rack_id;
  if (req.subscribed_topic_names) {
    auto subs = *req.subscribed_topic_names;
    std::sort(subs.begin(), subs.end());
    subs.erase(std::unique(subs.begin(), subs.end()), subs.end());
    if (subs != m.subscribed) {
      m.subscribed = std::move(subs);
      ++g.epoch;
      reassign(g, topics);
    }
  }
  // No revocation to wait for (partitions are shared): a member takes the
  // group's newest assignment, and its epoch, with this answer.
  m.epoch = g.assignment_epoch;
  a.member_id = m.id;
  a.member_epoch = m.epoch;
  if (!m.assignment_sent) {
    a.assigned = m.assigned;
    m.assignment_sent = true;
  }
  return a;
}

void share_groups::reassign(group& g, const topic_lookup& topics) {
  // Every topic any member subscribes to, with its subscribers in order.
  std::map<std::string, std::vector<std::string>> subscribers;
  for (const auto& [id, m] : g.members)
    for (const auto& t : m.subscribed) subscribers[t].push_back(id);
  std::map<std::string, assignment> next;
  for (const auto& [topic, members] : subscribers) {
    auto info = topics(topic);
    if (!info || info->partitions <= 0) continue;  // picked up by topic_changed once it exists
    g.topics.insert(topic);  // only topics that exist: the set stays bounded by them
    for (auto& [member_id, parts] : simple_assign(members, info->partitions)) next[member_id][info->id] = parts;
  }
  g.assignment_epoch = g.epoch;
  for (auto& [id, m] : g.members) {
    assignment& n = next[id];
    if (n != m.assigned) {
      m.assigned = std::move(n);
      m.assignment_sent = false;
    }
  }
}

std::vector<std::pair<std::string, std::string>> share_groups::expire(int64_t now_ms, const topic_lookup& topics) {
  std::vector<std::pair<std::string, std::string>> dropped;
  for (auto& [gid, g] : groups_) {
    bool changed = false;
    for (auto it = g.members.begin(); it != g.members.end();) {
      if (it->second.deadline_ms <= now_ms) {
        dropped.emplace_back(gid, it->first);
        it = g.members.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
    if (changed) {
      ++g.epoch;
      reassign(g, topics);
    }
  }
  return dropped;
}

void share_groups::topic_changed(const std::string& topic, const topic_lookup& topics) {
  for (auto& [gid, g] : groups_) {
    bool subscribed = false;
    for (const auto& [id, m] : g.members)
      subscribed = subscribed || std::binary_search(m.subscribed.begin(), m.subscribed.end(), topic);
    if (!subscribed) continue;
    ++g.epoch;
    reassign(g, topics);
  }
}

std::optional<group_view> share_groups::describe(const std::string& group_id, const topic_lookup& topics) const {
  (void)topics;
  auto it = groups_.find(group_id);
  if (it == groups_.end()) return std::nullopt;
  const group& g = it->second;
  group_view v;
  v.group_id = g.id;
  v.state = g.members.empty() ? "Empty" : "Stable";
  v.group_epoch = g.epoch;
  v.assignment_epoch = g.assignment_epoch;
  for (const auto& [id, m] : g.members) {
    v.members.push_back({m.id, m.rack_id, m.epoch, m.client_id, m.client_host, m.subscribed, m.assigned});
  }
  return v;
}

std::vector<std::string> share_groups::list() const {
  std::vector<std::string> out;
  out.reserve(groups_.size());
  for (const auto& [id, g] : groups_) out.push_back(id);
  return out;
}

kafka::error_code share_groups::prepare_admin_change(const std::string& group_id) {
  auto it = groups_.find(group_id);
  if (it == groups_.end()) {
    groups_.emplace(group_id, group{group_id, 0, 0, {}, {}});
    return error_code::none;
  }
  return it->second.members.empty() ? error_code::none : error_code::non_empty_group;
}

std::vector<std::string> share_groups::topics(const std::string& group_id) const {
  auto it = groups_.find(group_id);
  if (it == groups_.end()) return {};
  return {it->second.topics.begin(), it->second.topics.end()};
}

void share_groups::forget_topic(const std::string& group_id, const std::string& topic) {
  if (auto it = groups_.find(group_id); it != groups_.end()) it->second.topics.erase(topic);
}

kafka::error_code share_groups::remove(const std::string& group_id) {
  auto it = groups_.find(group_id);
  if (it == groups_.end()) return error_code::group_id_not_found;
  if (!it->second.members.empty()) return error_code::non_empty_group;
  groups_.erase(it);
  return error_code::none;
}

}  // namespace sluice::share
