#include "group/coordinator.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "base/limits.h"
#include "base/log.h"
#include "config/broker_config.h"
#include "protocol/consumer_protocol.h"

namespace sluice::group {

using kafka::error_code;
using kafka::to_wire;
namespace proto = protocol;

coordinator_config coordinator_config::from(const config::broker_config& b) {
  coordinator_config c;
  c.min_session_timeout_ms = b.group_min_session_timeout_ms;
  c.max_session_timeout_ms = b.group_max_session_timeout_ms;
  c.max_group_size = b.group_max_size;
  c.initial_rebalance_delay_ms = b.group_initial_rebalance_delay_ms;
  c.num_partitions = b.offsets_topic_num_partitions;
  c.offsets_retention_ms = int64_t{b.offsets_retention_minutes} * 60'000;
  c.offsets_retention_check_interval_ms = b.offsets_retention_check_interval_ms;
  return c;
}

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

struct coordinator::member {
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

struct coordinator::group {
  std::string id;
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
  std::map<std::pair<std::string, int32_t>, offset_value> offsets;
};

// Responses gathered under the lock and sent after it is released: the
// outbox is declared before the lock guard, so it runs after the unlock.
class coordinator::outbox {
 public:
  outbox() = default;
  outbox(const outbox&) = delete;
  outbox& operator=(const outbox&) = delete;
  ~outbox() {
    for (auto& f : fns_) f();
  }
  void add(std::function<void()> f) { fns_.push_back(std::move(f)); }

