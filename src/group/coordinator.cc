#include "group/coordinator.h"

#include "base/assert.h"
#include "base/log.h"

namespace sluice::group {

using kafka::error_code;

coordinator::coordinator(coordinator_config cfg, record_log& log, sluice::clock& clk, post_fn post,
                         topic_lookup_fn topics)
    : cfg_(cfg),
      log_(log),
      partitions_(cfg_.num_partitions, log, std::move(post), mu_, clk, cfg_.offsets_commit_timeout_ms),
      members_(cfg_, partitions_, clk),
      offsets_(cfg_, partitions_, members_, clk, std::move(topics)) {}

coordinator::~coordinator() = default;

// ---- Loading ------------------------------------------------------------------

bool coordinator::loaded() const {
  std::lock_guard g(mu_);
  return !partitions_.closed() && !partitions_.any_loading();
}

bool coordinator::set_loaded() {
  std::lock_guard g(mu_);
  if (partitions_.closed()) return false;
  for (int32_t p = 0; p < partitions_.count(); ++p) {
    // Members brought back by replay get a full session timeout from now.
    if (partitions_.finish_load(p, partitions_.epoch(p))) {
      offsets_.finish_load(p);
      members_.restart_sessions(p);
    }
  }
  offsets_.schedule_expiry();
  return true;
}

bool coordinator::unloaded() const {
  std::lock_guard g(mu_);
  return partitions_.closed();
}

void coordinator::unload() {
  outbox out;
  std::lock_guard g(mu_);
  partitions_.close();
  members_.answer_waiting(std::nullopt, error_code::not_coordinator, out);
}

status coordinator::replay(std::span<const uint8_t> key, std::optional<std::span<const uint8_t>> value) {
  std::lock_guard g(mu_);
  return apply_locked(key, value);
}

status coordinator::replay(int32_t p, const log_entry& e) {
  std::lock_guard g(mu_);
  return apply_entry_locked(p, e);
}

status coordinator::apply_entry_locked(int32_t p, const log_entry& e) {
  if (e.marker) {
    offsets_.complete_txn(p, e.producer_id, *e.marker, e.batch_offset);
    return {};
  }
  if (!e.transactional) return apply_locked(e.key, e.value, p, e.batch_offset);
  auto k = decode_key(e.key);
  if (!k.ok()) return k.err();
  const auto* ok = std::get_if<offset_key>(&*k);
  if (!ok || !e.value) return status(errc::corrupt_data, "a transactional batch holds only offsets (no group record, no tombstone)");
  if (partitions_.partition_of(ok->group) != p) {
    return status(errc::corrupt_data,
                  "a record of group " + ok->group + " in partition " + std::to_string(p) + ", not its own");
  }
  auto v = decode_offset_value(*e.value);
  if (!v.ok()) return v.err();
  offsets_.apply_txn(*ok, *v, e.producer_id, e.batch_offset);
  return {};
}

status coordinator::apply_locked(std::span<const uint8_t> key, std::optional<std::span<const uint8_t>> value,
                                 std::optional<int32_t> partition, int64_t log_offset) {
  auto k = decode_key(key);
  if (!k.ok()) return k.err();
  const std::string& group_id = std::holds_alternative<offset_key>(*k) ? std::get<offset_key>(*k).group
                                                                       : std::get<group_key>(*k).group;
  if (partition && partitions_.partition_of(group_id) != *partition) {
    return status(errc::corrupt_data,
                  "a record of group " + group_id + " in partition " + std::to_string(*partition) + ", not its own");
  }
  if (const auto* ok = std::get_if<offset_key>(&*k)) {
    if (!value) {
      offsets_.apply(*ok, std::nullopt, log_offset);
      return {};
    }
    auto v = decode_offset_value(*value);
    if (!v.ok()) return v.err();
    offsets_.apply(*ok, *v, log_offset);
    return {};
  }
  const auto& gk = std::get<group_key>(*k);
  if (!value) {
    offsets_.remove_group(gk.group);
    return {};
  }
  auto v = decode_group_value(*value);
  if (!v.ok()) return v.err();
  members_.apply(gk.group, *v);
  return {};
}

coordinator::load_result coordinator::load_partition(int32_t p) {
  load_result r;
  uint64_t epoch = 0;
  {
    std::lock_guard g(mu_);
    if (partitions_.closed()) return r;
    if (partitions_.state(p) == partition_state::loaded) {
      r.loaded = true;
      return r;
    }
    partitions_.begin_load(p);
    epoch = partitions_.epoch(p);
  }
  r.read = log_.read(p, [&](const log_entry& e) {
    status s;
    {
      std::lock_guard g(mu_);
      // Shut down or unloaded meanwhile: the rest is not wanted.
      if (partitions_.closed() || partitions_.epoch(p) != epoch) return false;
      s = apply_entry_locked(p, e);
    }
    ++r.records;
    if (!s.ok()) {
      ++r.skipped;
      SLUICE_LOG_WARN("replaying {}-{}: record skipped: {}", offsets_topic, p, s.err().message);
    }
    return true;
  });
  // The owner stopping leaves the partition loading: half a partition is
  // not served. (A damaged tail is: what was read before it is served, as
  // a restart would.)
  if (r.read.code() == errc::shutting_down) return r;
  std::lock_guard g(mu_);
  if (partitions_.closed() || !partitions_.finish_load(p, epoch)) return r;
  // Markers committed while the replay ran, perhaps past where it read.
  offsets_.finish_load(p);
  // Members brought back by replay get a full session timeout from now.
  members_.restart_sessions(p);
  // Topics deleted while this partition loaded, or while another broker
  // held it, leave no offsets behind (Kafka's onPartitionsDeleted, applied
  // late).
  offsets_.delete_missing_topics(p);
  r.loaded = true;
  return r;
}

void coordinator::unload_partition(int32_t p) {
  outbox out;
  std::lock_guard g(mu_);
  // First: from the new epoch on, nothing of p is served, observed or
  // applied by a completion in flight.
  partitions_.unload(p);
  members_.answer_waiting(p, error_code::not_coordinator, out);
  offsets_.drop_partition(p);
  SLUICE_ASSERT(members_.groups_of(p).empty(), "nothing of an unloaded partition stays in memory");
}

// ---- Requests -------------------------------------------------------------------

void coordinator::join_group(const protocol::join_group_request& req, int16_t version, const std::string& client_id,
                             const std::string& client_host, reply<protocol::join_group_response> cb) {
  outbox out;
  std::lock_guard lock(mu_);
  members_.join_group(req, version, client_id, client_host, std::move(cb), out);
}

void coordinator::sync_group(const protocol::sync_group_request& req, int16_t /*version*/,
                             reply<protocol::sync_group_response> cb) {
  outbox out;
  std::lock_guard lock(mu_);
  members_.sync_group(req, std::move(cb), out);
}

protocol::heartbeat_response coordinator::heartbeat(const protocol::heartbeat_request& req, int16_t /*version*/) {
  std::lock_guard lock(mu_);
  return members_.heartbeat(req);
}

protocol::leave_group_response coordinator::leave_group(const protocol::leave_group_request& req, int16_t version) {
  outbox out;
  std::lock_guard lock(mu_);
  return members_.leave_group(req, version, out);
}

void coordinator::offset_commit(const protocol::offset_commit_request& req, int16_t version,
                                reply<protocol::offset_commit_response> cb) {
  outbox out;
  std::lock_guard lock(mu_);
  offsets_.commit(req, version, std::move(cb), out);
}

void coordinator::txn_offset_commit(const protocol::txn_offset_commit_request& req, int16_t version,
                                    reply<protocol::txn_offset_commit_response> cb) {
  outbox out;
  std::lock_guard lock(mu_);
  offsets_.txn_commit(req, version, std::move(cb), out);
}

void coordinator::on_transaction_completed(int32_t p, int64_t producer_id, bool commit, int64_t marker_offset) {
  std::lock_guard lock(mu_);
  if (partitions_.closed()) return;
  offsets_.on_marker(p, producer_id, commit, marker_offset);
}

protocol::offset_fetch_response coordinator::offset_fetch(const protocol::offset_fetch_request& req, int16_t version) {
  std::lock_guard lock(mu_);
  return offsets_.fetch(req, version);
}

void coordinator::offset_delete(const protocol::offset_delete_request& req,
                                reply<protocol::offset_delete_response> cb) {
  outbox out;
  std::lock_guard lock(mu_);
  offsets_.delete_offsets(req, std::move(cb), out);
}

protocol::describe_groups_response coordinator::describe_groups(const protocol::describe_groups_request& req) {
  std::lock_guard lock(mu_);
  return members_.describe_groups(req);
}

protocol::list_groups_response coordinator::list_groups(const protocol::list_groups_request& req) {
  std::lock_guard lock(mu_);
  return members_.list_groups(req);
}

void coordinator::delete_groups(const protocol::delete_groups_request& req,
                                reply<protocol::delete_groups_response> cb) {
  outbox out;
  std::lock_guard lock(mu_);
  offsets_.delete_groups(req, std::move(cb), out);
}

void coordinator::delete_topic_offsets(const std::string& topic, const sluice::topic_id& id) {
  std::lock_guard lock(mu_);
  offsets_.delete_topic(topic, id);
}

// ---- Timers, config, views ----------------------------------------------------------

void coordinator::tick() {
  outbox out;
  std::lock_guard lock(mu_);
  if (partitions_.closed()) return;
  partitions_.expire_appends(out);
  members_.tick(out);
  offsets_.tick();
}

kafka::error_code coordinator::gate(const std::string& group_id) const {
  std::lock_guard g(mu_);
  return partitions_.gate(group_id);
}

bool coordinator::has_classic_group(const std::string& group_id) const {
  std::lock_guard g(mu_);
  return members_.contains(group_id);
}

size_t coordinator::group_count() const {
  std::lock_guard g(mu_);
  return members_.size();
}

void coordinator::update_config(const coordinator_config& next) {
  std::lock_guard g(mu_);
  cfg_.min_session_timeout_ms = next.min_session_timeout_ms;
  cfg_.max_session_timeout_ms = next.max_session_timeout_ms;
  cfg_.max_group_size = next.max_group_size;
  cfg_.initial_rebalance_delay_ms = next.initial_rebalance_delay_ms;
  cfg_.offsets_retention_ms = next.offsets_retention_ms;
}

std::vector<coordinator::committed_offset> coordinator::committed_offsets() const {
  std::lock_guard g(mu_);
  return offsets_.committed_offsets();
}

}  // namespace sluice::group
