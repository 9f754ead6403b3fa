#include "group/membership.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "base/limits.h"
#include "base/log.h"
#include "protocol/consumer_protocol.h"

namespace sluice::group {

using kafka::error_code;
using kafka::to_wire;
namespace proto = protocol;

std::string_view state_name(group_state s) {
  switch (s) {
    case group_state::empty: return "Empty";
    case group_state::preparing_rebalance: return "PreparingRebalance";
    case group_state::completing_rebalance: return "CompletingRebalance";
    case group_state::stable: return "Stable";
    case group_state::dead: return "Dead";
  }
  return "Dead";
}

// ---- State ------------------------------------------------------------------

using protocol_list = std::vector<std::pair<std::string, std::vector<uint8_t>>>;

struct membership::member {
  std::string id;
  std::optional<std::string> instance_id;
  std::string client_id;
  std::string client_host;
  int32_t session_timeout_ms = 0;
  int32_t rebalance_timeout_ms = 0;
  protocol_list protocols;
  std::vector<uint8_t> assignment;
  int64_t last_heartbeat_ms = 0;  // monotonic
  // A JoinGroup or SyncGroup waiting for the rebalance to progress. While
  // one waits the member is not expired: the client is doing what we asked.
  reply<proto::join_group_response> join_cb;
  reply<proto::sync_group_response> sync_cb;

  const std::vector<uint8_t>* metadata_for(const std::optional<std::string>& name) const {
    if (!name) return nullptr;
    for (const auto& [n, md] : protocols)
      if (n == *name) return &md;
    return nullptr;
  }
};

struct membership::group {
  std::string id;
  int32_t partition = 0;  // of __consumer_offsets
  group_state state = group_state::empty;
  int32_t generation = 0;
  std::string protocol_type;
  std::optional<std::string> protocol_name;
  std::string leader;  // member id; empty when none
  std::map<std::string, member> members;
  std::map<std::string, std::string> static_members;  // group.instance.id -> member id
  std::map<std::string, int64_t> pending_members;     // ids handed out with MEMBER_ID_REQUIRED -> expiry
  int64_t rebalance_deadline_ms = 0;                  // monotonic
  int64_t join_not_before_ms = 0;                     // initial rebalance delay, monotonic
  int64_t state_timestamp_ms = -1;                    // wall clock of the last state change
  // The leader's assignment while its group record is being written.
  std::optional<std::map<std::string, std::vector<uint8_t>>> pending_assignment;
};

namespace {

bool valid_group_id(const std::string& id) { return !id.empty() && id.size() <= limits::max_group_id_bytes; }

protocol_list to_protocols(const proto::join_group_request& req) {
  protocol_list out;
  out.reserve(req.protocols.size());
  for (const auto& p : req.protocols) out.emplace_back(p.name, p.metadata);
  return out;
}

int32_t rebalance_timeout_of(const proto::join_group_request& req) {
  return req.rebalance_timeout_ms > 0 ? req.rebalance_timeout_ms : req.session_timeout_ms;
}

proto::join_group_response join_error_response(error_code e, const std::string& member_id) {
  proto::join_group_response r;
  r.error_code = to_wire(e);
  r.member_id = member_id;
  return r;
}

proto::sync_group_response sync_error_response(error_code e) {
  proto::sync_group_response r;
  r.error_code = to_wire(e);
  return r;
}

}  // namespace

// ---- Construction, the registry ---------------------------------------------------

membership::membership(const coordinator_config& cfg, offsets_partitions& partitions, sluice::clock& clk)
    : cfg_(cfg), partitions_(partitions), clk_(clk), rng_(std::random_device{}()) {}

membership::~membership() = default;

membership::group* membership::find(const std::string& id) {
  auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : it->second.get();
}

const membership::group* membership::find(const std::string& id) const {
  auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : it->second.get();
}

membership::group* membership::create(const std::string& id) {
  auto g = std::make_unique<group>();
  g->id = id;
  g->partition = partitions_.partition_of(id);
  g->state_timestamp_ms = clk_.now_ms();
  group* raw = g.get();
  groups_.emplace(id, std::move(g));
  return raw;
}

void membership::ensure(const std::string& id) {
  if (find(id)) return;
  create(id)->state_timestamp_ms = -1;
}

void membership::erase(const std::string& id) {
  auto it = groups_.find(id);
  if (it != groups_.end()) groups_.erase(it);
}

std::vector<std::string> membership::groups_of(int32_t p) const {
  std::vector<std::string> ids;
  for (const auto& [id, g] : groups_)
    if (g->partition == p) ids.push_back(id);
  return ids;
}

void membership::restart_sessions(int32_t p) {
  const int64_t now = clk_.monotonic_ms();
  for (auto& [_, g] : groups_) {
    if (g->partition != p) continue;
    for (auto& [_, m] : g->members) m.last_heartbeat_ms = now;
  }
}

void membership::answer_waiting(std::optional<int32_t> p, error_code e, outbox& out) {
  for (auto& [_, g] : groups_) {
    if (p && g->partition != *p) continue;
    for (auto& [id, m] : g->members) {
      answer(m.join_cb, join_error_response(e, id), out);
      answer(m.sync_cb, sync_error_response(e), out);
    }
  }
}

bool membership::fenced(const group& g, const std::optional<std::string>& instance_id, const std::string& member_id) {
  if (!instance_id) return false;
  auto s = g.static_members.find(*instance_id);
  return s != g.static_members.end() && s->second != member_id;
}

membership::member_lookup membership::lookup_member(const std::string& group_id,
                                                    const std::optional<std::string>& instance_id,
                                                    const std::string& member_id, int32_t generation) {
  member_lookup r;
  auto fail = [&](error_code e) {
    r.error = e;
    return r;
  };
  if (auto e = partitions_.gate(group_id); e != error_code::none) return fail(e);
  if (!valid_group_id(group_id)) return fail(error_code::invalid_group_id);
  group* g = find(group_id);
  if (!g) return fail(error_code::unknown_member_id);
  if (g->state == group_state::dead) return fail(error_code::coordinator_not_available);
  if (fenced(*g, instance_id, member_id)) return fail(error_code::fenced_instance_id);
  auto it = g->members.find(member_id);
  if (it == g->members.end()) return fail(error_code::unknown_member_id);
  if (generation != g->generation) return fail(error_code::illegal_generation);
  r.g = g;
  r.m = &it->second;
  return r;
}

bool membership::new_member_fits(const group& g) const {
  return g.members.size() + g.pending_members.size() < static_cast<size_t>(cfg_.max_group_size);
}

std::string membership::new_member_id(const std::string& client_id) {
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(rng_()),
                static_cast<unsigned long long>(rng_()));
  return client_id.substr(0, 128) + "-" + hex;
}

