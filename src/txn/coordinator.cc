#include "txn/coordinator.h"

#include <algorithm>
#include <set>

#include "base/assert.h"

namespace sluice::txn {

namespace {

decision answer_now(errc e, int64_t producer_id = no_producer_id, int16_t producer_epoch = no_producer_epoch) {
  decision d;
  d.now = answer{e, producer_id, producer_epoch};
  return d;
}

// Producers older than the PRODUCER_FENCED code (InitProducerId v0-3, the
// other APIs v0-1) get INVALID_PRODUCER_EPOCH for it, as Kafka answers them.
errc fenced_code(errc e, bool old_fenced_code) {
  return old_fenced_code && e == errc::producer_fenced ? errc::invalid_producer_epoch : e;
}

bool idle(txn_state s) {
  return s == txn_state::empty || s == txn_state::complete_commit || s == txn_state::complete_abort;
}

}  // namespace

errc map_append_error(errc e) {
  switch (e) {
    case errc::ok: return errc::ok;
    case errc::not_coordinator:
    case errc::not_leader:
    case errc::fenced_leader_epoch:
    case errc::shutting_down:
    case errc::io_error:
    case errc::no_space:
    case errc::log_offline: return errc::not_coordinator;
    case errc::message_too_large:
    case errc::record_list_too_large: return errc::internal_error;
    default: return errc::coordinator_not_available;
  }
}

coordinator::coordinator(coordinator_config cfg, sluice::clock& clk, producer_id_source next_producer_id)
    : cfg_(cfg), clk_(clk), next_producer_id_(std::move(next_producer_id)) {
  SLUICE_ASSERT(cfg_.num_partitions > 0, "__transaction_state needs a partition");
}

int32_t coordinator::partition_for(std::string_view transactional_id) const {
  return txn::partition_for(transactional_id, cfg_.num_partitions);
}

// ---- Loading ---------------------------------------------------------------------

void coordinator::drop_partition(int32_t p) {
  auto it = partitions_.find(p);
  if (it == partitions_.end()) return;
  id_count_ -= it->second.ids.size();
  partitions_.erase(it);
}

void coordinator::begin_load(int32_t p, int32_t coordinator_epoch) {
  drop_partition(p);
  partition& part = partitions_[p];
  part.state = part_state::loading;
  part.coordinator_epoch = coordinator_epoch;
}

status coordinator::replay(int32_t p, std::span<const uint8_t> key, std::optional<std::span<const uint8_t>> value) {
  auto it = partitions_.find(p);
  if (it == partitions_.end() || it->second.state != part_state::loading)
    return error{errc::not_coordinator, "partition " + std::to_string(p) + " is not loading"};
  partition& part = it->second;
  auto id = decode_key(key);
  if (!id.ok()) return id.err();
  if (partition_for(*id) != p)
    return error{errc::corrupt_data, "transactional id '" + *id + "' belongs to partition " +
                                         std::to_string(partition_for(*id)) + ", not " + std::to_string(p)};
  auto found = part.ids.find(*id);
  if (!value) {
    if (found != part.ids.end()) {
      part.ids.erase(found);
      --id_count_;
    }
    return {};
  }
  auto v = decode_value(*value);
  if (!v.ok()) return v.err();
  if (v->state == txn_state::dead || v->state == txn_state::prepare_epoch_fence)
    return error{errc::corrupt_data, "transactional id '" + *id + "' in state " + std::string(state_name(v->state)) +
                                         ", which is never written"};
  if (found == part.ids.end()) {
    part.ids.emplace(*id, entry{txn_metadata(*id, std::move(*v)), std::nullopt});
    ++id_count_;
  } else {
    found->second.md.apply_record(*v);
  }
  return {};
}

std::vector<markers> coordinator::finish_load(int32_t p) {
  std::vector<markers> out;
  auto it = partitions_.find(p);
  if (it == partitions_.end() || it->second.state != part_state::loading) return out;
  partition& part = it->second;
  part.state = part_state::loaded;
  const int64_t now_ms = clk_.now_ms();
  for (auto& [id, e] : part.ids) {
    const txn_state s = e.md.state();
    if (s != txn_state::prepare_commit && s != txn_state::prepare_abort) continue;
    // The last coordinator decided the outcome; its markers may not all be
    // written. Writing them again is harmless (a partition takes a marker
    // for a producer with no open transaction as a no-op).
    (void)e.md.prepare_complete(now_ms);
    out.push_back(markers_of(part, e.md));
  }
  return out;
}

void coordinator::unload(int32_t p) { drop_partition(p); }

bool coordinator::loaded(int32_t p) const {
  auto it = partitions_.find(p);
  return it != partitions_.end() && it->second.state == part_state::loaded;
}

bool coordinator::loading(int32_t p) const {
  auto it = partitions_.find(p);
  return it != partitions_.end() && it->second.state == part_state::loading;
}

coordinator::lookup coordinator::find_id(std::string_view transactional_id) {
  lookup l;
  auto it = partitions_.find(partition_for(transactional_id));
  if (it == partitions_.end()) {
    l.error = errc::not_coordinator;
    return l;
  }
  if (it->second.state == part_state::loading) {
    l.error = errc::coordinator_load_in_progress;
    return l;
  }
  l.part = &it->second;
  auto e = it->second.ids.find(transactional_id);
  if (e != it->second.ids.end()) l.e = &e->second;
  return l;
}

const txn_metadata* coordinator::find(const std::string& transactional_id) const {
  auto it = partitions_.find(partition_for(transactional_id));
  if (it == partitions_.end() || it->second.state != part_state::loaded) return nullptr;
  auto e = it->second.ids.find(transactional_id);
  return e == it->second.ids.end() ? nullptr : &e->second.md;
}

decision coordinator::make_write(partition& part, entry& e, const txn_log_value& transit, write_kind kind,
                                 bool old_fenced_code) {
  const std::string& id = e.md.transactional_id();
  write w;
  w.ref = write_ref{next_write_id_++, partition_for(id), part.coordinator_epoch, id};
  w.key = encode_key(id);
  if (transit.state != txn_state::dead) w.value = encode_value(transit);
  e.write = in_flight{w.ref.id, kind, old_fenced_code};
  decision d;
  d.to_write = std::move(w);
  return d;
}

markers coordinator::markers_of(const partition& part, const txn_metadata& md) const {
  const txn_log_value& d = md.durable();
  markers m;
  m.transactional_id = md.transactional_id();
  m.producer_id = d.producer_id;
  m.producer_epoch = d.producer_epoch;
  m.coordinator_epoch = part.coordinator_epoch;
  m.type = d.state == txn_state::prepare_commit ? marker_type::commit : marker_type::abort;
  m.version = d.client_version;
  m.partitions.assign(d.partitions.begin(), d.partitions.end());
  return m;
}

// ---- InitProducerId ----------------------------------------------------------------

decision coordinator::init_producer_id(const init_producer_id_request& req) {
  const bool old = req.api_version < 4;
  auto fail = [&](errc e) { return answer_now(fenced_code(e, old)); };
  if (req.transactional_id.empty()) return fail(errc::invalid_argument);
  if (req.transactional_id.size() > limits::max_transactional_id_bytes) return fail(errc::policy_violation);
  if (req.transaction_timeout_ms <= 0 || req.transaction_timeout_ms > cfg_.max_timeout_ms)
    return fail(errc::invalid_transaction_timeout);
  // KIP-360: the producer's id and epoch come together or not at all.
  std::optional<std::pair<int64_t, int16_t>> expected;
  if (req.producer_id != no_producer_id || req.producer_epoch != no_producer_epoch) {
    if (req.producer_id == no_producer_id || req.producer_epoch == no_producer_epoch)
      return fail(errc::invalid_argument);
    expected.emplace(req.producer_id, req.producer_epoch);
  }
  lookup l = find_id(req.transactional_id);
  if (l.error != errc::ok) return fail(l.error);
  const int64_t now_ms = clk_.now_ms();
  if (!l.e) {
    // A new id is held (Empty, epoch -1) from now on, even if its first
    // record fails: a retry then finds it and bumps to epoch 0, as Kafka.
    if (id_count_ >= limits::max_transactional_ids) return fail(errc::policy_violation);
    auto pid = next_producer_id_();
    if (!pid.ok()) return fail(pid.code());
    auto [it, inserted] = l.part->ids.emplace(
        req.transactional_id,
        entry{txn_metadata(req.transactional_id, *pid, req.transaction_timeout_ms, now_ms), std::nullopt});
    SLUICE_ASSERT(inserted, "a new transactional id was there");
    ++id_count_;
    l.e = &it->second;
  }
  txn_metadata& md = l.e->md;
  const txn_log_value& d = md.durable();
  if (md.has_pending()) return fail(errc::concurrent_transactions);
  if (expected) {
    // Kafka's isValidProducerId: an id not yet given an epoch, the current
    // producer id (its epoch is checked below), or the previous one with an
    // exhausted epoch (a retry of a rotation whose answer was lost).
    const bool valid = d.producer_epoch == no_producer_epoch || expected->first == d.producer_id ||
                       (expected->first == d.previous_producer_id && epoch_exhausted(expected->second));
    if (!valid) return fail(errc::producer_fenced);
  }
  switch (d.state) {
    case txn_state::prepare_commit:
    case txn_state::prepare_abort: return fail(errc::concurrent_transactions);
    case txn_state::empty:
    case txn_state::complete_commit:
    case txn_state::complete_abort: {
      if (epoch_exhausted(d.producer_epoch) && (!expected || expected->second == d.producer_epoch)) {
        auto pid = next_producer_id_();
        if (!pid.ok()) return fail(pid.code());
        const txn_log_value t =
            md.prepare_producer_id_rotation(*pid, req.transaction_timeout_ms, now_ms, expected.has_value());
        return make_write(*l.part, *l.e, t, write_kind::init, old);
      }
      auto t = md.prepare_increment_epoch(req.transaction_timeout_ms,
                                          expected ? std::optional<int16_t>(expected->second) : std::nullopt, now_ms);
      if (!t.ok()) return fail(t.code());
      return make_write(*l.part, *l.e, *t, write_kind::init, old);
    }
    case txn_state::ongoing: {
      // Abort the open transaction first, fencing its producer with a
      // bumped epoch; the client is answered CONCURRENT_TRANSACTIONS and
      // retries, and its retry bumps the epoch again once the abort is
      // complete (a new producer id if that exhausts the epoch).
      const txn_log_value t = md.prepare_fence_and_abort(cfg_.server_version, now_ms);
      return make_write(*l.part, *l.e, t, write_kind::fence_for_init, old);
    }
    case txn_state::dead:
    case txn_state::prepare_epoch_fence: break;
  }
  SLUICE_ASSERT(false, "a transactional id held in a state that is never applied");
  return fail(errc::invalid_txn_state);
}

// ---- AddPartitionsToTxn, AddOffsetsToTxn ---------------------------------------------

decision coordinator::add_to_txn(const std::string& transactional_id, int64_t producer_id, int16_t producer_epoch,
                                 const partition_set& partitions, txn_version version, bool old_fenced_code) {
  auto fail = [&](errc e) { return answer_now(fenced_code(e, old_fenced_code)); };
  if (transactional_id.empty()) return fail(errc::invalid_argument);
  lookup l = find_id(transactional_id);
  if (l.error != errc::ok) return fail(l.error);
  if (!l.e) return fail(errc::invalid_producer_id_mapping);
  txn_metadata& md = l.e->md;
  const txn_log_value& d = md.durable();
  // The pending check comes first: over an epoch overflow (transaction
  // version 2) the producer already uses the next producer id while the
  // completion that moves to it is still in flight.
  if (md.has_pending()) return fail(errc::concurrent_transactions);
  if (d.producer_id != producer_id) return fail(errc::invalid_producer_id_mapping);
  if (d.producer_epoch != producer_epoch) return fail(errc::producer_fenced);
  if (d.state == txn_state::prepare_commit || d.state == txn_state::prepare_abort)
    return fail(errc::concurrent_transactions);
  if (d.state == txn_state::ongoing &&
      std::includes(d.partitions.begin(), d.partitions.end(), partitions.begin(), partitions.end()))
    return answer_now(errc::ok);
  size_t total = d.state == txn_state::ongoing ? d.partitions.size() : 0;
  for (const auto& tp : partitions)
    if (d.state != txn_state::ongoing || !d.partitions.contains(tp)) ++total;
  if (total > limits::max_partitions_per_transaction) return fail(errc::policy_violation);
  const txn_log_value t = md.prepare_add_partitions(partitions, clk_.now_ms(), version);
  return make_write(*l.part, *l.e, t, write_kind::add, old_fenced_code);
}

decision coordinator::add_partitions(const add_partitions_request& req) {
  // Versions 4 and up come from partition leaders; one that adds (rather
  // than verifies) does so for a producer of transaction version 2.
  const txn_version v = req.api_version > 3 ? txn_version::tv2 : txn_version::tv0;
  return add_to_txn(req.transactional_id, req.producer_id, req.producer_epoch, req.partitions, v,
                    req.api_version < 2);
}

decision coordinator::add_offsets(const add_offsets_request& req) {
  return add_to_txn(req.transactional_id, req.producer_id, req.producer_epoch, partition_set{req.offsets_partition},
                    txn_version::tv0, req.api_version < 2);
}

verify_answer coordinator::verify_partitions(const std::string& transactional_id, int64_t producer_id,
                                             int16_t producer_epoch, const partition_set& partitions) {
  verify_answer a;
  auto fail = [&](errc e) {
    a.error = e;
    for (const auto& tp : partitions) a.partitions[tp] = e;
    return a;
  };
  if (transactional_id.empty()) return fail(errc::invalid_argument);
  lookup l = find_id(transactional_id);
  if (l.error != errc::ok) return fail(l.error);
  if (!l.e) return fail(errc::invalid_producer_id_mapping);
  // No pending check: the partition's append is validated again at its
  // end, and partitions join the set only once their record is durable
  // and leave it only once the markers are.
  const txn_log_value& d = l.e->md.durable();
  if (d.producer_id != producer_id) return fail(errc::invalid_producer_id_mapping);
  if (d.producer_epoch != producer_epoch) return fail(errc::producer_fenced);
  if (d.state == txn_state::prepare_commit || d.state == txn_state::prepare_abort)
    return fail(errc::concurrent_transactions);
  for (const auto& tp : partitions)
    a.partitions[tp] = d.partitions.contains(tp) ? errc::ok : errc::transaction_abortable;
  return a;
}

// ---- EndTxn ---------------------------------------------------------------------------

decision coordinator::end_txn(const end_txn_request& req) {
  const txn_version v = req.api_version > 4 ? txn_version::tv2 : txn_version::tv0;
  return end_transaction(req, v, req.api_version < 2);
}

decision coordinator::end_transaction(const end_txn_request& req, txn_version version, bool old_fenced_code) {
  auto fail = [&](errc e) { return answer_now(fenced_code(e, old_fenced_code)); };
  if (req.transactional_id.empty()) return fail(errc::invalid_argument);
  lookup l = find_id(req.transactional_id);
  if (l.error != errc::ok) return fail(l.error);
  if (!l.e) return fail(errc::invalid_producer_id_mapping);
  txn_metadata& md = l.e->md;
  const txn_log_value& d = md.durable();
  const int64_t now_ms = clk_.now_ms();
  const txn_state ending = req.commit ? txn_state::prepare_commit : txn_state::prepare_abort;

  if (!bumps_epoch_at_end(version)) {
    // Transaction versions 0 and 1: the epoch must be the current one. A
    // late EndTxn of an earlier transaction at the same epoch cannot be
    // told from one of the open transaction (Kafka 4 behaves the same;
    // version 2's bump at every end is the defence).
    if (d.producer_id != req.producer_id) return fail(errc::invalid_producer_id_mapping);
    if (d.producer_epoch != req.producer_epoch) return fail(errc::producer_fenced);
    if (md.has_pending()) return fail(errc::concurrent_transactions);
    switch (d.state) {
      case txn_state::ongoing: {
        const txn_log_value t = md.prepare_abort_or_commit(ending, version, no_producer_id, now_ms, false);
        return make_write(*l.part, *l.e, t, write_kind::end, old_fenced_code);
      }
      case txn_state::complete_commit: return fail(req.commit ? errc::ok : errc::invalid_txn_state);
      case txn_state::complete_abort: return fail(req.commit ? errc::invalid_txn_state : errc::ok);
      case txn_state::prepare_commit: return fail(req.commit ? errc::concurrent_transactions : errc::invalid_txn_state);
      case txn_state::prepare_abort: return fail(req.commit ? errc::invalid_txn_state : errc::concurrent_transactions);
      case txn_state::empty: return fail(errc::invalid_txn_state);
      case txn_state::dead:
      case txn_state::prepare_epoch_fence: break;
    }
    SLUICE_ASSERT(false, "a transactional id held in a state that is never applied");
    return fail(errc::invalid_txn_state);
  }

  // Transaction version 2: every end bumps the epoch, so the same epoch
  // means the next end, and a retry carries the epoch before the bump
  // (Kafka's table: Empty accepts only an abort at the current epoch;
  // Complete* accept a retry of their own outcome, unchanged, and an abort
  // at the current epoch).
  const int32_t req_epoch = req.producer_epoch;
  const bool retry_on_overflow = d.previous_producer_id == req.producer_id && req_epoch == max_producer_epoch - 1 &&
                                 d.producer_epoch == 0;
  const bool retry_on_bump = d.producer_epoch == req_epoch + 1;
  bool valid_epoch = false;
  switch (d.state) {
    case txn_state::ongoing:
    case txn_state::empty: valid_epoch = req_epoch == d.producer_epoch; break;
    case txn_state::prepare_commit:
    case txn_state::prepare_abort: valid_epoch = retry_on_bump; break;
    case txn_state::complete_commit:
    case txn_state::complete_abort:
      valid_epoch = retry_on_bump || retry_on_overflow || req_epoch == d.producer_epoch;
      break;
    case txn_state::dead:
    case txn_state::prepare_epoch_fence: break;
  }
  const bool is_retry = retry_on_bump || retry_on_overflow;
  if (d.producer_id != req.producer_id && !retry_on_overflow) return fail(errc::invalid_producer_id_mapping);
  if (!valid_epoch) return fail(errc::producer_fenced);
  if (md.has_pending()) return fail(errc::concurrent_transactions);
  auto end_to = [&](txn_state to, bool no_partition_added) -> decision {
    int64_t next = no_producer_id;
    if (epoch_exhausted(d.producer_epoch)) {
      // The bump reaches the last epoch: the producer moves to a new id
      // once the transaction completes.
      auto pid = next_producer_id_();
      if (!pid.ok()) return fail(pid.code());
      next = *pid;
    }
    const txn_log_value t = md.prepare_abort_or_commit(to, version, next, now_ms, no_partition_added);
    return make_write(*l.part, *l.e, t, write_kind::end, old_fenced_code);
  };
  auto ok_unchanged = [&] { return answer_now(errc::ok, d.producer_id, d.producer_epoch); };
  switch (d.state) {
    case txn_state::ongoing: return end_to(ending, false);
    case txn_state::complete_commit:
      if (req.commit) return is_retry ? ok_unchanged() : fail(errc::invalid_txn_state);
      return is_retry ? fail(errc::invalid_txn_state) : end_to(txn_state::prepare_abort, true);
    case txn_state::complete_abort:
      if (!req.commit) return is_retry ? ok_unchanged() : end_to(txn_state::prepare_abort, true);
      return fail(errc::invalid_txn_state);
    case txn_state::prepare_commit: return fail(req.commit ? errc::concurrent_transactions : errc::invalid_txn_state);
    case txn_state::prepare_abort: return fail(req.commit ? errc::invalid_txn_state : errc::concurrent_transactions);
    case txn_state::empty: return req.commit ? fail(errc::invalid_txn_state) : end_to(txn_state::prepare_abort, true);
    case txn_state::dead:
    case txn_state::prepare_epoch_fence: break;
  }
  SLUICE_ASSERT(false, "a transactional id held in a state that is never applied");
  return fail(errc::invalid_txn_state);
}

// ---- Completions -------------------------------------------------------------------------

coordinator::entry* coordinator::entry_of(const write_ref& ref, partition** part) {
  auto it = partitions_.find(ref.partition);
  if (it == partitions_.end() || it->second.state != part_state::loaded ||
      it->second.coordinator_epoch != ref.coordinator_epoch)
    return nullptr;
  auto e = it->second.ids.find(ref.transactional_id);
  if (e == it->second.ids.end() || !e->second.write || e->second.write->id != ref.id) return nullptr;
  *part = &it->second;
  return &e->second;
}

write_done coordinator::written(const write_ref& ref) {
  write_done done;
  partition* part = nullptr;
  entry* e = entry_of(ref, &part);
  if (!e) {
    // The partition was unloaded (or loaded again) meanwhile: the record is
    // in the log, and whoever loads the partition now replays it.
    done.reply.error = errc::not_coordinator;
    return done;
  }
  const in_flight w = *e->write;
  e->write.reset();
  txn_metadata& md = e->md;
  if (md.pending_state() == txn_state::dead) {
    part->ids.erase(ref.transactional_id);
    --id_count_;
    return done;
  }
  if (md.durable().state == txn_state::ongoing) {
    // An open transaction's outcome is durable now.
    if (md.pending_state() == txn_state::prepare_commit) {
      ++committed_;
    } else if (md.pending_state() == txn_state::prepare_abort) {
      ++(w.kind == write_kind::fence_for_timeout ? timed_out_ : aborted_);
    }
  }
  md.apply_pending();
  switch (w.kind) {
    case write_kind::init: done.reply = answer{errc::ok, md.producer_id(), md.producer_epoch()}; break;
    case write_kind::add:
    case write_kind::complete:
    case write_kind::expire: break;
    case write_kind::end:
    case write_kind::fence_for_init:
    case write_kind::fence_for_timeout: {
      // PrepareCommit/PrepareAbort is durable: the outcome is decided. The
      // completion is prepared now and waits for the markers, so the id
      // stays busy (CONCURRENT_TRANSACTIONS) until they are written.
      const txn_log_value complete = md.prepare_complete(clk_.now_ms());
      done.to_send = markers_of(*part, md);
      if (w.kind == write_kind::fence_for_init) {
        done.reply.error = errc::concurrent_transactions;
      } else if (bumps_epoch_at_end(md.durable().client_version)) {
        done.reply = answer{errc::ok, complete.producer_id, complete.producer_epoch};
      }
      break;
    }
  }
  return done;
}

write_failure coordinator::write_failed(const write_ref& ref, errc append_error) {
  write_failure f;
  const errc mapped = map_append_error(append_error);
  f.reply.error = mapped == errc::ok ? errc::coordinator_not_available : mapped;
  partition* part = nullptr;
  entry* e = entry_of(ref, &part);
  if (!e) return f;
  const in_flight w = *e->write;
  e->write.reset();
  if (w.kind == write_kind::complete) {
    // The markers are written; the completion stays prepared for a retry.
    f.retry_completion = f.reply.error != errc::not_coordinator;
    return f;
  }
  e->md.drop_pending();
  f.reply.error = fenced_code(f.reply.error, w.old_fenced_code);
  return f;
}

result<write> coordinator::markers_written(const markers& m) {
  auto it = partitions_.find(partition_for(m.transactional_id));
  if (it == partitions_.end() || it->second.state != part_state::loaded ||
      it->second.coordinator_epoch != m.coordinator_epoch)
    return error{errc::not_coordinator, "the markers' coordinator epoch is not this load's"};
  partition& part = it->second;
  auto e = part.ids.find(m.transactional_id);
  if (e == part.ids.end()) return error{errc::not_coordinator, "no such transactional id here"};
  entry& en = e->second;
  if (en.write) return error{errc::concurrent_transactions, "the completion is being written"};
  const txn_state want = m.type == marker_type::commit ? txn_state::complete_commit : txn_state::complete_abort;
  if (en.md.pending_state() != want || en.md.producer_id() != m.producer_id ||
      en.md.producer_epoch() != m.producer_epoch)
    return error{errc::invalid_txn_state, "the id is not ending this transaction"};
  decision d = make_write(part, en, *en.md.pending(), write_kind::complete, false);
  return std::move(*d.to_write);
}

// ---- Timers -------------------------------------------------------------------------------

std::vector<write> coordinator::expire_timed_out() {
  std::vector<write> out;
  const int64_t now_ms = clk_.now_ms();
  for (auto& [p, part] : partitions_) {
    if (part.state != part_state::loaded) continue;
    for (auto& [id, e] : part.ids) {
      const txn_log_value& d = e.md.durable();
      if (e.md.has_pending() || d.state != txn_state::ongoing || d.start_ms + d.timeout_ms >= now_ms) continue;
      const txn_log_value t = e.md.prepare_fence_and_abort(cfg_.server_version, now_ms);
      out.push_back(std::move(*make_write(part, e, t, write_kind::fence_for_timeout, false).to_write));
    }
  }
  return out;
}

std::vector<write> coordinator::expire_ids() {
  std::vector<write> out;
  const int64_t now_ms = clk_.now_ms();
  for (auto& [p, part] : partitions_) {
    if (part.state != part_state::loaded) continue;
    for (auto& [id, e] : part.ids) {
      if (out.size() >= limits::max_expired_transactional_ids_per_pass) return out;
      const txn_log_value& d = e.md.durable();
      if (e.md.has_pending() || !idle(d.state) || d.last_update_ms > now_ms - cfg_.id_expiration_ms) continue;
      const txn_log_value t = e.md.prepare_dead();
      out.push_back(std::move(*make_write(part, e, t, write_kind::expire, false).to_write));
    }
  }
  return out;
}

// ---- Figures ---------------------------------------------------------------------------

coordinator::figures coordinator::current_figures() const {
  figures f;
  f.committed = committed_;
  f.aborted = aborted_;
  f.timed_out = timed_out_;
  for (const auto& [p, part] : partitions_) {
    if (part.state != part_state::loaded) continue;
    for (const auto& [id, e] : part.ids) {
      const txn_log_value& d = e.md.durable();
      if (d.state != txn_state::ongoing && d.state != txn_state::prepare_commit &&
          d.state != txn_state::prepare_abort)
        continue;
      ++f.ongoing;
      if (d.start_ms >= 0 && (f.oldest_start_ms < 0 || d.start_ms < f.oldest_start_ms)) f.oldest_start_ms = d.start_ms;
    }
  }
  return f;
}

// ---- DescribeTransactions, ListTransactions -----------------------------------------------

describe_answer coordinator::describe(const std::string& transactional_id) const {
  describe_answer a;
  a.transactional_id = transactional_id;
  if (transactional_id.empty()) {
    a.error = errc::invalid_argument;
    return a;
  }
  auto it = partitions_.find(partition_for(transactional_id));
  if (it == partitions_.end()) {
    a.error = errc::not_coordinator;
    return a;
  }
  if (it->second.state == part_state::loading) {
    a.error = errc::coordinator_load_in_progress;
    return a;
  }
  auto e = it->second.ids.find(transactional_id);
  if (e == it->second.ids.end()) {
    a.error = errc::transactional_id_not_found;
    return a;
  }
  const txn_log_value& d = e->second.md.durable();
  a.state = d.state;
  a.timeout_ms = d.timeout_ms;
  a.start_ms = d.start_ms;
  a.producer_id = d.producer_id;
  a.producer_epoch = d.producer_epoch;
  for (const auto& tp : d.partitions) a.topics[tp.topic].push_back(tp.partition);
  return a;
}

list_answer coordinator::list(const list_filter& filter) const {
  list_answer a;
  for (const auto& [p, part] : partitions_) {
    if (part.state == part_state::loading) {
      a.error = errc::coordinator_load_in_progress;
      return a;
    }
  }
  std::set<txn_state> states;
  for (const auto& name : filter.states) {
    if (auto s = state_from_name(name)) {
      states.insert(*s);
    } else {
      a.unknown_state_filters.push_back(name);
    }
  }
  const std::set<int64_t> producer_ids(filter.producer_ids.begin(), filter.producer_ids.end());
  const int64_t now_ms = clk_.now_ms();
  for (const auto& [p, part] : partitions_) {
    for (const auto& [id, e] : part.ids) {
      const txn_log_value& d = e.md.durable();
      if (!producer_ids.empty() && !producer_ids.contains(d.producer_id)) continue;
      // A filter of names only unknown ones matches nothing, as Kafka's.
      if (!filter.states.empty() && !states.contains(d.state)) continue;
      if (filter.min_duration_ms >= 0 && now_ms - d.start_ms <= filter.min_duration_ms) continue;
      a.transactions.push_back({id, d.producer_id, d.state});
    }
  }
  std::sort(a.transactions.begin(), a.transactions.end(),
            [](const auto& x, const auto& y) { return x.transactional_id < y.transactional_id; });
  return a;
}

}  // namespace sluice::txn
