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

}  // namespace

offset_manager::offset_manager(const coordinator_config& cfg, offsets_partitions& partitions, membership& members,
                               sluice::clock& clk, partition_exists_fn partition_exists)
    : cfg_(cfg),
      partitions_(partitions),
      members_(members),
      clk_(clk),
      partition_exists_(std::move(partition_exists)),
      next_expiry_check_ms_(clk.monotonic_ms() + cfg.offsets_retention_check_interval_ms) {}

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

void offset_manager::apply(const offset_key& k, const std::optional<offset_value>& v) {
  const topic_partition tp{k.topic, k.partition};
  auto g = offsets_.find(k.group);
  if (observer_ && g != offsets_.end() && partitions_.holds(k.group)) {
    // Replay is skipped: what an old record held was accounted for (or not)
    // by the run that wrote it.
    if (auto it = g->second.find(tp); it != g->second.end()) observer_(k.group, k.topic, k.partition, it->second.offset);
  }
  if (!v) {
    if (g == offsets_.end()) return;
    g->second.erase(tp);
    if (g->second.empty()) offsets_.erase(g);
    return;
  }
  // A group that only holds offsets: its offsets expire by their commit
  // time alone (docs/group_records.md).
  members_.ensure(k.group);
  offsets_[k.group][tp] = *v;
}

void offset_manager::remove_group(const std::string& id) {
  if (auto g = offsets_.find(id); g != offsets_.end()) {
    if (observer_ && partitions_.holds(id)) {
      for (const auto& [tp, v] : g->second) observer_(id, tp.first, tp.second, v.offset);
    }
    offsets_.erase(g);
  }
  members_.erase(id);
}

void offset_manager::drop_partition(int32_t p) {
  std::erase_if(offsets_, [&](const auto& kv) { return partitions_.partition_of(kv.first) == p; });
  for (const auto& id : members_.groups_of(p)) members_.erase(id);
}