// ---- Records --------------------------------------------------------------------

group_value membership::snapshot(const group& g) const {
  group_value v;
  v.protocol_type = g.protocol_type;
  v.generation = g.generation;
  v.protocol = g.protocol_name;
  if (!g.leader.empty()) v.leader = g.leader;
  v.current_state_timestamp_ms = g.state_timestamp_ms;
  for (const auto& [id, m] : g.members) {
    member_value mv;
    mv.member_id = id;
    mv.group_instance_id = m.instance_id;
    mv.client_id = m.client_id;
    mv.client_host = m.client_host;
    mv.rebalance_timeout_ms = m.rebalance_timeout_ms;
    mv.session_timeout_ms = m.session_timeout_ms;
    if (const auto* md = m.metadata_for(g.protocol_name)) mv.subscription = *md;
    if (g.pending_assignment) {
      auto it = g.pending_assignment->find(id);
      if (it != g.pending_assignment->end()) mv.assignment = it->second;
    } else {
      mv.assignment = m.assignment;
    }
    v.members.push_back(std::move(mv));
  }
  return v;
}

void membership::append_group(group& g, offsets_partitions::then_fn then) {
  protocol::records::record_input r;
  r.key = encode_key(group_key{g.id});
  r.value = encode_value(snapshot(g));
  r.timestamp_ms = clk_.now_ms();
  std::vector<protocol::records::record_input> recs;
  recs.push_back(std::move(r));
  const std::string id = g.id;
  partitions_.append(id, std::move(recs), [id, then = std::move(then)](status s, outbox& out) {
    if (!s.ok()) SLUICE_LOG_WARN("group {}: writing its metadata failed: {}", id, s.err().message);
    if (then) then(s, out);
  });
}

void membership::apply(const std::string& id, const group_value& v) {
  group* g = find(id);
  if (!g) g = create(id);
  g->generation = v.generation;
  g->protocol_type = v.protocol_type;
  g->protocol_name = v.protocol;
  g->leader = v.leader.value_or("");
  g->state_timestamp_ms = v.current_state_timestamp_ms;
  g->members.clear();
  g->static_members.clear();
  g->pending_members.clear();
  const int64_t now = clk_.monotonic_ms();
  for (const auto& mv : v.members) {
    member m;
    m.id = mv.member_id;
    m.instance_id = mv.group_instance_id;
    m.client_id = mv.client_id;
    m.client_host = mv.client_host;
    m.session_timeout_ms = mv.session_timeout_ms;
    m.rebalance_timeout_ms = mv.rebalance_timeout_ms;
    m.protocols.emplace_back(v.protocol.value_or(""), mv.subscription);
    m.assignment = mv.assignment;
    m.last_heartbeat_ms = now;
    if (m.instance_id) g->static_members[*m.instance_id] = m.id;
    g->members.emplace(m.id, std::move(m));
  }
  g->state = g->members.empty() ? group_state::empty : group_state::stable;
}

