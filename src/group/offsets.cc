#include "group/offsets.h"

#include <algorithm>
#include <memory>
#include <set>

#include "base/assert.h"
#include "base/limits.h"
#include "base/log.h"

namespace sluice::group {

using kafka::error_code;
using kafka::to_wire;
namespace proto = protocol;

namespace {

bool valid_group_id(const std::string& id) { return !id.empty() && id.size() <= limits::max_group_id_bytes; }

// The records that delete these committed offsets: a tombstone (key, no
// value) each, stamped `now_ms`.
std::vector<protocol::records::record_input> offset_tombstones(const std::vector<offset_key>& keys, int64_t now_ms) {
  std::vector<protocol::records::record_input> records;
  records.reserve(keys.size() + 1);
  for (const auto& k : keys) {
    protocol::records::record_input r;
    r.key = encode_key(k);
    r.timestamp_ms = now_ms;
    records.push_back(std::move(r));
  }
  return records;
}

// What a failed write of tombstones answers: as a group's record
// (NOT_COORDINATOR when the partition changed hands or is not led here,
// COORDINATOR_NOT_AVAILABLE, retriable, otherwise).
error_code tombstone_write_error(const status& s) {
  return kafka::to_group_write_error(s.code(), kafka::group_write::group_metadata);
}

using fetch_group_response = proto::offset_fetch_response::offset_fetch_response_group;
using fetch_topics = proto::offset_fetch_request::offset_fetch_request_group::offset_fetch_request_topics;

// An OffsetFetch answer below v8 (one group, top-level fields) from the v8
// shape of its group.
proto::offset_fetch_response to_single_group(fetch_group_response one) {
  proto::offset_fetch_response resp;
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

// Whether a load ends with a tombstone for this offset: its topic
// partition no longer exists, or its id names an earlier topic of the name
// than the current one. An offset without an id stays while the topic
// partition exists (it counts as the current topic's).
bool gone_at_load(const std::optional<topic_ref>& current, const offset_key& k, const offset_value& v) {
  if (!current || k.partition >= current->partitions) return true;
  return v.topic_id != sluice::topic_id{} && v.topic_id != current->id;
}

}  // namespace

offset_manager::offset_manager(const coordinator_config& cfg, offsets_partitions& partitions, membership& members,
                               sluice::clock& clk, topic_lookup_fn topics)
    : cfg_(cfg),
      partitions_(partitions),
      members_(members),
      clk_(clk),
      topics_(std::move(topics)),
      next_expiry_check_ms_(clk.monotonic_ms() + cfg.offsets_retention_check_interval_ms) {}

std::optional<topic_ref> offset_manager::current_topic(const std::string& name) const {
  if (!topics_) return std::nullopt;
  return topics_(name);
}

bool offset_manager::answered(const offset_value& v, const std::optional<topic_ref>& current) const {
  if (!topics_ || v.topic_id == sluice::topic_id{}) return true;
  return current && current->id == v.topic_id;
}

void offset_manager::forget_in_flight(const offset_key& k, const sluice::topic_id& id) {
  auto it = in_flight_.find(k);
  SLUICE_ASSERT(it != in_flight_.end(), "a completing commit was in flight");
  auto& ids = it->second;
  auto at = std::find(ids.begin(), ids.end(), id);
  SLUICE_ASSERT(at != ids.end(), "a completing commit was in flight with its topic id");
  ids.erase(at);
  if (ids.empty()) in_flight_.erase(it);
}

const offset_manager::offset_map* offset_manager::offsets_of(const std::string& group_id) const {
  auto it = offsets_.find(group_id);
  return it == offsets_.end() ? nullptr : &it->second;
}

std::vector<offset_key> offset_manager::keys_of(const std::string& group_id) const {
  std::vector<offset_key> keys;
  if (const auto* offs = offsets_of(group_id))
    for (const auto& [tp, _] : *offs) keys.push_back({group_id, tp.first, tp.second});
  return keys;
}

// ---- Records ----------------------------------------------------------------------

void offset_manager::apply(const offset_key& k, const std::optional<offset_value>& v, int64_t log_offset) {
  const topic_partition tp{k.topic, k.partition};
  auto g = offsets_.find(k.group);
  if (observer_ && g != offsets_.end() && partitions_.holds(k.group)) {
    // Replay is skipped: what an old record held was accounted for (or not)
    // by the run that wrote it. A commit against a topic created again
    // under the name replaces nothing of that topic: not observed.
    auto it = g->second.find(tp);
    const bool same_topic = it != g->second.end() &&
                            (!v || it->second.value.topic_id == sluice::topic_id{} ||
                             v->topic_id == sluice::topic_id{} || it->second.value.topic_id == v->topic_id);
    if (same_topic) observer_(k.group, k.topic, k.partition, it->second.value.offset);
  }
  if (!v) {
    // Kafka's replay of an offset tombstone: the pending transactional
    // offsets of the key go with it (DeleteGroups writes one for a key that
    // is only pending).
    if (auto pg = pending_.find(k.group); pg != pending_.end()) {
      for (auto it = pg->second.begin(); it != pg->second.end();) {
        it->second.erase(tp);
        it = it->second.empty() ? pg->second.erase(it) : std::next(it);
      }
      if (pg->second.empty()) pending_.erase(pg);
    }
    if (g == offsets_.end()) return;
    g->second.erase(tp);
    if (g->second.empty()) offsets_.erase(g);
    return;
  }
  // A group that only holds offsets: its offsets expire by their commit
  // time alone (docs/group_records.md).
  members_.ensure(k.group);
  offsets_[k.group][tp] = stored_offset{*v, log_offset};
}

void offset_manager::apply_txn(const offset_key& k, const offset_value& v, int64_t producer_id, int64_t log_offset) {
  members_.ensure(k.group);
  pending_[k.group][producer_id][{k.topic, k.partition}] = stored_offset{v, log_offset};
}

void offset_manager::complete_txn(int32_t p, int64_t producer_id, bool commit, int64_t marker_offset) {
  for (auto g = pending_.begin(); g != pending_.end();) {
    if (partitions_.partition_of(g->first) != p) {
      ++g;
      continue;
    }
    const std::string group_id = g->first;
    auto prod = g->second.find(producer_id);
    if (prod != g->second.end()) {
      auto& tps = prod->second;
      for (auto it = tps.begin(); it != tps.end();) {
        // A batch after the marker belongs to the producer's next
        // transaction here.
        if (it->second.log_offset >= marker_offset) {
          ++it;
          continue;
        }
        if (commit) {
          // Kafka's rule: the transaction's offset wins unless the key's
          // committed offset was written after it.
          const offset_map* offs = offsets_of(group_id);
          const auto cur = offs ? offs->find(it->first) : offset_map::const_iterator{};
          if (!offs || cur == offs->end() || cur->second.log_offset < it->second.log_offset)
            apply({group_id, it->first.first, it->first.second}, it->second.value, it->second.log_offset);
        }
        it = tps.erase(it);
      }
      if (tps.empty()) g->second.erase(prod);
    }
    g = g->second.empty() ? pending_.erase(g) : std::next(g);
  }
}

void offset_manager::on_marker(int32_t p, int64_t producer_id, bool commit, int64_t marker_offset) {
  if (p < 0 || p >= partitions_.count()) return;
  const partition_state st = partitions_.state(p);
  if (st == partition_state::not_owned) return;
  if (st == partition_state::loaded) complete_txn(p, producer_id, commit, marker_offset);
  if (st == partition_state::loading || txn_in_flight_.count({p, producer_id}))
    heard_[p].push_back({producer_id, commit, marker_offset});
}

void offset_manager::finish_load(int32_t p) {
  auto it = heard_.find(p);
  if (it == heard_.end()) return;
  for (const auto& m : it->second) complete_txn(p, m.producer_id, m.commit, m.offset);
  std::erase_if(it->second, [&](const heard_marker& m) { return !txn_in_flight_.count({p, m.producer_id}); });
  if (it->second.empty()) heard_.erase(it);
}

void offset_manager::remove_group(const std::string& id) {
  if (auto g = offsets_.find(id); g != offsets_.end()) {
    if (observer_ && partitions_.holds(id)) {
      for (const auto& [tp, v] : g->second) observer_(id, tp.first, tp.second, v.value.offset);
    }
    offsets_.erase(g);
  }
  pending_.erase(id);
  members_.erase(id);
}

void offset_manager::drop_partition(int32_t p) {
  std::erase_if(offsets_, [&](const auto& kv) { return partitions_.partition_of(kv.first) == p; });
  std::erase_if(pending_, [&](const auto& kv) { return partitions_.partition_of(kv.first) == p; });
  heard_.erase(p);
  for (const auto& id : members_.groups_of(p)) members_.erase(id);
}

std::vector<committed_offset> offset_manager::committed_offsets() const {
  std::vector<committed_offset> out;
  std::map<std::string, std::optional<topic_ref>, std::less<>> current;  // looked up once per name
  for (const auto& [id, offs] : offsets_) {
    for (const auto& [tp, s] : offs) {
      auto c = current.find(tp.first);
      if (c == current.end()) c = current.emplace(tp.first, current_topic(tp.first)).first;
      if (answered(s.value, c->second)) out.push_back({id, tp.first, tp.second, s.value.offset});
    }
  }
  return out;
}

void offset_manager::write_tombstones(const std::string& group_id, const std::vector<offset_key>& keys,
                                      bool whole_group, offsets_partitions::then_fn then) {
  const int64_t now = clk_.now_ms();
  auto records = offset_tombstones(keys, now);
  if (whole_group) {
    protocol::records::record_input r;
    r.key = encode_key(group_key{group_id});
    r.timestamp_ms = now;
    records.push_back(std::move(r));
  }
  partitions_.append(group_id, std::move(records), std::move(then));
}

// ---- OffsetCommit -------------------------------------------------------------------

// One partition of an OffsetCommit: its record and offset go into `batch`,
// or the error that refuses it is returned. `held` counts the group's
// offsets with those the batch adds.
error_code offset_manager::add_commit(const std::string& group_id, const std::string& topic,
                                      const std::optional<topic_ref>& current, const commit_fields& p, bool known,
                                      size_t& held, int64_t now_ms, commit_batch& batch) const {
  if (p.committed_metadata && p.committed_metadata->size() > limits::max_offset_metadata_bytes)
    return error_code::offset_metadata_too_large;
  if (topic.empty() || topic.size() > limits::max_name_bytes || p.partition_index < 0 ||
      (topics_ && (!current || p.partition_index >= current->partitions)))
    return error_code::unknown_topic_or_partition;
  if (!known && ++held > limits::max_offsets_per_group) return error_code::invalid_commit_offset_size;
  offset_key k{group_id, topic, p.partition_index};
  offset_value v;
  v.offset = p.committed_offset;
  v.leader_epoch = p.committed_leader_epoch;
  v.metadata = p.committed_metadata.value_or("");
  v.commit_timestamp_ms = now_ms;
  // The topic the name resolves to now: a fetch answers the offset only
  // while the name still has it (docs/group_records.md, "Topic ids").
  if (current) v.topic_id = current->id;
  protocol::records::record_input r;
  r.key = encode_key(k);
  r.value = encode_value(v);
  r.timestamp_ms = now_ms;
  batch.records.push_back(std::move(r));
  batch.applied.emplace_back(std::move(k), std::move(v));
  return error_code::none;
}

void offset_manager::commit(const proto::offset_commit_request& req, int16_t version,
                            reply<proto::offset_commit_response> cb, outbox& out) {
  auto resp = std::make_shared<proto::offset_commit_response>();
  for (const auto& t : req.topics) {
    auto& rt = resp->topics.emplace_back();
    rt.name = t.name;
    for (const auto& p : t.partitions) rt.partitions.emplace_back().partition_index = p.partition_index;
  }
  auto fail_all = [&](error_code e) {
    for (auto& t : resp->topics)
      for (auto& p : t.partitions) p.error_code = to_wire(e);
    answer(cb, *resp, out);
  };
  if (auto e = partitions_.gate(req.group_id); e != error_code::none) return fail_all(e);
  if (!valid_group_id(req.group_id)) return fail_all(error_code::invalid_group_id);
  const int32_t generation = version >= 1 ? req.generation_id_or_member_epoch : -1;
  if (auto e = members_.may_commit(req.group_id, generation, req.member_id, req.group_instance_id, version);
      e != error_code::none)
    return fail_all(e);

  const int64_t now = clk_.now_ms();
  const offset_map* held_offsets = offsets_of(req.group_id);
  size_t held = held_count(req.group_id);
  commit_batch batch;
  for (size_t ti = 0; ti < req.topics.size(); ++ti) {
    const auto& t = req.topics[ti];
    const auto current = current_topic(t.name);
    for (size_t pi = 0; pi < t.partitions.size(); ++pi) {
      int16_t& ec = resp->topics[ti].partitions[pi].error_code;
      const auto& p = t.partitions[pi];
      const bool known = held_offsets && held_offsets->count({t.name, p.partition_index});
      const auto e = add_commit(req.group_id, t.name, current,
                                {p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata},
                                known, held, now, batch);
      if (e != error_code::none) {
        ec = to_wire(e);
      } else {
        batch.written.push_back(&ec);
      }
    }
  }
  if (batch.records.empty()) return answer(cb, *resp, out);
  for (const auto& [k, v] : batch.applied) in_flight_[k].push_back(v.topic_id);
  partitions_.append_at(req.group_id, std::move(batch.records), std::nullopt,
                        [this, resp, applied = std::move(batch.applied), written = std::move(batch.written),
                         cb = std::move(cb)](status s, int64_t base_offset, outbox& out) mutable {
                       for (const auto& [k, v] : applied) forget_in_flight(k, v.topic_id);
                       if (s.ok()) {
                         for (const auto& [k, v] : applied) apply(k, v, base_offset);
                       } else {
                         const auto e = kafka::to_group_write_error(s.code(), kafka::group_write::offset_commit);
                         for (int16_t* ec : written) *ec = to_wire(e);
                       }
                       answer(cb, *resp, out);
                     });
}

size_t offset_manager::held_count(const std::string& group_id) const {
  size_t n = 0;
  if (const auto* offs = offsets_of(group_id)) n += offs->size();
  if (auto g = pending_.find(group_id); g != pending_.end())
    for (const auto& [_, tps] : g->second) n += tps.size();
  return n;
}

bool offset_manager::pending_for(const std::string& group_id, const topic_partition& tp) const {
  auto g = pending_.find(group_id);
  if (g == pending_.end()) return false;
  for (const auto& [_, tps] : g->second)
    if (tps.count(tp)) return true;
  return false;
}

std::vector<offset_key> offset_manager::pending_only_keys(const std::string& group_id) const {
  std::set<topic_partition> tps;
  if (auto g = pending_.find(group_id); g != pending_.end())
    for (const auto& [_, m] : g->second)
      for (const auto& [tp, _2] : m) tps.insert(tp);
  const offset_map* offs = offsets_of(group_id);
  std::vector<offset_key> keys;
  for (const auto& tp : tps)
    if (!offs || !offs->count(tp)) keys.push_back({group_id, tp.first, tp.second});
  return keys;
}

// ---- TxnOffsetCommit ----------------------------------------------------------------

void offset_manager::txn_commit(const proto::txn_offset_commit_request& req, int16_t version,
                                reply<proto::txn_offset_commit_response> cb, outbox& out) {
  auto resp = std::make_shared<proto::txn_offset_commit_response>();
  for (const auto& t : req.topics) {
    auto& rt = resp->topics.emplace_back();
    rt.name = t.name;
    for (const auto& p : t.partitions) rt.partitions.emplace_back().partition_index = p.partition_index;
  }
  // TRANSACTION_ABORTABLE is v4's; a client before it learns that its
  // transaction must abort from INVALID_TXN_STATE.
  auto wire = [version](error_code e) {
    if (e == error_code::transaction_abortable && version < 4) e = error_code::invalid_txn_state;
    return to_wire(e);
  };
  auto fail_all = [&](error_code e) {
    for (auto& t : resp->topics)
      for (auto& p : t.partitions) p.error_code = wire(e);
    answer(cb, *resp, out);
  };
  if (auto e = partitions_.gate(req.group_id); e != error_code::none) return fail_all(e);
  if (!valid_group_id(req.group_id)) return fail_all(error_code::invalid_group_id);
  if (auto e = members_.may_commit_txn(req.group_id, req.generation_id, req.member_id, req.group_instance_id);
      e != error_code::none)
    return fail_all(e);
  // The partition fences epochs; an id or epoch that no producer can hold
  // is refused before anything is written.
  if (req.producer_id < 0) return fail_all(error_code::invalid_producer_id_mapping);
  if (req.producer_epoch < 0) return fail_all(error_code::invalid_producer_epoch);

  const int64_t now = clk_.now_ms();
  size_t held = held_count(req.group_id);
  const std::map<topic_partition, stored_offset>* mine = nullptr;  // this producer's pending offsets
  if (auto g = pending_.find(req.group_id); g != pending_.end())
    if (auto prod = g->second.find(req.producer_id); prod != g->second.end()) mine = &prod->second;
  commit_batch batch;
  for (size_t ti = 0; ti < req.topics.size(); ++ti) {
    const auto& t = req.topics[ti];
    const auto current = current_topic(t.name);
    for (size_t pi = 0; pi < t.partitions.size(); ++pi) {
      int16_t& ec = resp->topics[ti].partitions[pi].error_code;
      const auto& p = t.partitions[pi];
      const bool known = mine && mine->count({t.name, p.partition_index});
      const auto e = add_commit(req.group_id, t.name, current,
                                {p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata},
                                known, held, now, batch);
      if (e != error_code::none) {
        ec = wire(e);
      } else {
        batch.written.push_back(&ec);
      }
    }
  }
  if (batch.records.empty()) return answer(cb, *resp, out);
  const int32_t part = partitions_.partition_of(req.group_id);
  const int64_t pid = req.producer_id;
  for (const auto& [k, v] : batch.applied) in_flight_[k].push_back(v.topic_id);
  ++txn_in_flight_[{part, pid}];
  txn_producer producer{req.transactional_id, pid, req.producer_epoch, version >= 5};
  partitions_.append_at(
      req.group_id, std::move(batch.records), std::move(producer),
      [this, resp, part, pid, wire, applied = std::move(batch.applied), written = std::move(batch.written),
       cb = std::move(cb)](status s, int64_t base_offset, outbox& out) mutable {
        for (const auto& [k, v] : applied) forget_in_flight(k, v.topic_id);
        if (s.ok()) {
          for (const auto& [k, v] : applied) apply_txn(k, v, pid, base_offset);
        } else {
          const auto e = kafka::to_group_write_error(s.code(), kafka::group_write::txn_offset_commit);
          for (int16_t* ec : written) *ec = wire(e);
        }
        txn_append_done(part, pid, s.ok() ? base_offset : -1);
        answer(cb, *resp, out);
      });
}

void offset_manager::txn_append_done(int32_t p, int64_t producer_id, int64_t base_offset) {
  auto in_flight = txn_in_flight_.find({p, producer_id});
  SLUICE_ASSERT(in_flight != txn_in_flight_.end(), "a completing transactional commit was in flight");
  if (--in_flight->second == 0) txn_in_flight_.erase(in_flight);
  auto h = heard_.find(p);
  if (h == heard_.end()) return;
  if (base_offset >= 0) {
    // A marker of the producer reported while this batch was in flight,
    // and written after it, ends it now.
    auto markers = h->second;
    std::sort(markers.begin(), markers.end(),
              [](const heard_marker& a, const heard_marker& b) { return a.offset < b.offset; });
    for (const auto& m : markers)
      if (m.producer_id == producer_id && m.offset > base_offset) complete_txn(p, producer_id, m.commit, m.offset);
  }
  // Kept for a load still running (finish_load), else no longer needed.
  if (!txn_in_flight_.count({p, producer_id}) && partitions_.state(p) == partition_state::loaded) {
    std::erase_if(h->second, [producer_id](const heard_marker& m) { return m.producer_id == producer_id; });
    if (h->second.empty()) heard_.erase(h);
  }
}

// ---- OffsetFetch --------------------------------------------------------------------

fetch_group_response offset_manager::fetch_group(const std::string& group_id,
                                                 const std::optional<std::vector<fetch_topics>>& topics,
                                                 bool require_stable) const {
  fetch_group_response out;
  out.group_id = group_id;
  if (auto e = partitions_.gate(group_id); e != error_code::none) {
    out.error_code = to_wire(e);
  } else if (!valid_group_id(group_id)) {
    out.error_code = to_wire(error_code::invalid_group_id);
  }
  const offset_map* offs = out.error_code == 0 ? offsets_of(group_id) : nullptr;
  // An offset of an earlier topic of the name (deleted, the name taken
  // again) is answered as none: the group reads the topic it has now from
  // its reset policy.
  auto partition_of = [&](const std::string& topic, int32_t p, const std::optional<topic_ref>& current) {
    fetch_group_response::offset_fetch_response_topics::offset_fetch_response_partitions r;
    r.partition_index = p;
    r.committed_offset = -1;
    r.metadata = "";
    r.error_code = out.error_code;
    if (out.error_code == 0) {
      const auto it = offs ? offs->find({topic, p}) : offset_map::const_iterator{};
      if (require_stable && pending_for(group_id, {topic, p})) {
        // A transaction may still replace it (Kafka's UNSTABLE_OFFSET_COMMIT,
        // retriable): the consumer asks again once the transaction ends.
        r.error_code = to_wire(error_code::unstable_offset_commit);
      } else if (offs && it != offs->end() && answered(it->second.value, current)) {
        r.committed_offset = it->second.value.offset;
        r.committed_leader_epoch = it->second.value.leader_epoch;
        r.metadata = it->second.value.metadata;
      }
    }
    return r;
  };
  if (!topics) {
    if (offs) {
      std::optional<topic_ref> current;  // of the topic of the entries being walked (sorted by name)
      const std::string* looked_up = nullptr;
      for (const auto& [tp, v] : *offs) {
        if (!looked_up || *looked_up != tp.first) {
          looked_up = &tp.first;
          current = current_topic(tp.first);
        }
        if (!answered(v.value, current)) continue;
        if (out.topics.empty() || out.topics.back().name != tp.first) out.topics.emplace_back().name = tp.first;
        out.topics.back().partitions.push_back(partition_of(tp.first, tp.second, current));
      }
    }
    return out;
  }
  for (const auto& t : *topics) {
    auto& rt = out.topics.emplace_back();
    rt.name = t.name;
    const auto current = offs ? current_topic(t.name) : std::nullopt;
    for (int32_t p : t.partition_indexes) rt.partitions.push_back(partition_of(t.name, p, current));
  }
  return out;
}

proto::offset_fetch_response offset_manager::fetch(const proto::offset_fetch_request& req, int16_t version) const {
  if (version >= 8) {
    proto::offset_fetch_response resp;
    for (const auto& grp : req.groups)
      resp.groups.push_back(fetch_group(grp.group_id, grp.topics, req.require_stable));
    return resp;
  }
  std::optional<std::vector<fetch_topics>> topics;
  if (req.topics) {
    topics.emplace();
    for (const auto& t : *req.topics) topics->push_back({t.name, t.partition_indexes});
  }
  return to_single_group(fetch_group(req.group_id, topics, version >= 7 && req.require_stable));
}

// ---- OffsetDelete, DeleteGroups, deleted topics ----------------------------------------

void offset_manager::delete_offsets(const proto::offset_delete_request& req, reply<proto::offset_delete_response> cb,
                                    outbox& out) {
  auto resp = std::make_shared<proto::offset_delete_response>();
  auto fail = [&](error_code e) {
    resp->error_code = to_wire(e);
    answer(cb, *resp, out);
  };
  if (auto e = partitions_.gate(req.group_id); e != error_code::none) return fail(e);
  if (!valid_group_id(req.group_id)) return fail(error_code::invalid_group_id);
  // Topics the members of a live consumer group are subscribed to keep
  // their offsets (GROUP_SUBSCRIBED_TO_TOPIC).
  std::set<std::string> subscribed;
  if (auto e = members_.subscribed_topics(req.group_id, subscribed); e != error_code::none) return fail(e);
  // The response is laid out first so pointers into it stay valid.
  for (const auto& t : req.topics) {
    auto& rt = resp->topics.emplace_back();
    rt.name = t.name;
    for (const auto& p : t.partitions) rt.partitions.emplace_back().partition_index = p.partition_index;
  }
  const offset_map* offs = offsets_of(req.group_id);
  std::vector<offset_key> deleted;
  std::vector<int16_t*> written;
  for (auto& rt : resp->topics) {
    for (auto& rp : rt.partitions) {
      if (subscribed.count(rt.name)) {
        rp.error_code = to_wire(error_code::group_subscribed_to_topic);
        continue;
      }
      if (!offs || !offs->count({rt.name, rp.partition_index})) continue;
      deleted.push_back({req.group_id, rt.name, rp.partition_index});
      written.push_back(&rp.error_code);
    }
  }
  if (deleted.empty()) return answer(cb, *resp, out);
  write_tombstones(req.group_id, deleted, false,
                   [this, resp, deleted, written = std::move(written), cb = std::move(cb)](status s,
                                                                                          outbox& out) mutable {
                     if (s.ok()) {
                       for (const auto& k : deleted) apply(k, std::nullopt);
                     } else {
                       for (int16_t* ec : written) *ec = to_wire(tombstone_write_error(s));
                     }
                     answer(cb, *resp, out);
                   });
}

void offset_manager::remove_whole_group(const std::string& id, std::vector<offset_key> expired,
                                        std::function<void(status, outbox&)> done) {
  write_tombstones(id, expired, true, [this, id, done = std::move(done)](status s, outbox& out) {
    if (s.ok()) {
      remove_group(id);
    } else {
      members_.end_removal(id, false);
    }
    done(s, out);
  });
}

void offset_manager::delete_groups(const proto::delete_groups_request& req, reply<proto::delete_groups_response> cb,
                                   outbox& out) {
  struct pending {
    proto::delete_groups_response resp;
    size_t waiting = 1;  // one extra until every append is issued
    reply<proto::delete_groups_response> cb;
  };
  auto op = std::make_shared<pending>();
  op->cb = std::move(cb);
  auto finish = [op](outbox& out) {
    if (--op->waiting == 0) answer(op->cb, op->resp, out);
  };
  op->resp.results.reserve(req.groups_names.size());
  for (size_t i = 0; i < req.groups_names.size(); ++i) {
    const std::string& id = req.groups_names[i];
    auto& r = op->resp.results.emplace_back();
    r.group_id = id;
    error_code e = partitions_.gate(id);
    if (e == error_code::none && !valid_group_id(id)) e = error_code::invalid_group_id;
    if (e == error_code::none) e = members_.begin_removal(id);
    if (e != error_code::none) {
      r.error_code = to_wire(e);
      continue;
    }
    ++op->waiting;
    // Kafka's deletion writes a tombstone for a key only pending too, so
    // that a replay drops the pending offsets with the group.
    auto keys = keys_of(id);
    for (auto& k : pending_only_keys(id)) keys.push_back(std::move(k));
    remove_whole_group(id, std::move(keys), [op, i, id, finish](status s, outbox& out) {
      if (s.ok()) {
        SLUICE_LOG_DEBUG("group {} deleted", id);
      } else {
        op->resp.results[i].error_code = to_wire(tombstone_write_error(s));
      }
      finish(out);
    });
  }
  finish(out);
}

void offset_manager::write_deletion(const std::string& group_id, std::vector<offset_key> keys, stale_fn stale) {
  write_tombstones(group_id, keys, false, [this, keys, stale = std::move(stale)](status s, outbox&) {
    if (!s.ok()) return;
    for (const auto& k : keys) {
      // Only if still stale: never the offset of a topic that was current
      // when the tombstone was decided.
      const offset_map* offs = offsets_of(k.group);
      if (!offs) continue;
      auto it = offs->find({k.topic, k.partition});
      if (it != offs->end() && stale(k, it->second.value)) apply(k, std::nullopt);
    }
  });
}

void offset_manager::delete_topic(const std::string& topic, const sluice::topic_id& id) {
  // The name's current topic (created again, if the deletion comes late)
  // keeps its offsets; those of the deleted topic, of older topics of the
  // name and without an id (older than this deletion) go. Without a
  // current topic (or told of the deletion of the one the lookup still
  // finds) every offset of the name goes.
  std::optional<sluice::topic_id> keep;
  if (auto current = current_topic(topic); current && current->id != id) keep = current->id;
  stale_fn stale = [keep](const offset_key&, const offset_value& v) { return !keep || v.topic_id != *keep; };
  // A commit in flight against the current topic: a tombstone now would
  // land after it in the log and delete it at the next replay.
  auto current_in_flight = [&](const offset_key& k) {
    auto it = in_flight_.find(k);
    return keep && it != in_flight_.end() &&
           std::find(it->second.begin(), it->second.end(), *keep) != it->second.end();
  };
  // Partitions still loading are not touched here: their load ends with
  // delete_missing_topics, which finds this topic gone.
  std::map<std::string, std::vector<offset_key>> gone;  // by group
  for (const auto& [group_id, offs] : offsets_) {
    if (!partitions_.holds(group_id)) continue;
    for (const auto& [tp, v] : offs) {
      if (tp.first != topic) continue;
      offset_key k{group_id, tp.first, tp.second};
      if (stale(k, v.value) && !current_in_flight(k)) gone[group_id].push_back(std::move(k));
    }
  }
  // A commit in flight against a stale topic (none against the current
  // one) gets its tombstone too, after it.
  for (const auto& [k, _] : in_flight_) {
    if (k.topic != topic || !partitions_.holds(k.group) || current_in_flight(k)) continue;
    auto& keys = gone[k.group];
    if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  }
  for (auto& [group_id, keys] : gone) {
    SLUICE_LOG_INFO("group {}: {} committed offsets of deleted topic {} (id {}) removed", group_id, keys.size(),
                    topic, to_hex(id));
    write_deletion(group_id, std::move(keys), stale);
  }
}

void offset_manager::delete_missing_topics(int32_t p) {
  if (!topics_) return;
  // The topics the partition's offsets name, looked up once, shared by the
  // completions (which decide again from the same view).
  using topic_view = std::map<std::string, std::optional<topic_ref>, std::less<>>;
  auto view = std::make_shared<topic_view>();
  for (const auto& [group_id, offs] : offsets_) {
    if (partitions_.partition_of(group_id) != p) continue;
    for (const auto& [tp, _] : offs)
      if (!view->count(tp.first)) view->emplace(tp.first, current_topic(tp.first));
  }
  stale_fn gone_now = [view = std::shared_ptr<const topic_view>(view)](const offset_key& k, const offset_value& v) {
    auto c = view->find(k.topic);
    return c != view->end() && gone_at_load(c->second, k, v);
  };
  for (const auto& [group_id, offs] : offsets_) {
    if (partitions_.partition_of(group_id) != p) continue;
    std::vector<offset_key> gone;
    for (const auto& [tp, v] : offs) {
      offset_key k{group_id, tp.first, tp.second};
      if (gone_now(k, v.value)) gone.push_back(std::move(k));
    }
    if (gone.empty()) continue;
    SLUICE_LOG_INFO("group {}: {} committed offsets of deleted or replaced topics removed after loading {}-{}",
                    group_id, gone.size(), offsets_topic, p);
    write_deletion(group_id, std::move(gone), gone_now);
  }
}

// ---- Expiry -------------------------------------------------------------------------------

void offset_manager::schedule_expiry() {
  next_expiry_check_ms_ = clk_.monotonic_ms() + cfg_.offsets_retention_check_interval_ms;
}

void offset_manager::tick() {
  if (clk_.monotonic_ms() < next_expiry_check_ms_) return;
  schedule_expiry();
  expire(clk_.now_ms());
}

void offset_manager::expire(int64_t now_ms) {
  std::vector<std::pair<std::string, int64_t>> idle;  // group, state timestamp
  members_.for_each_idle([&](const std::string& id, int64_t state_ts) { idle.emplace_back(id, state_ts); });
  for (const auto& [id, state_ts] : idle) {
    std::vector<offset_key> expired;
    const offset_map* offs = offsets_of(id);
    if (offs) {
      for (const auto& [tp, v] : *offs) {
        // An offset a pending transaction may still replace stays (Kafka).
        if (pending_for(id, tp)) continue;
        const int64_t since = std::max(v.value.commit_timestamp_ms, state_ts);
        if (now_ms - since >= cfg_.offsets_retention_ms) expired.push_back({id, tp.first, tp.second});
      }
    }
    // A group with an open transaction stays for its marker.
    const bool whole_group = expired.size() == (offs ? offs->size() : 0) && !has_pending(id) &&
                             now_ms - state_ts >= cfg_.offsets_retention_ms;
    if (expired.empty() && !whole_group) continue;
    SLUICE_LOG_INFO("group {}: {} committed offsets expired{}", id, expired.size(),
                    whole_group ? "; the group is removed" : "");
    if (whole_group) {
      const auto e = members_.begin_removal(id);
      SLUICE_ASSERT(e == error_code::none, "an idle group can be removed");
      remove_whole_group(id, std::move(expired), [](status, outbox&) {});
      continue;
    }
    write_tombstones(id, expired, false, [this, expired](status s, outbox&) {
      if (!s.ok()) return;
      for (const auto& k : expired) apply(k, std::nullopt);
    });
  }
}

}  // namespace sluice::group