std::vector<committed_offset> offset_manager::committed_offsets() const {
  std::vector<committed_offset> out;
  for (const auto& [id, offs] : offsets_) {
    for (const auto& [tp, v] : offs) out.push_back({id, tp.first, tp.second, v.offset});
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
                                      const commit_partition& p, const offset_map* held_offsets, size_t& held,
                                      int64_t now_ms, commit_batch& batch) const {
  if (p.committed_metadata && p.committed_metadata->size() > limits::max_offset_metadata_bytes)
    return error_code::offset_metadata_too_large;
  if (topic.empty() || topic.size() > limits::max_name_bytes || p.partition_index < 0 ||
      (partition_exists_ && !partition_exists_(topic, p.partition_index)))
    return error_code::unknown_topic_or_partition;
  const bool known = held_offsets && held_offsets->count({topic, p.partition_index});
  if (!known && ++held > limits::max_offsets_per_group) return error_code::invalid_commit_offset_size;
  offset_key k{group_id, topic, p.partition_index};
  offset_value v;
  v.offset = p.committed_offset;
  v.leader_epoch = p.committed_leader_epoch;
  v.metadata = p.committed_metadata.value_or("");
  v.commit_timestamp_ms = now_ms;
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
  size_t held = held_offsets ? held_offsets->size() : 0;
  commit_batch batch;
  for (size_t ti = 0; ti < req.topics.size(); ++ti) {
    const auto& t = req.topics[ti];
    for (size_t pi = 0; pi < t.partitions.size(); ++pi) {
      int16_t& ec = resp->topics[ti].partitions[pi].error_code;
      const auto e = add_commit(req.group_id, t.name, t.partitions[pi], held_offsets, held, now, batch);
      if (e != error_code::none) {
        ec = to_wire(e);
      } else {
        batch.written.push_back(&ec);
      }
    }
  }
  if (batch.records.empty()) return answer(cb, *resp, out);
  partitions_.append(req.group_id, std::move(batch.records),
                     [this, resp, applied = std::move(batch.applied), written = std::move(batch.written),
                      cb = std::move(cb)](status s, outbox& out) mutable {
                       if (s.ok()) {
                         for (const auto& [k, v] : applied) apply(k, v);
                       } else {
                         const auto e = kafka::to_group_write_error(s.code(), kafka::group_write::offset_commit);
                         for (int16_t* ec : written) *ec = to_wire(e);
                       }
                       answer(cb, *resp, out);
                     });
}

// ---- OffsetFetch --------------------------------------------------------------------

fetch_group_response offset_manager::fetch_group(const std::string& group_id,
                                                 const std::optional<std::vector<fetch_topics>>& topics) const {
  fetch_group_response out;
  out.group_id = group_id;
  if (auto e = partitions_.gate(group_id); e != error_code::none) {
    out.error_code = to_wire(e);
  } else if (!valid_group_id(group_id)) {
    out.error_code = to_wire(error_code::invalid_group_id);
  }
  const offset_map* offs = out.error_code == 0 ? offsets_of(group_id) : nullptr;
  auto partition_of = [&](const std::string& topic, int32_t p) {
    fetch_group_response::offset_fetch_response_topics::offset_fetch_response_partitions r;
    r.partition_index = p;
    r.committed_offset = -1;
    r.metadata = "";
    r.error_code = out.error_code;
    if (offs) {
      auto it = offs->find({topic, p});
      if (it != offs->end()) {
        r.committed_offset = it->second.offset;
        r.committed_leader_epoch = it->second.leader_epoch;
        r.metadata = it->second.metadata;
      }
    }
    return r;
  };
  if (!topics) {
    if (offs) {
      for (const auto& [tp, _] : *offs) {
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
}

proto::offset_fetch_response offset_manager::fetch(const proto::offset_fetch_request& req, int16_t version) const {
  if (version >= 8) {
    proto::offset_fetch_response resp;
    for (const auto& grp : req.groups) resp.groups.push_back(fetch_group(grp.group_id, grp.topics));
    return resp;
  }
  std::optional<std::vector<fetch_topics>> topics;
  if (req.topics) {
    topics.emplace();
    for (const auto& t : *req.topics) topics->push_back({t.name, t.partition_indexes});
  }
  return to_single_group(fetch_group(req.group_id, topics));
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
    remove_whole_group(id, keys_of(id), [op, i, id, finish](status s, outbox& out) {
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

void offset_manager::delete_topic(const std::string& topic) {
  // Partitions still loading are not touched here: their load ends with
  // delete_missing_topics, which finds this topic gone.
  for (const auto& [id, offs] : offsets_) {
    if (!partitions_.holds(id)) continue;
    std::vector<offset_key> gone;
    for (const auto& [tp, _] : offs)
      if (tp.first == topic) gone.push_back({id, tp.first, tp.second});
    if (gone.empty()) continue;
    SLUICE_LOG_INFO("group {}: {} committed offsets of deleted topic {} removed", id, gone.size(), topic);
    write_tombstones(id, gone, false, [this, gone](status s, outbox&) {
      if (!s.ok()) return;
      for (const auto& k : gone) apply(k, std::nullopt);
    });
  }
}

void offset_manager::delete_missing_topics(int32_t p) {
  if (!partition_exists_) return;
  for (const auto& [id, offs] : offsets_) {
    if (partitions_.partition_of(id) != p) continue;
    std::vector<offset_key> gone;
    for (const auto& [tp, _] : offs)
      if (!partition_exists_(tp.first, tp.second)) gone.push_back({id, tp.first, tp.second});
    if (gone.empty()) continue;
    SLUICE_LOG_INFO("group {}: {} committed offsets of deleted topics removed after loading {}-{}", id, gone.size(),
                    offsets_topic, p);
    write_tombstones(id, gone, false, [this, gone](status s, outbox&) {
      if (!s.ok()) return;
      for (const auto& k : gone) apply(k, std::nullopt);
    });
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
        const int64_t since = std::max(v.commit_timestamp_ms, state_ts);
        if (now_ms - since >= cfg_.offsets_retention_ms) expired.push_back({id, tp.first, tp.second});
      }
    }
    const bool whole_group =
        expired.size() == (offs ? offs->size() : 0) && now_ms - state_ts >= cfg_.offsets_retention_ms;
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