// ---- Rebalance machinery ------------------------------------------------------------

membership::member& membership::add_member(group& g, const std::string& member_id, const proto::join_group_request& req,
                                           const std::string& client_id, const std::string& client_host) {
  if (g.members.empty()) g.protocol_type = req.protocol_type;
  member m;
  m.id = member_id;
  m.instance_id = req.group_instance_id;
  m.client_id = client_id;
  m.client_host = client_host;
  m.session_timeout_ms = req.session_timeout_ms;
  m.rebalance_timeout_ms = rebalance_timeout_of(req);
  m.protocols = to_protocols(req);
  m.last_heartbeat_ms = clk_.monotonic_ms();
  if (m.instance_id) g.static_members[*m.instance_id] = member_id;
  return g.members.emplace(member_id, std::move(m)).first->second;
}

void membership::prepare_rebalance(group& g, outbox& out, const char* why) {
  if (g.state == group_state::completing_rebalance) {
    // The assignment being synced is for a generation that will not be.
    for (auto& [_, m] : g.members) answer(m.sync_cb, sync_error_response(error_code::rebalance_in_progress), out);
  }
  const bool was_empty = g.state == group_state::empty;
  const int64_t now = clk_.monotonic_ms();
  int32_t longest = 0;
  for (const auto& [_, m] : g.members) longest = std::max(longest, m.rebalance_timeout_ms);
  g.state = group_state::preparing_rebalance;
  g.state_timestamp_ms = clk_.now_ms();
  g.rebalance_deadline_ms = now + longest;
  g.join_not_before_ms = was_empty ? now + std::min(cfg_.initial_rebalance_delay_ms, longest) : 0;
  SLUICE_LOG_INFO("group {}: preparing rebalance at generation {}: {}", g.id, g.generation, why);
  maybe_complete_join(g, out);
}

void membership::maybe_complete_join(group& g, outbox& out) {
  if (g.state != group_state::preparing_rebalance) return;
  const int64_t now = clk_.monotonic_ms();
  bool all_joined = g.pending_members.empty();
  for (const auto& [_, m] : g.members) all_joined = all_joined && static_cast<bool>(m.join_cb);
  if (all_joined && now >= g.join_not_before_ms) {
    complete_join(g, out);
    return;
  }
  if (now < g.rebalance_deadline_ms) return;
  // The rebalance timeout passed: members that did not rejoin are out.
  std::vector<std::string> gone;
  for (const auto& [id, m] : g.members)
    if (!m.join_cb) gone.push_back(id);
  for (const auto& id : gone) {
    SLUICE_LOG_INFO("group {}: member {} did not rejoin within the rebalance timeout", g.id, id);
    remove_member(g, id, out);
  }
  g.pending_members.clear();
  complete_join(g, out);
}

// Among the protocols every member supports, the one most members prefer
// (each votes for its first supported one).
std::string membership::choose_protocol(const group& g) {
  std::vector<std::string> candidates;
  for (const auto& [name, _] : g.members.begin()->second.protocols) {
    bool all = std::all_of(g.members.begin(), g.members.end(),
                           [&](const auto& kv) { return kv.second.metadata_for(name) != nullptr; });
    if (all) candidates.push_back(name);
  }
  if (candidates.empty()) candidates.push_back(g.members.begin()->second.protocols.front().first);
  std::map<std::string, int> votes;
  for (const auto& [_, m] : g.members) {
    for (const auto& [name, __] : m.protocols) {
      if (std::find(candidates.begin(), candidates.end(), name) != candidates.end()) {
        ++votes[name];
        break;
      }
    }
  }
  std::string chosen = candidates.front();
  for (const auto& c : candidates)
    if (votes[c] > votes[chosen]) chosen = c;
  return chosen;
}

void membership::complete_join(group& g, outbox& out) {
  ++g.generation;
  g.state_timestamp_ms = clk_.now_ms();
  if (g.members.empty()) {
    g.state = group_state::empty;
    g.protocol_name.reset();
    g.leader.clear();
    SLUICE_LOG_INFO("group {}: empty at generation {}", g.id, g.generation);
    append_group(g, nullptr);
    return;
  }
  const std::string chosen = choose_protocol(g);
  g.protocol_name = chosen;
  if (!g.members.count(g.leader)) g.leader = g.members.begin()->first;
  g.state = group_state::completing_rebalance;
  g.pending_assignment.reset();
  const int64_t now = clk_.monotonic_ms();
  for (auto& [_, m] : g.members) {
    m.assignment.clear();
    m.last_heartbeat_ms = now;
    answer(m.join_cb, join_response(g, m), out);
  }
  SLUICE_LOG_INFO("group {}: generation {} with {} members, protocol {}, leader {}", g.id, g.generation,
                  g.members.size(), chosen, g.leader);
}

