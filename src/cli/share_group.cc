#include "cli/share_group.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <thread>
#include <tuple>

#include "base/clock.h"
#include "cli/raw_requests.h"
#include "protocol/error_code.h"

namespace sluice::cli {

using protocol::raw_connection;

namespace {

constexpr int16_t api_versions_version = 0;  // every Kafka answers it
constexpr int16_t share_group_describe_version = 1;
constexpr int16_t alter_share_group_offsets_version = 0;
constexpr int16_t group_id_not_found_code = kafka::to_wire(kafka::error_code::group_id_not_found);
constexpr int16_t non_empty_group_code = kafka::to_wire(kafka::error_code::non_empty_group);

// The highest version of `key` in [lo, hi] that `versions` allows; -1 when none.
int16_t served(const protocol::api_versions_response& versions, int16_t key, int16_t lo, int16_t hi) {
  for (const auto& a : versions.api_keys) {
    if (a.api_key != key) continue;
    const int16_t v = std::min(hi, a.max_version);
    return v >= std::max(lo, a.min_version) ? v : -1;
  }
  return -1;
}

}  // namespace

namespace {

using offsets_result = protocol::describe_share_group_offsets_response::describe_share_offsets_group_result;

// DescribeShareGroupOffsets of every share partition of `group` (topics null).
result<offsets_result> describe_offsets(raw_connection& conn, const std::string& group, int16_t version) {
  protocol::describe_share_group_offsets_request req;
  req.groups.emplace_back().group_id = group;
  SLUICE_ASSIGN_OR_RETURN(auto resp, conn.call<protocol::describe_share_group_offsets_response>(req, version));
  if (resp.groups.size() != 1)
    return error{errc::malformed, "DescribeShareGroupOffsets of " + group + ": " + std::to_string(resp.groups.size()) +
                                      " groups in the answer"};
  return std::move(resp.groups[0]);
}

// -1 (unknown, none) as "-".
std::string shown(int64_t v) { return v >= 0 ? std::to_string(v) : std::string("-"); }

}  // namespace

result<std::optional<share_group_view>> find_share_group(const std::string& bootstrap, const std::string& group,
                                                         std::chrono::milliseconds timeout) {
  const sluice::deadline until(timeout.count(), sluice::clock::system());
  auto again = [&](int16_t code) {
    if (!coordinator_retriable(code) || until.passed()) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return true;
  };
  for (;;) {
    SLUICE_ASSIGN_OR_RETURN(auto coordinator,
                            connect_coordinator(bootstrap, group, coordinator_key_group, timeout, until));
    raw_connection& conn = coordinator.second;
    SLUICE_ASSIGN_OR_RETURN(auto versions,
                            conn.call<protocol::api_versions_response>(protocol::api_versions_request{},
                                                                       api_versions_version));
    using describe = protocol::share_group_describe_request;
    if (served(versions, describe::api_key, share_group_describe_version, share_group_describe_version) < 0)
      return std::optional<share_group_view>();
    const int16_t offsets_version = served(versions, protocol::describe_share_group_offsets_request::api_key, 0, 1);
    describe req;
    req.group_ids = {group};
    SLUICE_ASSIGN_OR_RETURN(auto resp,
                            conn.call<protocol::share_group_describe_response>(req, share_group_describe_version));
    if (resp.groups.size() != 1)
      return error{errc::malformed, "ShareGroupDescribe of " + group + ": " + std::to_string(resp.groups.size()) +
                                        " groups in the answer"};
    auto& g = resp.groups[0];
    if (again(g.error_code)) continue;
    if (g.error_code == group_id_not_found_code) {
      // Membership is memory only: a coordinator that restarted knows a
      // share group by its share partitions' state alone, which
      // DescribeShareGroupOffsets finds (it answers GROUP_ID_NOT_FOUND for a
      // classic group, and for an id with no state here).
      if (offsets_version < 0) return std::optional<share_group_view>();
      SLUICE_ASSIGN_OR_RETURN(auto offsets, describe_offsets(conn, group, offsets_version));
      if (again(offsets.error_code)) continue;
      if (offsets.error_code != 0 || offsets.topics.empty()) return std::optional<share_group_view>();
      g = share_group_description{};
      g.group_id = group;
      g.group_state = "Empty";
      g.group_epoch = g.assignment_epoch = -1;  // not known
    } else if (g.error_code != 0) {
      return error{errc::unavailable, "describing share group " + group + ": " + kafka_failure(g.error_code, g.error_message)};
    }
    share_group_view view{std::move(g), std::move(conn)};
    view.describe_offsets_version = offsets_version;
    view.alters_offsets = served(versions, protocol::alter_share_group_offsets_request::api_key,
                                 alter_share_group_offsets_version, alter_share_group_offsets_version) >= 0;
    return std::optional<share_group_view>(std::move(view));
  }
}

namespace {

// The start offset, lag, and in-flight and archived counts of every share
// partition of the group.
status print_start_offsets(share_group_view& view) {
  const std::string& group = view.group.group_id;
  if (view.describe_offsets_version < 0)
    return status(errc::unsupported_version, "the coordinator does not serve DescribeShareGroupOffsets: no start offsets");
  SLUICE_ASSIGN_OR_RETURN(auto r, describe_offsets(view.coordinator, group, view.describe_offsets_version));
  if (r.error_code != 0)
    return status(errc::unavailable, "the start offsets of " + group + ": " + kafka_failure(r.error_code, r.error_message));
  std::map<std::pair<std::string, int32_t>, std::tuple<int64_t, int32_t, int64_t, int64_t, int64_t>> rows;
  std::string refused;
  for (const auto& t : r.topics) {
    for (const auto& p : t.partitions) {
      if (p.error_code != 0) {
        refused += (refused.empty() ? "" : "; ") + t.topic_name + "-" + std::to_string(p.partition_index) + ": " +
                   kafka_failure(p.error_code, p.error_message);
        continue;
      }
      rows[{t.topic_name, p.partition_index}] = {p.start_offset, p.leader_epoch, p.lag, p.in_flight, p.archived};
    }
  }
  // "-": no state yet (the share partition was never fetched from), no
  // lag known (v0, or the coordinator cannot tell), or no counts (a broker
  // other than Sluice: they are Sluice's tagged fields).
  for (const auto& [tp, v] : rows) {
    const auto& [start, epoch, lag, in_flight, archived] = v;
    std::printf("partition %s-%d\tstart_offset=%s\tleader_epoch=%s\tlag=%s\tin_flight=%s\tarchived=%s\n",
                tp.first.c_str(), tp.second, shown(start).c_str(), shown(epoch).c_str(), shown(lag).c_str(),
                shown(in_flight).c_str(), shown(archived).c_str());
  }
  if (!refused.empty()) return status(errc::unavailable, "start offsets not described: " + refused);
  return {};
}

}  // namespace

int print_share_group(share_group_view& view) {
  const auto& g = view.group;
  std::printf("group %s\ttype=share\tstate=%s\tgroup_epoch=%s\tassignment_epoch=%s\tassignor=%s\tmembers=%zu\n",
              g.group_id.c_str(), g.group_state.c_str(), shown(g.group_epoch).c_str(), shown(g.assignment_epoch).c_str(),
              g.assignor_name.empty() ? "-" : g.assignor_name.c_str(), g.members.size());
  auto members = g.members;
  std::sort(members.begin(), members.end(), [](const auto& a, const auto& b) { return a.member_id < b.member_id; });
  for (const auto& m : members) {
    std::vector<std::pair<std::string, int32_t>> parts;
    for (const auto& t : m.assignment.topic_partitions)
      for (int32_t p : t.partitions) parts.emplace_back(t.topic_name, p);
    std::sort(parts.begin(), parts.end());
    std::string assigned;
    for (const auto& [topic, p] : parts) assigned += (assigned.empty() ? "" : ",") + topic + "-" + std::to_string(p);
    std::printf("member %s\tclient=%s\thost=%s\tmember_epoch=%d%s%s\tpartitions=%s\n", m.member_id.c_str(),
                m.client_id.c_str(), m.client_host.c_str(), m.member_epoch, m.rack_id ? "\track=" : "",
                m.rack_id ? m.rack_id->c_str() : "", assigned.c_str());
  }
  std::fflush(stdout);
  auto s = print_start_offsets(view);
  if (s.ok()) return 0;
  std::fprintf(stderr, "sluice group: %s\n", s.err().message.c_str());
  return 1;
}

status alter_share_group_offsets(share_group_view& view, const std::vector<share_start_offset>& offsets) {
  const std::string& group = view.group.group_id;
  if (!view.alters_offsets)
    return status(errc::unsupported_version, "the coordinator of " + group + " does not serve AlterShareGroupOffsets");
  protocol::alter_share_group_offsets_request req;
  req.group_id = group;
  for (const auto& o : offsets) {
    if (req.topics.empty() || req.topics.back().topic_name != o.topic) req.topics.emplace_back().topic_name = o.topic;
    auto& p = req.topics.back().partitions.emplace_back();
    p.partition_index = o.partition;
    p.start_offset = o.start_offset;
  }
  SLUICE_ASSIGN_OR_RETURN(auto resp, view.coordinator.call<protocol::alter_share_group_offsets_response>(
                                         req, alter_share_group_offsets_version));
  if (resp.error_code == non_empty_group_code)
    return status(errc::invalid_argument, "share group " + group +
                                              " has members: stop its share consumers first (" +
                                              kafka_failure(resp.error_code, resp.error_message) + ")");
  if (resp.error_code != 0)
    return status(errc::unavailable, "altering the start offsets of " + group + ": " +
                                         kafka_failure(resp.error_code, resp.error_message));
  std::string refused;
  for (const auto& t : resp.responses) {
    for (const auto& p : t.partitions) {
      if (p.error_code == 0) continue;
      refused += (refused.empty() ? "" : "; ") + t.topic_name + "-" + std::to_string(p.partition_index) + ": " +
                 kafka_failure(p.error_code, p.error_message);
    }
  }
  if (!refused.empty()) return status(errc::invalid_argument, "start offsets refused: " + refused);
  return {};
}

}  // namespace sluice::cli