 private:
  std::vector<std::function<void()>> fns_;
};

namespace {

template <class T>
void answer(std::function<void(T)>& cb, T resp, std::function<void(std::function<void()>)> add) {
  if (!cb) return;
  add([cb = std::move(cb), r = std::move(resp)]() mutable { cb(std::move(r)); });
  cb = nullptr;
}

bool valid_group_id(const std::string& id) { return !id.empty() && id.size() <= limits::max_group_id_bytes; }

// The records that delete these committed offsets: a tombstone (key, no
// value) each, stamped `now_ms`.
std::vector<protocol::records::record_input> offset_tombstones(const std::vector<offset_key>& keys, int64_t now_ms) {
  std::vector<protocol::records::record_input> records;
  records.reserve(keys.size());
  for (const auto& k : keys) {
    protocol::records::record_input r;
    r.key = encode_key(k);
    r.timestamp_ms = now_ms;
    records.push_back(std::move(r));
  }
  return records;
}

protocol_list to_protocols(const proto::join_group_request& req) {
  protocol_list out;
  out.reserve(req.protocols.size());
  for (const auto& p : req.protocols) out.emplace_back(p.name, p.metadata);
  return out;
}

}  // namespace

#define SLUICE_ANSWER(cb, resp) answer(cb, resp, [&out](std::function<void()> f) { out.add(std::move(f)); })

// ---- Construction, lookup ------------------------------------------------------

coordinator::coordinator(coordinator_config cfg, record_log& log, sluice::clock& clk, post_fn post,
                         partition_exists_fn partition_exists)
    : cfg_(cfg), log_(log), clk_(clk), post_(std::move(post)), partition_exists_(std::move(partition_exists)),
      rng_(std::random_device{}()) {}

coordinator::~coordinator() = default;

bool coordinator::loaded() const {
  std::lock_guard g(mu_);
  return loaded_;
}

bool coordinator::set_loaded() {
  std::lock_guard g(mu_);
  if (unloaded_) return false;
  loaded_ = true;
  // Members brought back by replay get a full session timeout from now.
  const int64_t now = clk_.monotonic_ms();
  for (auto& [_, grp] : groups_)
    for (auto& [_, m] : grp->members) m.last_heartbeat_ms = now;
  next_expiry_check_ms_ = now + cfg_.offsets_retention_check_interval_ms;
  return true;
}

bool coordinator::unloaded() const {
  std::lock_guard g(mu_);
  return unloaded_;
}

void coordinator::unload() {
  outbox out;
  std::lock_guard g(mu_);
  loaded_ = false;
  unloaded_ = true;
  for (auto& [_, grp] : groups_) {
    for (auto& [id, m] : grp->members) {
      proto::join_group_response jr;
      jr.error_code = to_wire(error_code::not_coordinator);
      jr.member_id = id;
      SLUICE_ANSWER(m.join_cb, jr);
      proto::sync_group_response sr;
      sr.error_code = to_wire(error_code::not_coordinator);
      SLUICE_ANSWER(m.sync_cb, sr);
    }
  }
}

size_t coordinator::group_count() const {
  std::lock_guard g(mu_);
  return groups_.size();
}

void coordinator::update_config(const coordinator_config& next) {
  std::lock_guard g(mu_);
  cfg_.min_session_timeout_ms = next.min_session_timeout_ms;
  cfg_.max_session_timeout_ms = next.max_session_timeout_ms;
  cfg_.max_group_size = next.max_group_size;
  cfg_.initial_rebalance_delay_ms = next.initial_rebalance_delay_ms;
  cfg_.offsets_retention_ms = next.offsets_retention_ms;
}

coordinator::group* coordinator::find_locked(const std::string& id) {
  auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : it->second.get();
}

bool coordinator::fenced_locked(const group& g, const std::optional<std::string>& instance_id,
                                const std::string& member_id) {
  if (!instance_id) return false;
  auto s = g.static_members.find(*instance_id);
  return s != g.static_members.end() && s->second != member_id;
}

coordinator::member_lookup coordinator::lookup_member_locked(const std::string& group_id,
                                                             const std::optional<std::string>& instance_id,
                                                             const std::string& member_id, int32_t generation) {
  member_lookup r;
  auto fail = [&](error_code e) {
    r.error = e;
    return r;
  };
  if (!loaded_) return fail(error_code::coordinator_load_in_progress);
  if (!valid_group_id(group_id)) return fail(error_code::invalid_group_id);
  group* g = find_locked(group_id);
  if (!g) return fail(error_code::unknown_member_id);
  if (g->state == group_state::dead) return fail(error_code::coordinator_not_available);
  if (fenced_locked(*g, instance_id, member_id)) return fail(error_code::fenced_instance_id);
  auto it = g->members.find(member_id);
  if (it == g->members.end()) return fail(error_code::unknown_member_id);
  if (generation != g->generation) return fail(error_code::illegal_generation);
  r.g = g;
  r.m = &it->second;
  return r;
}

coordinator::group* coordinator::create_locked(const std::string& id) {
  auto g = std::make_unique<group>();
  g->id = id;
  g->state_timestamp_ms = clk_.now_ms();
  group* raw = g.get();
  groups_.emplace(id, std::move(g));
  return raw;
}

void coordinator::erase_group_locked(const std::string& id) {
  auto it = groups_.find(id);
  if (it == groups_.end()) return;
  if (observer_ && loaded_) {
    for (const auto& [tp, v] : it->second->offsets) observer_(id, tp.first, tp.second, v.offset);
  }
  groups_.erase(it);
}

bool coordinator::new_member_fits_locked(const group& g) const {
  return g.members.size() + g.pending_members.size() < static_cast<size_t>(cfg_.max_group_size);
}

std::string coordinator::new_member_id(const std::string& client_id) {
  char hex[33];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", static_cast<unsigned long long>(rng_()),
                static_cast<unsigned long long>(rng_()));
  return client_id.substr(0, 128) + "-" + hex;
}

// ---- Records --------------------------------------------------------------------

group_value coordinator::snapshot(const group& g) const {
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

void coordinator::append_locked(const std::string& group_id, std::vector<protocol::records::record_input> records,
                                std::function<void(status, outbox&)> then) {
  const int32_t p = partition_for(group_id, cfg_.num_partitions);
  // The completion may come on any thread, even inside append(); it is
  // posted to the executor so it never runs under our lock.
  log_.append(p, std::move(records), [this, then = std::move(then)](status s) {
    post_([this, then, s]() {
      outbox out;
      std::lock_guard g(mu_);
      then(s, out);
    });
  });
}

void coordinator::append_group_locked(group& g, std::function<void(status, outbox&)> then) {
  protocol::records::record_input r;
  r.key = encode_key(group_key{g.id});
  r.value = encode_value(snapshot(g));
  r.timestamp_ms = clk_.now_ms();
  std::vector<protocol::records::record_input> recs;
  recs.push_back(std::move(r));
  const std::string id = g.id;
  append_locked(id, std::move(recs), [id, then = std::move(then)](status s, outbox& out) {
    if (!s.ok()) SLUICE_LOG_WARN("group {}: writing its metadata failed: {}", id, s.err().message);
    if (then) then(s, out);
  });
}

std::vector<coordinator::committed_offset> coordinator::committed_offsets() const {
  std::lock_guard g(mu_);
  std::vector<committed_offset> out;
  for (const auto& [id, grp] : groups_) {
    for (const auto& [tp, v] : grp->offsets) out.push_back({id, tp.first, tp.second, v.offset});
  }
  return out;
}

void coordinator::apply_offset_locked(const offset_key& k, const std::optional<offset_value>& v) {
  group* g = find_locked(k.group);
  if (observer_ && loaded_ && g) {
    // Replay is skipped: what an old record held was accounted for (or not)
    // by the run that wrote it.
    if (auto it = g->offsets.find({k.topic, k.partition}); it != g->offsets.end())
      observer_(k.group, k.topic, k.partition, it->second.offset);
  }
  if (!v) {
    if (g) g->offsets.erase({k.topic, k.partition});
    return;
  }
  if (!g) {
    // A group that only holds offsets: its offsets expire by their commit
    // time alone (docs/group_records.md).
    g = create_locked(k.group);
    g->state_timestamp_ms = -1;
  }
  g->offsets[{k.topic, k.partition}] = *v;
}

void coordinator::apply_group_locked(const std::string& id, const std::optional<group_value>& v) {
  if (!v) {
    erase_group_locked(id);
    return;
  }
  group* g = find_locked(id);
  if (!g) g = create_locked(id);
  g->generation = v->generation;
  g->protocol_type = v->protocol_type;
  g->protocol_name = v->protocol;
  g->leader = v->leader.value_or("");
  g->state_timestamp_ms = v->current_state_timestamp_ms;
  g->members.clear();
  g->static_members.clear();
  g->pending_members.clear();
  const int64_t now = clk_.monotonic_ms();
  for (const auto& mv : v->members) {
    member m;
    m.id = mv.member_id;
    m.instance_id = mv.group_instance_id;
    m.client_id = mv.client_id;
    m.client_host = mv.client_host;
    m.session_timeout_ms = mv.session_timeout_ms;
    m.rebalance_timeout_ms = mv.rebalance_timeout_ms;
    m.protocols.emplace_back(v->protocol.value_or(""), mv.subscription);
    m.assignment = mv.assignment;
    m.last_heartbeat_ms = now;
    if (m.instance_id) g->static_members[*m.instance_id] = m.id;
    g->members.emplace(m.id, std::move(m));
  }
  g->state = g->members.empty() ? group_state::empty : group_state::stable;
}

status coordinator::replay(std::span<const uint8_t> key, std::optional<std::span<const uint8_t>> value) {
  auto k = decode_key(key);
  if (!k.ok()) return k.err();
  std::lock_guard g(mu_);
  if (const auto* ok = std::get_if<offset_key>(&*k)) {
    if (!value) {
      apply_offset_locked(*ok, std::nullopt);
      return {};
    }
    auto v = decode_offset_value(*value);
    if (!v.ok()) return v.err();
    apply_offset_locked(*ok, *v);
    return {};
  }
  const auto& gk = std::get<group_key>(*k);
  if (!value) {
    apply_group_locked(gk.group, std::nullopt);
    return {};
  }
  auto v = decode_group_value(*value);
  if (!v.ok()) return v.err();
  apply_group_locked(gk.group, *v);
  return {};
}

// ---- Rebalance machinery ------------------------------------------------------------

coordinator::member& coordinator::add_member_locked(group& g, const std::string& member_id,
                                                   const proto::join_group_request& req,
                                                   const std::string& client_id, const std::string& client_host) {
  if (g.members.empty()) g.protocol_type = req.protocol_type;
  member m;
  m.id = member_id;
  m.instance_id = req.group_instance_id;
  m.client_id = client_id;
  m.client_host = client_host;
  m.session_timeout_ms = req.session_timeout_ms;
  m.rebalance_timeout_ms = req.rebalance_timeout_ms > 0 ? req.rebalance_timeout_ms : req.session_timeout_ms;
  m.protocols = to_protocols(req);
  m.last_heartbeat_ms = clk_.monotonic_ms();
  if (m.instance_id) g.static_members[*m.instance_id] = member_id;
  return g.members.emplace(member_id, std::move(m)).first->second;
}

void coordinator::prepare_rebalance_locked(group& g, outbox& out, const char* why) {
  if (g.state == group_state::completing_rebalance) {
    // The assignment being synced is for a generation that will not be.
    for (auto& [_, m] : g.members) {
      proto::sync_group_response r;
      r.error_code = to_wire(error_code::rebalance_in_progress);
      SLUICE_ANSWER(m.sync_cb, r);
    }
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
  maybe_complete_join_locked(g, out);
}

void coordinator::maybe_complete_join_locked(group& g, outbox& out) {
  if (g.state != group_state::preparing_rebalance) return;
  const int64_t now = clk_.monotonic_ms();
  bool all_joined = g.pending_members.empty();
  for (const auto& [_, m] : g.members) all_joined = all_joined && static_cast<bool>(m.join_cb);
  if (all_joined && now >= g.join_not_before_ms) {
    complete_join_locked(g, out);
    return;
  }
  if (now < g.rebalance_deadline_ms) return;
  // The rebalance timeout passed: members that did not rejoin are out.
  std::vector<std::string> gone;
  for (const auto& [id, m] : g.members)
    if (!m.join_cb) gone.push_back(id);
  for (const auto& id : gone) {
    SLUICE_LOG_INFO("group {}: member {} did not rejoin within the rebalance timeout", g.id, id);
    remove_member_locked(g, id, out);
  }
  g.pending_members.clear();
  complete_join_locked(g, out);
}

void coordinator::complete_join_locked(group& g, outbox& out) {
  ++g.generation;
  g.state_timestamp_ms = clk_.now_ms();
  if (g.members.empty()) {
    g.state = group_state::empty;
    g.protocol_name.reset();
    g.leader.clear();
    SLUICE_LOG_INFO("group {}: empty at generation {}", g.id, g.generation);
    append_group_locked(g, nullptr);
    return;
  }
  // Protocol: among those every member supports, the one most members
  // prefer (each votes for its first supported one).
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
  g.protocol_name = chosen;
  if (!g.members.count(g.leader)) g.leader = g.members.begin()->first;
  g.state = group_state::completing_rebalance;
  g.pending_assignment.reset();
  const int64_t now = clk_.monotonic_ms();
  for (auto& [_, m] : g.members) {
    m.assignment.clear();
    m.last_heartbeat_ms = now;
    SLUICE_ANSWER(m.join_cb, join_response(g, m));
  }
  SLUICE_LOG_INFO("group {}: generation {} with {} members, protocol {}, leader {}", g.id, g.generation,
                  g.members.size(), chosen, g.leader);
}

proto::join_group_response coordinator::join_response(const group& g, const member& m) const {
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

void coordinator::remove_member_locked(group& g, const std::string& member_id, outbox& out) {
  auto it = g.members.find(member_id);
  if (it == g.members.end()) return;
  member& m = it->second;
  proto::join_group_response jr;
  jr.error_code = to_wire(error_code::unknown_member_id);
  jr.member_id = member_id;
  SLUICE_ANSWER(m.join_cb, jr);
  proto::sync_group_response sr;
  sr.error_code = to_wire(error_code::unknown_member_id);
  SLUICE_ANSWER(m.sync_cb, sr);
  if (m.instance_id) {
    auto s = g.static_members.find(*m.instance_id);
    if (s != g.static_members.end() && s->second == member_id) g.static_members.erase(s);
  }
  if (g.leader == member_id) g.leader.clear();
  g.members.erase(it);
}

void coordinator::after_member_removed_locked(group& g, outbox& out) {
  if (g.state == group_state::stable || g.state == group_state::completing_rebalance) {
    prepare_rebalance_locked(g, out, "a member left");
  } else {
    maybe_complete_join_locked(g, out);
  }
}

// ---- JoinGroup ------------------------------------------------------------------------

void coordinator::join_group(const proto::join_group_request& req, int16_t version, const std::string& client_id,
                             const std::string& client_host, reply<proto::join_group_response> cb) {
  outbox out;
  std::lock_guard lock(mu_);
  auto fail = [&](error_code e, std::string member_id = {}) {
    proto::join_group_response r;
    r.error_code = to_wire(e);
    r.member_id = member_id.empty() ? req.member_id : member_id;
    SLUICE_ANSWER(cb, r);
  };
  if (!loaded_) return fail(error_code::coordinator_load_in_progress);
  if (!valid_group_id(req.group_id)) return fail(error_code::invalid_group_id);
  if (req.session_timeout_ms < cfg_.min_session_timeout_ms || req.session_timeout_ms > cfg_.max_session_timeout_ms)
    return fail(error_code::invalid_session_timeout);
  if (req.protocol_type.empty() || req.protocols.empty()) return fail(error_code::inconsistent_group_protocol);
  size_t metadata_bytes = 0;
  for (const auto& p : req.protocols) metadata_bytes += p.metadata.size() + p.name.size();
  if (req.protocols.size() > limits::max_protocols_per_member || metadata_bytes > limits::max_member_metadata_bytes ||
      req.protocol_type.size() > limits::max_name_bytes ||
      (req.group_instance_id && (req.group_instance_id->empty() || req.group_instance_id->size() > limits::max_name_bytes)) ||
      req.member_id.size() > limits::max_name_bytes)
    return fail(error_code::invalid_request);

  group* g = find_locked(req.group_id);
  if (!g) {
    if (!req.member_id.empty()) return fail(error_code::unknown_member_id);
    if (groups_.size() >= limits::max_groups) {
      SLUICE_LOG_WARN("refusing group {}: the broker holds {} groups already", req.group_id, groups_.size());
      return fail(error_code::coordinator_not_available);
    }
    g = create_locked(req.group_id);
  }
  if (g->state == group_state::dead) return fail(error_code::coordinator_not_available);

  // The protocol must fit the group: same type, and a protocol every
  // current member also supports.
  if (!g->members.empty()) {
    bool ok = req.protocol_type == g->protocol_type;
    if (ok) {
      ok = false;
      for (const auto& p : req.protocols) {
        bool all = std::all_of(g->members.begin(), g->members.end(), [&](const auto& kv) {
          return kv.first == req.member_id || kv.second.metadata_for(p.name) != nullptr;
        });
        if (all) ok = true;
      }
    }
    if (!ok) return fail(error_code::inconsistent_group_protocol);
  }

  if (req.member_id.empty()) {
    if (req.group_instance_id) return join_static_locked(*g, req, client_id, client_host, cb, out);
    if (!new_member_fits_locked(*g)) return fail(error_code::group_max_size_reached);
    std::string id = new_member_id(client_id);
    if (version >= 4) {
      // KIP-394: the client must come back with this id; until then it
      // holds a place in the group for one session timeout.
      g->pending_members[id] = clk_.monotonic_ms() + req.session_timeout_ms;
      return fail(error_code::member_id_required, id);
    }
    member& m = add_member_locked(*g, id, req, client_id, client_host);
    m.join_cb = std::move(cb);
    if (g->state == group_state::preparing_rebalance) {
      maybe_complete_join_locked(*g, out);
    } else {
      prepare_rebalance_locked(*g, out, "a new member joined");
    }
    return;
  }

  if (auto p = g->pending_members.find(req.member_id); p != g->pending_members.end()) {
    g->pending_members.erase(p);
    member& m = add_member_locked(*g, req.member_id, req, client_id, client_host);
    m.join_cb = std::move(cb);
    if (g->state == group_state::preparing_rebalance) {
      maybe_complete_join_locked(*g, out);
    } else {
      prepare_rebalance_locked(*g, out, "a new member joined");
    }
    return;
  }
  if (fenced_locked(*g, req.group_instance_id, req.member_id)) return fail(error_code::fenced_instance_id);
  auto it = g->members.find(req.member_id);
  if (it == g->members.end()) return fail(error_code::unknown_member_id);
  member& m = it->second;
  const protocol_list protocols = to_protocols(req);
  const bool changed = protocols != m.protocols;
  m.protocols = protocols;
  m.session_timeout_ms = req.session_timeout_ms;
  m.rebalance_timeout_ms = req.rebalance_timeout_ms > 0 ? req.rebalance_timeout_ms : req.session_timeout_ms;
  m.last_heartbeat_ms = clk_.monotonic_ms();
  switch (g->state) {
    case group_state::preparing_rebalance: {
      proto::join_group_response r;
      r.error_code = to_wire(error_code::rebalance_in_progress);
      r.member_id = m.id;
      SLUICE_ANSWER(m.join_cb, r);  // an earlier join of the same member, replaced
      m.join_cb = std::move(cb);
      maybe_complete_join_locked(*g, out);
      return;
    }
    case group_state::completing_rebalance:
    case group_state::stable:
      // A member that only repeats its join (lost the response) gets the
      // current generation back; the leader or a changed subscription
      // means a new assignment is needed.
      if (!changed && (g->state == group_state::completing_rebalance || m.id != g->leader)) {
        SLUICE_ANSWER(cb, join_response(*g, m));
        return;
      }
      m.join_cb = std::move(cb);
      prepare_rebalance_locked(*g, out, changed ? "a member changed its subscription" : "the leader rejoined");
      return;
    case group_state::empty:
    case group_state::dead:
      return fail(error_code::unknown_member_id);
  }
}

void coordinator::join_static_locked(group& g, const proto::join_group_request& req, const std::string& client_id,
                                     const std::string& client_host, reply<proto::join_group_response>& cb,
                                     outbox& out) {
  const std::string& instance = *req.group_instance_id;
  auto s = g.static_members.find(instance);
  if (s == g.static_members.end()) {
    if (!new_member_fits_locked(g)) {
      proto::join_group_response r;
      r.error_code = to_wire(error_code::group_max_size_reached);
      SLUICE_ANSWER(cb, r);
      return;
    }
    member& m = add_member_locked(g, new_member_id(client_id), req, client_id, client_host);
    m.join_cb = std::move(cb);
    if (g.state == group_state::preparing_rebalance) {
      maybe_complete_join_locked(g, out);
    } else {
      prepare_rebalance_locked(g, out, "a new static member joined");
    }
    return;
  }
  // A known instance restarted: it takes over the old member's place under
  // a new member id, which fences the old process (KIP-345).
  const std::string old_id = s->second;
  auto node = g.members.extract(old_id);
  member m = std::move(node.mapped());
  proto::join_group_response fenced;
  fenced.error_code = to_wire(error_code::fenced_instance_id);
  fenced.member_id = old_id;
  SLUICE_ANSWER(m.join_cb, fenced);
  proto::sync_group_response fenced_sync;
  fenced_sync.error_code = to_wire(error_code::fenced_instance_id);
  SLUICE_ANSWER(m.sync_cb, fenced_sync);
  const protocol_list protocols = to_protocols(req);
  const bool changed = protocols != m.protocols;
  m.id = new_member_id(client_id);
  m.client_id = client_id;
  m.client_host = client_host;
  m.protocols = protocols;
  m.session_timeout_ms = req.session_timeout_ms;
  m.rebalance_timeout_ms = req.rebalance_timeout_ms > 0 ? req.rebalance_timeout_ms : req.session_timeout_ms;
  m.last_heartbeat_ms = clk_.monotonic_ms();
  const std::string new_id = m.id;
  s->second = new_id;
  if (g.leader == old_id) g.leader = new_id;
  member& placed = g.members.emplace(new_id, std::move(m)).first->second;
  SLUICE_LOG_INFO("group {}: static member {} rejoined as {} (was {})", g.id, instance, new_id, old_id);

  if (g.state == group_state::stable && !changed) {
    // No rebalance: record the new member id, then tell the member the
    // current generation. SyncGroup gives it its assignment back. (A
    // rejoining leader gets the member list but its SyncGroup in a Stable
    // group changes nothing, so every member keeps what it has.)
    const std::string group_id = g.id;
    append_group_locked(g, [this, group_id, new_id, cb = std::move(cb)](status st, outbox& out) mutable {
      group* g = find_locked(group_id);
      if (!g || !g->members.count(new_id)) {
        proto::join_group_response r;
        r.error_code = to_wire(error_code::unknown_member_id);
        SLUICE_ANSWER(cb, r);
        return;
      }
      if (!st.ok()) {
        proto::join_group_response r;
        r.error_code = to_wire(kafka::to_group_write_error(st.code(), kafka::group_write::group_metadata));
        r.member_id = new_id;
        SLUICE_ANSWER(cb, r);
        return;
      }
      SLUICE_ANSWER(cb, join_response(*g, g->members.at(new_id)));
    });
    cb = nullptr;
    return;
  }
  placed.join_cb = std::move(cb);
  if (g.state == group_state::preparing_rebalance) {
    maybe_complete_join_locked(g, out);
  } else {
    prepare_rebalance_locked(g, out, "a static member rejoined with a new subscription");
  }
}

// ---- SyncGroup ----------------------------------------------------------------------------

void coordinator::sync_group(const proto::sync_group_request& req, int16_t /*version*/,
                             reply<proto::sync_group_response> cb) {
  outbox out;
  std::lock_guard lock(mu_);
  auto fail = [&](error_code e) {
    proto::sync_group_response r;
    r.error_code = to_wire(e);
    SLUICE_ANSWER(cb, r);
  };
  auto found = lookup_member_locked(req.group_id, req.group_instance_id, req.member_id, req.generation_id);
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
      SLUICE_ANSWER(cb, r);
      return;
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
    append_group_locked(*g, [this, group_id, generation](status s, outbox& out) {
      if (group* g = find_locked(group_id)) finish_sync_locked(*g, generation, s, out);
    });
  }
  proto::sync_group_response superseded;
  superseded.error_code = to_wire(error_code::rebalance_in_progress);
  SLUICE_ANSWER(m.sync_cb, superseded);
  m.sync_cb = std::move(cb);
}

void coordinator::finish_sync_locked(group& g, int32_t generation, status s, outbox& out) {
  if (g.generation != generation || g.state != group_state::completing_rebalance || !g.pending_assignment) return;
  auto assignment = std::move(*g.pending_assignment);
  g.pending_assignment.reset();
  if (!s.ok()) {
    for (auto& [_, m] : g.members) {
      proto::sync_group_response r;
      r.error_code = to_wire(kafka::to_group_write_error(s.code(), kafka::group_write::group_metadata));
      SLUICE_ANSWER(m.sync_cb, r);
    }
    prepare_rebalance_locked(g, out, "its assignment could not be written");
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
    SLUICE_ANSWER(m.sync_cb, r);
  }
  SLUICE_LOG_INFO("group {}: stable at generation {}", g.id, g.generation);
}

// ---- Heartbeat, LeaveGroup ------------------------------------------------------------------

proto::heartbeat_response coordinator::heartbeat(const proto::heartbeat_request& req, int16_t /*version*/) {
  std::lock_guard lock(mu_);
  proto::heartbeat_response r;
  auto err = [&](error_code e) {
    r.error_code = to_wire(e);
    return r;
  };
  auto found = lookup_member_locked(req.group_id, req.group_instance_id, req.member_id, req.generation_id);
  if (found.error != error_code::none) return err(found.error);
  group* g = found.g;
  found.m->last_heartbeat_ms = clk_.monotonic_ms();
  if (g->state == group_state::preparing_rebalance) return err(error_code::rebalance_in_progress);
  return r;
}

proto::leave_group_response coordinator::leave_group(const proto::leave_group_request& req, int16_t version) {
  outbox out;
  std::lock_guard lock(mu_);
  proto::leave_group_response r;
  if (!loaded_) {
    r.error_code = to_wire(error_code::coordinator_load_in_progress);
    return r;
  }
  if (!valid_group_id(req.group_id)) {
    r.error_code = to_wire(error_code::invalid_group_id);
    return r;
  }
  std::vector<proto::leave_group_request::member_identity> leaving;
  if (version >= 3) {
    leaving = req.members;
  } else {
    leaving.push_back({req.member_id, std::nullopt});
  }
  group* g = find_locked(req.group_id);
  if (g && g->state == group_state::dead) {
    r.error_code = to_wire(error_code::coordinator_not_available);
    return r;
  }
  bool removed = false;
  for (const auto& l : leaving) {
    auto& mr = r.members.emplace_back();
    mr.member_id = l.member_id;
    mr.group_instance_id = l.group_instance_id;
    error_code e = error_code::none;
    if (!g) {
      e = error_code::unknown_member_id;
    } else if (l.group_instance_id) {
      auto s = g->static_members.find(*l.group_instance_id);
      if (s == g->static_members.end()) {
        e = error_code::unknown_member_id;
      } else if (!l.member_id.empty() && s->second != l.member_id) {
        e = error_code::fenced_instance_id;
      } else {
        SLUICE_LOG_INFO("group {}: static member {} ({}) left", g->id, *l.group_instance_id, s->second);
        remove_member_locked(*g, std::string(s->second), out);
        removed = true;
      }
    } else if (g->members.count(l.member_id)) {
      SLUICE_LOG_INFO("group {}: member {} left", g->id, l.member_id);
      remove_member_locked(*g, l.member_id, out);
      removed = true;
    } else if (g->pending_members.erase(l.member_id) > 0) {
      removed = true;
    } else {
      e = error_code::unknown_member_id;
    }
    mr.error_code = to_wire(e);
  }
  if (g && removed) after_member_removed_locked(*g, out);
  if (version < 3) {
    r.error_code = r.members.front().error_code;
    r.members.clear();
  }
  return r;
}

// ---- Offsets -----------------------------------------------------------------------------------

void coordinator::offset_commit(const proto::offset_commit_request& req, int16_t version,
                                reply<proto::offset_commit_response> cb) {
  outbox out;
  std::lock_guard lock(mu_);
  auto resp = std::make_shared<proto::offset_commit_response>();
  for (const auto& t : req.topics) {
    auto& rt = resp->topics.emplace_back();
    rt.name = t.name;
    for (const auto& p : t.partitions) rt.partitions.emplace_back().partition_index = p.partition_index;
  }
  auto fail_all = [&](error_code e) {
    for (auto& t : resp->topics)
      for (auto& p : t.partitions) p.error_code = to_wire(e);
    SLUICE_ANSWER(cb, *resp);
  };
  if (!loaded_) return fail_all(error_code::coordinator_load_in_progress);
  if (!valid_group_id(req.group_id)) return fail_all(error_code::invalid_group_id);
  const int32_t generation = version >= 1 ? req.generation_id_or_member_epoch : -1;
  group* g = find_locked(req.group_id);
  if (!g) {
    // A generation (or KIP-848 member epoch) names a group that would have
    // to exist: v9 says so (GROUP_ID_NOT_FOUND), older versions keep the
    // error they always had.
    if (generation >= 0)
      return fail_all(version >= 9 ? error_code::group_id_not_found
                                   : error_code::illegal_generation);
    if (groups_.size() >= limits::max_groups) return fail_all(error_code::coordinator_not_available);
  } else if (g->state == group_state::dead) {
    return fail_all(error_code::coordinator_not_available);
  } else if (generation < 0 && g->state == group_state::empty) {
    // A consumer without group management (assign()) commits as a group of
    // its own: allowed while the group has no members.
  } else {
    if (fenced_locked(*g, req.group_instance_id, req.member_id)) return fail_all(error_code::fenced_instance_id);
    if (g->state == group_state::completing_rebalance) return fail_all(error_code::rebalance_in_progress);
    auto it = g->members.find(req.member_id);
    if (it == g->members.end()) return fail_all(error_code::unknown_member_id);
    if (generation != g->generation) return fail_all(error_code::illegal_generation);
    it->second.last_heartbeat_ms = clk_.monotonic_ms();
  }

  const int64_t now = clk_.now_ms();
  std::vector<protocol::records::record_input> records;
  std::vector<std::pair<offset_key, offset_value>> applied;
  std::vector<int16_t*> written;  // error codes of the partitions in `records`
  size_t held = g ? g->offsets.size() : 0;
  for (size_t ti = 0; ti < req.topics.size(); ++ti) {
    const auto& t = req.topics[ti];
    for (size_t pi = 0; pi < t.partitions.size(); ++pi) {
      const auto& p = t.partitions[pi];
      int16_t& ec = resp->topics[ti].partitions[pi].error_code;
      if (p.committed_metadata && p.committed_metadata->size() > limits::max_offset_metadata_bytes) {
        ec = to_wire(error_code::offset_metadata_too_large);
        continue;
      }
      if (t.name.empty() || t.name.size() > limits::max_name_bytes || p.partition_index < 0 ||
          (partition_exists_ && !partition_exists_(t.name, p.partition_index))) {
        ec = to_wire(error_code::unknown_topic_or_partition);
        continue;
      }
      const bool known = g && g->offsets.count({t.name, p.partition_index});
      if (!known && ++held > limits::max_offsets_per_group) {
        ec = to_wire(error_code::invalid_commit_offset_size);
        continue;
      }
      offset_key k{req.group_id, t.name, p.partition_index};
      offset_value v;
      v.offset = p.committed_offset;
      v.leader_epoch = p.committed_leader_epoch;
      v.metadata = p.committed_metadata.value_or("");
      v.commit_timestamp_ms = now;
      protocol::records::record_input r;
      r.key = encode_key(k);
      r.value = encode_value(v);
      r.timestamp_ms = now;
      records.push_back(std::move(r));
      applied.emplace_back(std::move(k), std::move(v));
      written.push_back(&ec);
    }
  }
  if (records.empty()) {
    SLUICE_ANSWER(cb, *resp);
    return;
  }
  append_locked(req.group_id, std::move(records),
                [this, resp, applied = std::move(applied), written = std::move(written), cb = std::move(cb)](
                    status s, outbox& out) mutable {
                  if (s.ok()) {
                    for (const auto& [k, v] : applied) apply_offset_locked(k, v);
                  } else {
                    const auto e = kafka::to_group_write_error(s.code(), kafka::group_write::offset_commit);
                    for (int16_t* ec : written) *ec = to_wire(e);
                  }
                  SLUICE_ANSWER(cb, *resp);
                });
}

namespace {

// One group's answer to OffsetFetch, in the v8 shape.
using fetch_group = proto::offset_fetch_response::offset_fetch_response_group;
using fetch_topics = proto::offset_fetch_request::offset_fetch_request_group::offset_fetch_request_topics;

}  // namespace

proto::offset_fetch_response coordinator::offset_fetch(const proto::offset_fetch_request& req, int16_t version) {
  std::lock_guard lock(mu_);
  auto fetch_one = [&](const std::string& group_id, const std::optional<std::vector<fetch_topics>>& topics) {
    fetch_group out;
    out.group_id = group_id;
    if (!loaded_) {
      out.error_code = to_wire(error_code::coordinator_load_in_progress);
    } else if (!valid_group_id(group_id)) {
      out.error_code = to_wire(error_code::invalid_group_id);
    }
    group* g = out.error_code == 0 ? find_locked(group_id) : nullptr;
    auto partition_of = [&](const std::string& topic, int32_t p) {
      fetch_group::offset_fetch_response_topics::offset_fetch_response_partitions r;
      r.partition_index = p;
      r.committed_offset = -1;
      r.metadata = "";
      r.error_code = out.error_code;
      if (g) {
        auto it = g->offsets.find({topic, p});
        if (it != g->offsets.end()) {
          r.committed_offset = it->second.offset;
          r.committed_leader_epoch = it->second.leader_epoch;
          r.metadata = it->second.metadata;
        }
      }
      return r;
    };
    if (!topics) {
      if (g) {
        for (const auto& [tp, _] : g->offsets) {
          if (out.topics.empty() || out.topics.back().name != tp.first) out.topics.emplace_back().name = tp.first;
          out.topics.back().partitions.push_back(partition_of(tp.first, tp.second));
        }
      }
      return out;
    }
    for (const auto& t : *topics) {
      auto& rt = out.topics.emplace_back();
      rt.name = t.name;
      for (int32_t p : t.partition_indexes) rt.partitions.push_back(partition_of(t.name, p));
    }
    return out;
  };

  proto::offset_fetch_response resp;
  if (version >= 8) {
    for (const auto& grp : req.groups) resp.groups.push_back(fetch_one(grp.group_id, grp.topics));
    return resp;
  }
  std::optional<std::vector<fetch_topics>> topics;
  if (req.topics) {
    topics.emplace();
    for (const auto& t : *req.topics) topics->push_back({t.name, t.partition_indexes});
  }
  fetch_group one = fetch_one(req.group_id, topics);
  resp.error_code = one.error_code;
  for (auto& t : one.topics) {
    auto& rt = resp.topics.emplace_back();
    rt.name = std::move(t.name);
    for (auto& p : t.partitions) {
      auto& rp = rt.partitions.emplace_back();
      rp.partition_index = p.partition_index;
      rp.committed_offset = p.committed_offset;
      rp.committed_leader_epoch = p.committed_leader_epoch;
      rp.metadata = std::move(p.metadata);
      rp.error_code = p.error_code;
    }
  }
  return resp;
}

void coordinator::offset_delete(const proto::offset_delete_request& req, reply<proto::offset_delete_response> cb) {
  outbox out;
  std::lock_guard lock(mu_);
  auto resp = std::make_shared<proto::offset_delete_response>();
  auto fail = [&](error_code e) {
    resp->error_code = to_wire(e);
    SLUICE_ANSWER(cb, *resp);
  };
  if (!loaded_) return fail(error_code::coordinator_load_in_progress);
  if (!valid_group_id(req.group_id)) return fail(error_code::invalid_group_id);
  group* g = find_locked(req.group_id);
  if (!g || g->state == group_state::dead) return fail(error_code::group_id_not_found);
  // Topics the members of a live consumer group are subscribed to keep
  // their offsets (GROUP_SUBSCRIBED_TO_TOPIC); a live group of another
  // protocol type cannot be checked, so nothing is deleted (NON_EMPTY_GROUP).
  std::set<std::string> subscribed;
  if (g->state != group_state::empty) {
    if (g->protocol_type != "consumer") return fail(error_code::non_empty_group);
    for (const auto& [_, m] : g->members) {
      if (const auto* md = m.metadata_for(g->protocol_name)) {
        auto sub = protocol::decode_subscription(*md);
        if (sub.ok())
          for (const auto& t : sub->topics) subscribed.insert(t);
      }
    }
  }
  // The response is laid out first so pointers into it stay valid.
  for (const auto& t : req.topics) {
    auto& rt = resp->topics.emplace_back();
    rt.name = t.name;
    for (const auto& p : t.partitions) rt.partitions.emplace_back().partition_index = p.partition_index;
  }
  std::vector<protocol::records::record_input> records;
  std::vector<offset_key> deleted;
  std::vector<int16_t*> written;
  const int64_t now = clk_.now_ms();
  for (auto& rt : resp->topics) {
    for (auto& rp : rt.partitions) {
      if (subscribed.count(rt.name)) {
        rp.error_code = to_wire(error_code::group_subscribed_to_topic);
        continue;
      }
      if (!g->offsets.count({rt.name, rp.partition_index})) continue;
      offset_key k{req.group_id, rt.name, rp.partition_index};
      protocol::records::record_input r;
      r.key = encode_key(k);
      r.timestamp_ms = now;
      records.push_back(std::move(r));
      deleted.push_back(std::move(k));
      written.push_back(&rp.error_code);
    }
  }
  if (records.empty()) {
    SLUICE_ANSWER(cb, *resp);
    return;
  }
  append_locked(req.group_id, std::move(records),
                [this, resp, deleted = std::move(deleted), written = std::move(written), cb = std::move(cb)](
                    status s, outbox& out) mutable {
                  if (s.ok()) {
                    for (const auto& k : deleted) apply_offset_locked(k, std::nullopt);
                  } else {
                    for (int16_t* ec : written) *ec = to_wire(error_code::coordinator_not_available);
                  }
                  SLUICE_ANSWER(cb, *resp);
                });
}

// ---- Admin views ----------------------------------------------------------------------------------

proto::describe_groups_response coordinator::describe_groups(const proto::describe_groups_request& req) {
  std::lock_guard lock(mu_);
  proto::describe_groups_response resp;
  for (const auto& id : req.groups) {
    auto& d = resp.groups.emplace_back();
    d.group_id = id;
    if (!loaded_) {
      d.error_code = to_wire(error_code::coordinator_load_in_progress);
      continue;
    }
    if (!valid_group_id(id)) {
      d.error_code = to_wire(error_code::invalid_group_id);
      continue;
    }
    group* g = find_locked(id);
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

proto::list_groups_response coordinator::list_groups(const proto::list_groups_request& req) {
  std::lock_guard lock(mu_);
  proto::list_groups_response resp;
  if (!loaded_) {
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

void coordinator::delete_groups(const proto::delete_groups_request& req, reply<proto::delete_groups_response> cb) {
  outbox out;
  std::lock_guard lock(mu_);
  struct pending {
    proto::delete_groups_response resp;
    size_t waiting = 1;  // one extra until every append is issued
    reply<proto::delete_groups_response> cb;
  };
  auto op = std::make_shared<pending>();
  op->cb = std::move(cb);
  auto finish = [op](outbox& out) {
    if (--op->waiting == 0) SLUICE_ANSWER(op->cb, op->resp);
  };
  const int64_t now = clk_.now_ms();
  op->resp.results.reserve(req.groups_names.size());
  for (size_t i = 0; i < req.groups_names.size(); ++i) {
    const std::string& id = req.groups_names[i];
    auto& r = op->resp.results.emplace_back();
    r.group_id = id;
    if (!loaded_) {
      r.error_code = to_wire(error_code::coordinator_load_in_progress);
      continue;
    }
    if (!valid_group_id(id)) {
      r.error_code = to_wire(error_code::invalid_group_id);
      continue;
    }
    group* g = find_locked(id);
    if (!g || g->state == group_state::dead) {
      r.error_code = to_wire(error_code::group_id_not_found);
      continue;
    }
    if (g->state != group_state::empty) {
      r.error_code = to_wire(error_code::non_empty_group);
      continue;
    }
    // Dead while the tombstones are written: joins and commits are refused
    // (retriably) so nothing is added to a group about to vanish.
    g->state = group_state::dead;
    std::vector<protocol::records::record_input> records;
    for (const auto& [tp, _] : g->offsets) {
      protocol::records::record_input rec;
      rec.key = encode_key(offset_key{id, tp.first, tp.second});
      rec.timestamp_ms = now;
      records.push_back(std::move(rec));
    }
    protocol::records::record_input rec;
    rec.key = encode_key(group_key{id});
    rec.timestamp_ms = now;
    records.push_back(std::move(rec));
    ++op->waiting;
    append_locked(id, std::move(records), [this, op, i, id, finish](status s, outbox& out) {
      group* g = find_locked(id);
      if (s.ok()) {
        erase_group_locked(id);
        SLUICE_LOG_DEBUG("group {} deleted", id);
      } else {
        if (g) g->state = group_state::empty;
        op->resp.results[i].error_code = to_wire(error_code::coordinator_not_available);
      }
      finish(out);
    });
  }
  finish(out);
}

// ---- Timers ----------------------------------------------------------------------------------------

void coordinator::tick() {
  outbox out;
  std::lock_guard lock(mu_);
  if (!loaded_) return;
  const int64_t now = clk_.monotonic_ms();
  for (auto& [_, gp] : groups_) {
    group& g = *gp;
    if (g.state == group_state::dead) continue;
    std::erase_if(g.pending_members, [&](const auto& kv) { return kv.second <= now; });
    std::vector<std::string> expired;
    for (const auto& [id, m] : g.members) {
      if (!m.join_cb && !m.sync_cb && now - m.last_heartbeat_ms > m.session_timeout_ms) expired.push_back(id);
    }
    for (const auto& id : expired) {
      SLUICE_LOG_INFO("group {}: member {} expired (no heartbeat for its session timeout)", g.id, id);
      remove_member_locked(g, id, out);
    }
    if (!expired.empty()) {
      after_member_removed_locked(g, out);
    } else {
      maybe_complete_join_locked(g, out);
    }
  }
  if (now >= next_expiry_check_ms_) {
    next_expiry_check_ms_ = now + cfg_.offsets_retention_check_interval_ms;
    expire_offsets_locked(clk_.now_ms());
  }
}

void coordinator::delete_topic_offsets(const std::string& topic) {
  outbox out;
  std::lock_guard lock(mu_);
  if (!loaded_) {
    // Replay is still reading __consumer_offsets; the offsets it loads for
    // the deleted topic expire with offsets.retention.minutes.
    SLUICE_LOG_WARN("topic {} deleted while the group coordinator loads: its committed offsets stay until they expire",
                    topic);
    return;
  }
  const int64_t now = clk_.now_ms();
  for (auto& [id, gp] : groups_) {
    std::vector<offset_key> gone;
    for (const auto& [tp, _] : gp->offsets)
      if (tp.first == topic) gone.push_back({id, tp.first, tp.second});
    if (gone.empty()) continue;
    auto records = offset_tombstones(gone, now);
    SLUICE_LOG_INFO("group {}: {} committed offsets of deleted topic {} removed", id, gone.size(), topic);
    append_locked(id, std::move(records), [this, gone](status s, outbox&) {
      if (!s.ok()) return;
      for (const auto& k : gone) apply_offset_locked(k, std::nullopt);
    });
  }
}

void coordinator::expire_offsets_locked(int64_t now_ms) {
  for (auto& [id, gp] : groups_) {
    group& g = *gp;
    if (g.state != group_state::empty || !g.pending_members.empty()) continue;
    std::vector<offset_key> expired;
    for (const auto& [tp, v] : g.offsets) {
      const int64_t since = std::max(v.commit_timestamp_ms, g.state_timestamp_ms);
      if (now_ms - since >= cfg_.offsets_retention_ms) expired.push_back({id, tp.first, tp.second});
    }
    const bool whole_group =
        expired.size() == g.offsets.size() && now_ms - g.state_timestamp_ms >= cfg_.offsets_retention_ms;
    if (expired.empty() && !whole_group) continue;
    auto records = offset_tombstones(expired, now_ms);
    if (whole_group) {
      protocol::records::record_input r;
      r.key = encode_key(group_key{id});
      r.timestamp_ms = now_ms;
      records.push_back(std::move(r));
      g.state = group_state::dead;
    }
    SLUICE_LOG_INFO("group {}: {} committed offsets expired{}", id, expired.size(),
                    whole_group ? "; the group is removed" : "");
    append_locked(id, std::move(records), [this, id, expired, whole_group](status s, outbox&) {
      group* g = find_locked(id);
      if (!s.ok()) {
        if (g && whole_group) g->state = group_state::empty;
        return;
      }
      for (const auto& k : expired) apply_offset_locked(k, std::nullopt);
      if (whole_group) erase_group_locked(id);
    });
  }
}

}  // namespace sluice::group