proto::join_group_response membership::join_response(const group& g, const member& m) const {
  proto::join_group_response r;
  r.generation_id = g.generation;
  r.protocol_type = g.protocol_type;  // v7+ (KIP-559)
  r.protocol_name = g.protocol_name;
  r.leader = g.leader;
  r.member_id = m.id;
  if (m.id == g.leader) {
    for (const auto& [id, other] : g.members) {
      auto& e = r.members.emplace_back();
      e.member_id = id;
      e.group_instance_id = other.instance_id;
      if (const auto* md = other.metadata_for(g.protocol_name)) e.metadata = *md;
    }
  }
  return r;
}

void membership::remove_member(group& g, const std::string& member_id, outbox& out) {
  auto it = g.members.find(member_id);
  if (it == g.members.end()) return;
  member& m = it->second;
  answer(m.join_cb, join_error_response(error_code::unknown_member_id, member_id), out);
  answer(m.sync_cb, sync_error_response(error_code::unknown_member_id), out);
  if (m.instance_id) {
    auto s = g.static_members.find(*m.instance_id);
    if (s != g.static_members.end() && s->second == member_id) g.static_members.erase(s);
  }
  if (g.leader == member_id) g.leader.clear();
  g.members.erase(it);
}

void membership::after_member_removed(group& g, outbox& out) {
  if (g.state == group_state::stable || g.state == group_state::completing_rebalance) {
    prepare_rebalance(g, out, "a member left");
  } else {
    maybe_complete_join(g, out);
  }
}

// ---- JoinGroup ------------------------------------------------------------------------

// What JoinGroup refuses before looking at the group.
error_code membership::join_error(const proto::join_group_request& req) const {
  if (!valid_group_id(req.group_id)) return error_code::invalid_group_id;
  if (req.session_timeout_ms < cfg_.min_session_timeout_ms || req.session_timeout_ms > cfg_.max_session_timeout_ms)
    return error_code::invalid_session_timeout;
  if (req.protocol_type.empty() || req.protocols.empty()) return error_code::inconsistent_group_protocol;
  size_t metadata_bytes = 0;
  for (const auto& p : req.protocols) metadata_bytes += p.metadata.size() + p.name.size();
  if (req.protocols.size() > limits::max_protocols_per_member || metadata_bytes > limits::max_member_metadata_bytes ||
      req.protocol_type.size() > limits::max_name_bytes ||
      (req.group_instance_id && (req.group_instance_id->empty() || req.group_instance_id->size() > limits::max_name_bytes)) ||
      req.member_id.size() > limits::max_name_bytes)
    return error_code::invalid_request;
  return error_code::none;
}

// The protocol must fit the group: same type, and a protocol every current
// member also supports.
bool membership::protocol_fits(const group& g, const proto::join_group_request& req) {
  if (g.members.empty()) return true;
  if (req.protocol_type != g.protocol_type) return false;
  for (const auto& p : req.protocols) {
    bool all = std::all_of(g.members.begin(), g.members.end(), [&](const auto& kv) {
      return kv.first == req.member_id || kv.second.metadata_for(p.name) != nullptr;
    });
    if (all) return true;
  }
  return false;
}

void membership::join_group(const proto::join_group_request& req, int16_t version, const std::string& client_id,
                            const std::string& client_host, reply<proto::join_group_response> cb, outbox& out) {
  auto fail = [&](error_code e) { answer(cb, join_error_response(e, req.member_id), out); };
  if (auto e = partitions_.gate(req.group_id); e != error_code::none) return fail(e);
  if (auto e = join_error(req); e != error_code::none) return fail(e);
  group* g = find(req.group_id);
  if (!g) {
    if (!req.member_id.empty()) return fail(error_code::unknown_member_id);
    if (groups_.size() >= limits::max_groups) {
      SLUICE_LOG_WARN("refusing group {}: the broker holds {} groups already", req.group_id, groups_.size());
      return fail(error_code::coordinator_not_available);
    }
    g = create(req.group_id);
  }
  if (g->state == group_state::dead) return fail(error_code::coordinator_not_available);
  if (!protocol_fits(*g, req)) return fail(error_code::inconsistent_group_protocol);
  if (req.member_id.empty()) return join_new(*g, req, version, client_id, client_host, cb, out);

  if (auto p = g->pending_members.find(req.member_id); p != g->pending_members.end()) {
    g->pending_members.erase(p);
    member& m = add_member(*g, req.member_id, req, client_id, client_host);
    return wait_in_rebalance(*g, m, cb, out, "a new member joined");
  }
  if (fenced(*g, req.group_instance_id, req.member_id)) return fail(error_code::fenced_instance_id);
  auto it = g->members.find(req.member_id);
  if (it == g->members.end()) return fail(error_code::unknown_member_id);
  rejoin(*g, it->second, req, cb, out);
}