namespace sluice::cli {

result<std::map<std::string, std::string>> list_share_groups(const std::string& bootstrap,
                                                             std::chrono::milliseconds timeout) {
  constexpr int16_t list_groups_version = 5;  // the first with group types
  SLUICE_ASSIGN_OR_RETURN(auto conn, raw_connection::connect_any(bootstrap, timeout));
  protocol::metadata_request mreq;
  mreq.topics.emplace();  // no topics: the brokers alone
  mreq.allow_auto_topic_creation = false;
  SLUICE_ASSIGN_OR_RETURN(auto md, conn.call<protocol::metadata_response>(mreq, protocol::metadata_version));
  std::map<std::string, std::string> out;
  for (const auto& b : md.brokers) {
    const std::string where = "broker " + std::to_string(b.node_id) + " (" + protocol::endpoint_of(b.host, b.port) + ")";
    auto bc = raw_connection::connect(protocol::endpoint_of(b.host, b.port), timeout);
    if (!bc) return error{errc::unavailable, where + ": " + bc.err().message};
    SLUICE_ASSIGN_OR_RETURN(auto versions, bc->call<protocol::api_versions_response>(protocol::api_versions_request{},
                                                                                    api_versions_version));
    if (served(versions, protocol::list_groups_request::api_key, list_groups_version, list_groups_version) < 0)
      continue;  // no group types: no share groups there
    protocol::list_groups_request req;
    req.types_filter = {"share"};
    auto r = bc->call<protocol::list_groups_response>(req, list_groups_version);
    if (!r) return error{errc::unavailable, where + ": " + r.err().message};
    if (r->error_code != 0) return error{errc::unavailable, where + ": " + kafka_failure(r->error_code, std::nullopt)};
    for (const auto& g : r->groups) out[g.group_id] = g.group_state;
  }
  return out;
}

}  // namespace sluice::cli