void membership::wait_in_rebalance(group& g, member& m, reply<proto::join_group_response>& cb, outbox& out,
                                   const char* why) {
  m.join_cb = std::move(cb);
  if (g.state == group_state::preparing_rebalance) {
    maybe_complete_join(g, out);
  } else {
    prepare_rebalance(g, out, why);
  }
}

// A JoinGroup without a member id.
void membership::join_new(group& g, const proto::join_group_request& req, int16_t version,
                          const std::string& client_id, const std::string& client_host,
                          reply<proto::join_group_response>& cb, outbox& out) {
  if (req.group_instance_id) return join_static(g, req, client_id, client_host, cb, out);
  if (!new_member_fits(g)) return answer(cb, join_error_response(error_code::group_max_size_reached, ""), out);
  std::string id = new_member_id(client_id);
  if (version >= 4) {
    // KIP-394: the client must come back with this id; until then it
    // holds a place in the group for one session timeout.
    g.pending_members[id] = clk_.monotonic_ms() + req.session_timeout_ms;
    return answer(cb, join_error_response(error_code::member_id_required, id), out);
  }
  member& m = add_member(g, id, req, client_id, client_host);
  wait_in_rebalance(g, m, cb, out, "a new member joined");
}

// A JoinGroup of a known member.
void membership::rejoin(group& g, member& m, const proto::join_group_request& req,
                        reply<proto::join_group_response>& cb, outbox& out) {
  const protocol_list protocols = to_protocols(req);
  const bool changed = protocols != m.protocols;
  m.protocols = protocols;
  m.session_timeout_ms = req.session_timeout_ms;
  m.rebalance_timeout_ms = rebalance_timeout_of(req);
  m.last_heartbeat_ms = clk_.monotonic_ms();
  switch (g.state) {
    case group_state::preparing_rebalance:
      // An earlier join of the same member, replaced.
      answer(m.join_cb, join_error_response(error_code::rebalance_in_progress, m.id), out);
      m.join_cb = std::move(cb);
      maybe_complete_join(g, out);
      return;
    case group_state::completing_rebalance:
    case group_state::stable:
      // A member that only repeats its join (lost the response) gets the
      // current generation back; the leader or a changed subscription
      // means a new assignment is needed.
      if (!changed && (g.state == group_state::completing_rebalance || m.id != g.leader)) {
        answer(cb, join_response(g, m), out);
        return;
      }
      m.join_cb = std::move(cb);
      prepare_rebalance(g, out, changed ? "a member changed its subscription" : "the leader rejoined");
      return;
    case group_state::empty:
    case group_state::dead:
      answer(cb, join_error_response(error_code::unknown_member_id, req.member_id), out);
      return;
  }
}

void membership::join_static(group& g, const proto::join_group_request& req, const std::string& client_id,
                             const std::string& client_host, reply<proto::join_group_response>& cb, outbox& out) {
  const std::string& instance = *req.group_instance_id;
  auto s = g.static_members.find(instance);
  if (s == g.static_members.end()) {
    if (!new_member_fits(g)) return answer(cb, join_error_response(error_code::group_max_size_reached, ""), out);
    member& m = add_member(g, new_member_id(client_id), req, client_id, client_host);
    return wait_in_rebalance(g, m, cb, out, "a new static member joined");
  }
  // A known instance restarted: it takes over the old member's place under
  // a new member id, which fences the old process (KIP-345).
  const std::string old_id = s->second;
  auto node = g.members.extract(old_id);
  member m = std::move(node.mapped());
  answer(m.join_cb, join_error_response(error_code::fenced_instance_id, old_id), out);
  answer(m.sync_cb, sync_error_response(error_code::fenced_instance_id), out);
  const protocol_list protocols = to_protocols(req);
  const bool changed = protocols != m.protocols;
  m.id = new_member_id(client_id);
  m.client_id = client_id;
  m.client_host = client_host;
  m.protocols = protocols;
  m.session_timeout_ms = req.session_timeout_ms;
  m.rebalance_timeout_ms = rebalance_timeout_of(req);
  m.last_heartbeat_ms = clk_.monotonic_ms();
  const std::string new_id = m.id;
  s->second = new_id;
  if (g.leader == old_id) g.leader = new_id;
  member& placed = g.members.emplace(new_id, std::move(m)).first->second;
  SLUICE_LOG_INFO("group {}: static member {} rejoined as {} (was {})", g.id, instance, new_id, old_id);
  if (g.state == group_state::stable && !changed) return confirm_static_rejoin(g, new_id, cb);
  wait_in_rebalance(g, placed, cb, out, "a static member rejoined with a new subscription");
}

// No rebalance: record the new member id, then tell the member the current
// generation. SyncGroup gives it its assignment back. (A rejoining leader
// gets the member list but its SyncGroup in a Stable group changes nothing,
// so every member keeps what it has.)
void membership::confirm_static_rejoin(group& g, const std::string& new_id, reply<proto::join_group_response>& cb) {
  const std::string group_id = g.id;
  append_group(g, [this, group_id, new_id, cb = std::move(cb)](status st, outbox& out) mutable {
    group* g = find(group_id);
    if (!st.ok() && st.code() == errc::not_coordinator) {
      // The partition was unloaded meanwhile: the group is not ours now.
      return answer(cb, join_error_response(error_code::not_coordinator, new_id), out);
    }
    if (!g || !g->members.count(new_id)) return answer(cb, join_error_response(error_code::unknown_member_id, ""), out);
    if (!st.ok()) {
      const auto e = kafka::to_group_write_error(st.code(), kafka::group_write::group_metadata);
      return answer(cb, join_error_response(e, new_id), out);
    }
    answer(cb, join_response(*g, g->members.at(new_id)), out);
  });
  cb = nullptr;
}

// ---- SyncGroup ----------------------------------------------------------------------------

void membership::sync_group(const proto::sync_group_request& req, reply<proto::sync_group_response> cb, outbox& out) {
  auto fail = [&](error_code e) { answer(cb, sync_error_response(e), out); };
  auto found = lookup_member(req.group_id, req.group_instance_id, req.member_id, req.generation_id);
  if (found.error != error_code::none) return fail(found.error);
  group* g = found.g;
  member& m = *found.m;
  // v5 (KIP-559): a protocol type or name the member names must be the
  // group's; an absent one (null, or below v5) is not checked.
  if ((req.protocol_type && *req.protocol_type != g->protocol_type) ||
      (req.protocol_name && g->protocol_name && *req.protocol_name != *g->protocol_name)) {
    return fail(error_code::inconsistent_group_protocol);
  }
  m.last_heartbeat_ms = clk_.monotonic_ms();
  switch (g->state) {
    case group_state::empty:
    case group_state::dead:
      return fail(error_code::unknown_member_id);
    case group_state::preparing_rebalance:
      return fail(error_code::rebalance_in_progress);
    case group_state::stable: {
      proto::sync_group_response r;
      r.protocol_type = g->protocol_type;
      r.protocol_name = g->protocol_name;
      r.assignment = m.assignment;
      return answer(cb, std::move(r), out);
    }
    case group_state::completing_rebalance:
      break;
  }
  if (m.id == g->leader && !g->pending_assignment) {
    std::map<std::string, std::vector<uint8_t>> assignment;
    for (const auto& a : req.assignments) {
      if (a.assignment.size() > limits::max_assignment_bytes) return fail(error_code::invalid_request);
      if (g->members.count(a.member_id)) assignment[a.member_id] = a.assignment;
    }
    g->pending_assignment = std::move(assignment);
    const int32_t generation = g->generation;
    const std::string group_id = g->id;
    append_group(*g, [this, group_id, generation](status s, outbox& out) {
      if (group* g = find(group_id)) finish_sync(*g, generation, s, out);
    });
  }
  answer(m.sync_cb, sync_error_response(error_code::rebalance_in_progress), out);  // superseded
  m.sync_cb = std::move(cb);
}

void membership::finish_sync(group& g, int32_t generation, status s, outbox& out) {
  if (g.generation != generation || g.state != group_state::completing_rebalance || !g.pending_assignment) return;
  auto assignment = std::move(*g.pending_assignment);
  g.pending_assignment.reset();
  if (!s.ok()) {
    const auto e = kafka::to_group_write_error(s.code(), kafka::group_write::group_metadata);
    for (auto& [_, m] : g.members) answer(m.sync_cb, sync_error_response(e), out);
    prepare_rebalance(g, out, "its assignment could not be written");
    return;
  }
  g.state = group_state::stable;
  g.state_timestamp_ms = clk_.now_ms();
  const int64_t now = clk_.monotonic_ms();
  for (auto& [id, m] : g.members) {
    auto a = assignment.find(id);
    m.assignment = a == assignment.end() ? std::vector<uint8_t>{} : std::move(a->second);
    if (m.sync_cb) m.last_heartbeat_ms = now;
    proto::sync_group_response r;
    r.protocol_type = g.protocol_type;
    r.protocol_name = g.protocol_name;
    r.assignment = m.assignment;
    answer(m.sync_cb, std::move(r), out);
  }
  SLUICE_LOG_INFO("group {}: stable at generation {}", g.id, g.generation);
}

// ---- Heartbeat, LeaveGroup ------------------------------------------------------------------

proto::heartbeat_response membership::heartbeat(const proto::heartbeat_request& req) {
  proto::heartbeat_response r;
  auto err = [&](error_code e) {
    r.error_code = to_wire(e);
    return r;
  };
  auto found = lookup_member(req.group_id, req.group_instance_id, req.member_id, req.generation_id);
  if (found.error != error_code::none) return err(found.error);
  found.m->last_heartbeat_ms = clk_.monotonic_ms();
  if (found.g->state == group_state::preparing_rebalance) return err(error_code::rebalance_in_progress);
  return r;
}

proto::leave_group_response membership::leave_group(const proto::leave_group_request& req, int16_t version,
                                                    outbox& out) {
  proto::leave_group_response r;
  auto err = [&](error_code e) {
    r.error_code = to_wire(e);
    return r;
  };
  if (auto e = partitions_.gate(req.group_id); e != error_code::none) return err(e);
  if (!valid_group_id(req.group_id)) return err(error_code::invalid_group_id);
  std::vector<proto::leave_group_request::member_identity> leaving;
  if (version >= 3) {
    leaving = req.members;
  } else {
    leaving.push_back({req.member_id, std::nullopt});
  }
  group* g = find(req.group_id);
  if (g && g->state == group_state::dead) return err(error_code::coordinator_not_available);
  bool removed = false;
  for (const auto& l : leaving) {
    auto& mr = r.members.emplace_back();
    mr.member_id = l.member_id;
    mr.group_instance_id = l.group_instance_id;
    mr.error_code = to_wire(leave_one(g, l, removed, out));
  }
  if (g && removed) after_member_removed(*g, out);
  if (version < 3) {
    r.error_code = r.members.front().error_code;
    r.members.clear();
  }
  return r;
}

// One member of a LeaveGroup; `removed` is set when it left.
error_code membership::leave_one(group* g, const proto::leave_group_request::member_identity& l, bool& removed,
                                 outbox& out) {
  if (!g) return error_code::unknown_member_id;
  if (l.group_instance_id) {
    auto s = g->static_members.find(*l.group_instance_id);
    if (s == g->static_members.end()) return error_code::unknown_member_id;
    if (!l.member_id.empty() && s->second != l.member_id) return error_code::fenced_instance_id;
    SLUICE_LOG_INFO("group {}: static member {} ({}) left", g->id, *l.group_instance_id, s->second);
    remove_member(*g, std::string(s->second), out);
    removed = true;
    return error_code::none;
  }
  if (g->members.count(l.member_id)) {
    SLUICE_LOG_INFO("group {}: member {} left", g->id, l.member_id);
    remove_member(*g, l.member_id, out);
    removed = true;
    return error_code::none;
  }
  if (g->pending_members.erase(l.member_id) > 0) {
    removed = true;
    return error_code::none;
  }
  return error_code::unknown_member_id;
}

// ---- Admin views ----------------------------------------------------------------------------------

proto::describe_groups_response membership::describe_groups(const proto::describe_groups_request& req) {
  proto::describe_groups_response resp;
  for (const auto& id : req.groups) {
    auto& d = resp.groups.emplace_back();
    d.group_id = id;
    if (auto e = partitions_.gate(id); e != error_code::none) {
      d.error_code = to_wire(e);
      continue;
    }
    if (!valid_group_id(id)) {
      d.error_code = to_wire(error_code::invalid_group_id);
      continue;
    }
    const group* g = find(id);
    if (!g) {
      d.group_state = "Dead";
      continue;
    }
    d.group_state = std::string(state_name(g->state));
    d.protocol_type = g->protocol_type;
    const bool stable = g->state == group_state::stable;
    if (stable) d.protocol_data = g->protocol_name.value_or("");
    for (const auto& [mid, m] : g->members) {
      auto& dm = d.members.emplace_back();
      dm.member_id = mid;
      dm.group_instance_id = m.instance_id;
      dm.client_id = m.client_id;
      dm.client_host = m.client_host;
      if (stable) {
        if (const auto* md = m.metadata_for(g->protocol_name)) dm.member_metadata = *md;
        dm.member_assignment = m.assignment;
      }
    }
  }
  return resp;
}

proto::list_groups_response membership::list_groups(const proto::list_groups_request& req) {
  proto::list_groups_response resp;
  if (partitions_.closed() || partitions_.any_loading()) {
    resp.error_code = to_wire(error_code::coordinator_load_in_progress);
    return resp;
  }
  auto lower = [](std::string_view s) {
    std::string o(s);
    for (auto& c : o) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return o;
  };
  std::set<std::string> filter;
  for (const auto& s : req.states_filter) filter.insert(lower(s));
  // v5 (KIP-848): every group here is a classic one.
  constexpr std::string_view group_type = "classic";
  std::set<std::string> types;
  for (const auto& t : req.types_filter) types.insert(lower(t));
  if (!types.empty() && !types.count(std::string(group_type))) return resp;
  for (const auto& [id, g] : groups_) {
    if (g->state == group_state::dead) continue;
    if (!filter.empty() && !filter.count(lower(state_name(g->state)))) continue;
    auto& l = resp.groups.emplace_back();
    l.group_id = id;
    l.protocol_type = g->protocol_type;
    l.group_state = std::string(state_name(g->state));
    l.group_type = std::string(group_type);
  }
  return resp;
}

// ---- What offset_manager asks -------------------------------------------------------------------

error_code membership::may_commit(const std::string& group_id, int32_t generation, const std::string& member_id,
                                  const std::optional<std::string>& instance_id, int16_t version) {
  group* g = find(group_id);
  if (!g) {
    // A generation (or KIP-848 member epoch) names a group that would have
    // to exist: v9 says so (GROUP_ID_NOT_FOUND), older versions keep the
    // error they always had.
    if (generation >= 0) return version >= 9 ? error_code::group_id_not_found : error_code::illegal_generation;
    if (groups_.size() >= limits::max_groups) return error_code::coordinator_not_available;
    return error_code::none;
  }
  if (g->state == group_state::dead) return error_code::coordinator_not_available;
  // A consumer without group management (assign()) commits as a group of
  // its own: allowed while the group has no members.
  if (generation < 0 && g->state == group_state::empty) return error_code::none;
  if (fenced(*g, instance_id, member_id)) return error_code::fenced_instance_id;
  if (g->state == group_state::completing_rebalance) return error_code::rebalance_in_progress;
  auto it = g->members.find(member_id);
  if (it == g->members.end()) return error_code::unknown_member_id;
  if (generation != g->generation) return error_code::illegal_generation;
  it->second.last_heartbeat_ms = clk_.monotonic_ms();
  return error_code::none;
}

error_code membership::may_commit_txn(const std::string& group_id, int32_t generation, const std::string& member_id,
                                      const std::optional<std::string>& instance_id) const {
  const group* g = find(group_id);
  if (!g) {
    if (generation >= 0) return error_code::illegal_generation;
    if (groups_.size() >= limits::max_groups) return error_code::coordinator_not_available;
    return error_code::none;
  }
  if (g->state == group_state::dead) return error_code::coordinator_not_available;
  if (generation < 0 && g->state == group_state::empty) return error_code::none;
  // Versions before 3 carry no member: a producer that commits for a
  // group it does not belong to (Kafka's "simple" transactional commit).
  if (generation < 0 && member_id.empty() && !instance_id) return error_code::none;
  if (fenced(*g, instance_id, member_id)) return error_code::fenced_instance_id;
  if (!g->members.count(member_id)) return error_code::unknown_member_id;
  if (generation != g->generation) return error_code::illegal_generation;
  return error_code::none;
}

error_code membership::subscribed_topics(const std::string& group_id, std::set<std::string>& topics) const {
  const group* g = find(group_id);
  if (!g || g->state == group_state::dead) return error_code::group_id_not_found;
  if (g->state == group_state::empty) return error_code::none;
  // A live group of another protocol type cannot be checked.
  if (g->protocol_type != "consumer") return error_code::non_empty_group;
  for (const auto& [_, m] : g->members) {
    if (const auto* md = m.metadata_for(g->protocol_name)) {
      auto sub = protocol::decode_subscription(*md);
      if (sub.ok())
        for (const auto& t : sub->topics) topics.insert(t);
    }
  }
  return error_code::none;
}

error_code membership::begin_removal(const std::string& id) {
  group* g = find(id);
  if (!g || g->state == group_state::dead) return error_code::group_id_not_found;
  if (g->state != group_state::empty) return error_code::non_empty_group;
  g->state = group_state::dead;
  return error_code::none;
}

void membership::end_removal(const std::string& id, bool removed) {
  if (removed) return erase(id);
  if (group* g = find(id)) g->state = group_state::empty;
}

void membership::for_each_idle(const std::function<void(const std::string&, int64_t)>& fn) const {
  for (const auto& [id, g] : groups_) {
    if (g->state != group_state::empty || !g->pending_members.empty() || !partitions_.serves(g->partition)) continue;
    fn(id, g->state_timestamp_ms);
  }
}

// ---- Timers ----------------------------------------------------------------------------------------

void membership::expire_members(group& g, int64_t now, outbox& out) {
  std::erase_if(g.pending_members, [&](const auto& kv) { return kv.second <= now; });
  std::vector<std::string> expired;
  for (const auto& [id, m] : g.members) {
    if (!m.join_cb && !m.sync_cb && now - m.last_heartbeat_ms > m.session_timeout_ms) expired.push_back(id);
  }
  for (const auto& id : expired) {
    SLUICE_LOG_INFO("group {}: member {} expired (no heartbeat for its session timeout)", g.id, id);
    remove_member(g, id, out);
  }
  if (!expired.empty()) {
    after_member_removed(g, out);
  } else {
    maybe_complete_join(g, out);
  }
}

void membership::tick(outbox& out) {
  const int64_t now = clk_.monotonic_ms();
  for (auto& [_, g] : groups_) {
    if (g->state == group_state::dead || !partitions_.serves(g->partition)) continue;
    expire_members(*g, now, out);
  }
}

}  // namespace sluice::group
