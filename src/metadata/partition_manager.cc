#include "metadata/partition_manager.h"

#include <set>
#include <sstream>

#include "base/assert.h"
#include "base/limits.h"
#include "base/log.h"
#include "base/parallel.h"
#include "metadata/broker_configs.h"
#include "metadata/group_configs.h"
#include "metadata/topic_table.h"
#include "storage/log.h"

namespace sluice::cluster {


result<std::unique_ptr<partition_manager>> partition_manager::open(io::filesystem& fs, sluice::clock& clk,
                                                                   std::shared_ptr<const config::broker_config> cfg,
                                                                   storage::log_manager& logs,
                                                                   std::unique_ptr<metadata_store> store) {
  std::unique_ptr<partition_manager> m(new partition_manager(fs, clk, std::move(cfg), logs));
  SLUICE_TRY(m->load(std::move(store)));
  m->start_creator();
  return m;
}

namespace {

// A producer snapshot is written atomically through "<name>.tmp", so its
// name leaves room for that suffix.
constexpr size_t snapshot_name_max_bytes = limits::max_file_name_bytes - 4;

std::string snapshot_name(const std::string& topic, int32_t p) {
  return storage::topic_partition{topic, p}.dir_name(snapshot_name_max_bytes);
}

}  // namespace

std::string partition_manager::snapshot_path(const std::string& topic, int32_t p) const {
  return io::join(io::join(io::join(data_dir_, "meta"), "producers"), snapshot_name(topic, p));
}

status partition_manager::load(std::unique_ptr<metadata_store> store) {
  const std::string meta = io::join(data_dir_, "meta");
  const std::string producers = io::join(meta, "producers");
  SLUICE_TRY(fs_.create_dirs(producers));
  const int32_t node_id = broker_config()->node_id;
  replicas_ = std::make_unique<replica_manager>(node_id);
  if (store) {
    table_ = std::move(store);
  } else {
    SLUICE_ASSIGN_OR_RETURN(table_, topic_table::open(fs_, meta, node_id));
  }
  SLUICE_ASSIGN_OR_RETURN(producer_ids_, producer_id_allocator::open(fs_, io::join(meta, "producer_ids")));
  if (table_->keeps_group_configs()) {
    group_configs_.replace_all(table_->group_configs());
    if (fs_.exists(group_configs_path(data_dir_))) {
      SLUICE_LOG_WARN("{} is not read: in a cluster group configs live in etcd", group_configs_path(data_dir_));
    }
  } else {
    SLUICE_ASSIGN_OR_RETURN(auto groups, load_group_configs(fs_, data_dir_));
    if (!groups.empty()) SLUICE_LOG_INFO("{} groups have configs ({})", groups.size(), group_configs_path(data_dir_));
    group_configs_.replace_all(std::move(groups));
  }
  if (const std::string path = io::join(meta, "high_watermarks"); table_->follows_controller() && fs_.exists(path)) {
    // A damaged checkpoint only costs the restarted replicas their head
    // start: they begin at their log start, as without one.
    auto bytes = fs_.read_all(path, limits::max_high_watermark_checkpoint_bytes);
    if (!bytes.ok()) {
      SLUICE_LOG_WARN("{}: {}; replicas start from their log start", path, bytes.err().message);
    } else {
      std::istringstream in(std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
      std::string topic;
      int32_t part = 0;
      int64_t hw = 0;
      while (in >> topic >> part >> hw)
        if (part >= 0 && hw >= 0) checkpointed_hw_[{topic, part}] = hw;
    }
  }

  std::set<std::string> wanted_dirs, wanted_snapshots;
  for (const auto& t : table_->list()) {
    replicas_->add_slots(t.name, t.partitions);
    std::vector<int32_t> missing;
    for (int32_t p : hosted_from(t, 0)) {
      wanted_dirs.insert(storage::topic_partition{t.name, p}.dir_name());
      wanted_snapshots.insert(snapshot_name(t.name, p));
      // A partition the table lists without a log was being created when
      // the broker stopped: the background thread finishes the job (the
      // broker's own topics at once, since the coordinator reads them next).
      if (!logs_.get({t.name, p}) && !is_internal_topic(t.name)) {
        missing.push_back(p);
        continue;
      }
      SLUICE_ASSIGN_OR_RETURN(auto part, open_partition(t, p));
      install(t, p, std::move(part));
    }
    if (!missing.empty()) {
      SLUICE_LOG_INFO("topic {}: {} partitions left to create", t.name, missing.size());
      enqueue_creation(t.name, std::move(missing));
    }
  }
  // What a topic deletion interrupted at any step leaves behind (the topic
  // is already gone from the table): partition directories and producer
  // snapshots. Removing them is housekeeping; failing to is logged and
  // never keeps the broker from starting (the next start tries again).
  for (const auto& name : logs_.dir_names()) {
    if (wanted_dirs.count(name)) continue;
    SLUICE_LOG_WARN("removing partition {} left over from an interrupted topic deletion", name);
    if (auto s = logs_.remove_dir(name); !s.ok()) {
      SLUICE_LOG_ERROR("could not remove leftover partition {}: {}", name, s.err().message);
    }
  }
  if (auto names = fs_.list(producers); names.ok()) {
    for (const auto& n : *names) {
      if (wanted_snapshots.count(n)) continue;
      if (auto s = fs_.remove(io::join(producers, n)); !s.ok()) {
        SLUICE_LOG_WARN("could not remove leftover producer snapshot {}: {}", n, s.err().message);
      }
    }
  }
  return {};
}

result<std::shared_ptr<partition>> partition_manager::open_partition(const topic_info& t, int32_t p) {
  auto eff = config::effective_topic_config(*broker_config(), t.overrides);
  storage::topic_partition tp{t.name, p};
  SLUICE_ASSIGN_OR_RETURN(auto log, logs_.get_or_create(tp, to_log_config(eff)));
  // A log found on disk at start was opened with the manager's defaults:
  // the topic's own settings (segment.bytes, segment.ms, ...) apply from here.
  SLUICE_TRY(log->set_config(to_log_config(eff)));
  std::optional<offset> hw;
  if (auto it = checkpointed_hw_.find({t.name, p}); it != checkpointed_hw_.end()) hw = offset(it->second);
  return partition::open(tp, std::move(log), eff, fs_, snapshot_path(t.name, p), t.id,
                         broker_config()->node_id, clk_, !table_->follows_controller(), hw);
}

void partition_manager::create_logs_together(const topic_info& t, const std::vector<int32_t>& partitions) {
  const auto cfg = to_log_config(config::effective_topic_config(*broker_config(), t.overrides));
  std::vector<storage::log_manager::log_spec> wanted;
  wanted.reserve(partitions.size());
  for (int32_t p : partitions)
    if (!replicas_->get(t.name, p)) wanted.push_back({{t.name, p}, cfg});
  logs_.get_or_create_all(wanted);  // each failure is open_partition's to report
}

std::shared_ptr<const config::broker_config> partition_manager::broker_config() const {
  std::lock_guard g(cfg_mu_);
  return cfg_;
}

std::optional<std::string> partition_manager::hashed_dir_collision(const std::string& name) const {
  // Only names long enough to take the hashed form somewhere can collide.
  if (name.size() <= storage::hashed_dir_topic_prefix_bytes) return std::nullopt;
  const std::string stem = storage::hashed_dir_stem(name);
  for (const auto& t : table_->list()) {
    if (t.name != name && t.name.size() > storage::hashed_dir_topic_prefix_bytes &&
        storage::hashed_dir_stem(t.name) == stem)
      return t.name;
  }
  return std::nullopt;
}

int64_t partition_manager::total_partitions() const {
  int64_t n = 0;
  for (const auto& t : table_->list()) n += t.partitions;
  return n;
}

std::shared_ptr<partition> partition_manager::get(const std::string& topic, int32_t p) const {
  return replicas_->get(topic, p);
}

errc partition_manager::missing_partition_error(const std::string& topic, int32_t p) const {
  return replicas_->missing_partition_error(topic, p);
}

void partition_manager::install(const topic_info& t, int32_t p, std::shared_ptr<partition> part) {
  SLUICE_ASSERT(p >= 0 && p < t.partitions, "a partition of the topic");
  // The store holds a state for every partition of a topic it lists; a
  // topic deleted meanwhile is handled by the callers (change_mu_).
  const partition_state st = table_->state(t.name, p).value_or(partition_state{});
  const partition* raw = part.get();
  replicas_->install(t.name, p, std::move(part), t.assignment[static_cast<size_t>(p)], st);
  tell_role(t.name, p, raw->is_leader());
}

void partition_manager::on_role_change(role_listener fn) {
  std::lock_guard g(role_mu_);
  role_listeners_.push_back(std::move(fn));
}

void partition_manager::tell_role(const std::string& topic, int32_t p, bool leads) const {
  std::vector<role_listener> ls;
  {
    std::lock_guard g(role_mu_);
    ls = role_listeners_;
  }
  for (const auto& fn : ls) fn(topic, p, leads);
}

bool partition_manager::refresh_state(const std::string& topic, int32_t p) {
  // One partition's worth: the whole topic's (get()) cost N squared over
  // a change of each of its N partitions.
  auto placed = table_->placed(topic, p);
  if (!placed) return false;
  return apply_state(topic, p, placed->replicas, placed->state);
}

bool partition_manager::apply_state(const std::string& topic, int32_t p, const replica_list& replicas,
                                    const partition_state& st) {
  auto part = replicas_->get(topic, p);
  if (!part) return false;
  const bool led = part->is_leader();
  const auto epoch_before = part->epoch();
  // Through the replica manager: a follower then fetches from its new leader.
  if (!replicas_->apply(topic, p, replicas, st)) return false;
  if (part->is_leader() != led) {
    tell_role(topic, p, part->is_leader());
  } else if (led && part->epoch() != epoch_before) {
    // Leading at a newer leader epoch: the leader changes with every epoch,
    // so another broker led in between (a state this broker did not see)
    // and may have written: the listeners drop what they hold and start
    // again (the group coordinator reloads the partition).
    tell_role(topic, p, false);
    tell_role(topic, p, true);
  }
  return true;
}

std::vector<int32_t> partition_manager::hosted_from(const topic_info& t, int32_t first) const {
  std::vector<int32_t> out;
  for (int32_t p = first; p < t.partitions; ++p)
    if (replicas_->hosts(t.assignment[static_cast<size_t>(p)])) out.push_back(p);
  return out;
}


std::optional<topic_info> partition_manager::topic(const std::string& name) const { return table_->get(name); }

std::optional<topic_info> partition_manager::topic_by_id(const topic_id& id) const { return table_->get_by_id(id); }

std::vector<topic_info> partition_manager::topics() const { return table_->list(); }

std::optional<partition_manager::create_error> partition_manager::create_topic(
    const std::string& name, int32_t partitions, int16_t replication_factor,
    std::span<const config::config_entry> configs, bool validate_only, create_mode mode,
    std::vector<replica_list> assignment) {
  if (auto s = validate_topic_name(name); !s.ok()) return create_error{errc::invalid_topic, s.err().message};
  const auto cfg = broker_config();
  if (partitions == -1) partitions = cfg->num_partitions;
  if (replication_factor == -1) replication_factor = cfg->default_replication_factor;
  if (partitions <= 0 || partitions > limits::max_partitions_per_topic) {
    return create_error{errc::invalid_partitions,
                        "number of partitions must be in 1.." + std::to_string(limits::max_partitions_per_topic)};
  }
  if (replication_factor <= 0) {
    return create_error{errc::invalid_replication_factor, "replication factor must be larger than 0"};
  }
  // Whether the brokers can hold that many replicas is the store's to say
  // (a single broker: one; a cluster: its live brokers).
  const partition_request request{partitions, replication_factor, std::move(assignment)};
  if (auto s = table_->check_request(request); !s.ok()) return create_error{s.code(), s.err().message};
  auto overrides = config::make_topic_overrides(*cfg, configs);
  if (!overrides.ok()) return create_error{errc::invalid_config, overrides.err().message};

  std::lock_guard change(change_mu_);
  if (table_->get(name)) return create_error{errc::already_exists, "topic '" + name + "' already exists"};
  if (auto other = hashed_dir_collision(name)) {
    return create_error{
        errc::invalid_topic,
        "topic '" + name + "' would share partition directories with topic '" + *other + "'"};
  }
  if (total_partitions() + partitions > limits::max_partitions_per_broker) {
    return create_error{errc::policy_violation, "this broker already holds " + std::to_string(total_partitions()) +
                                                          " partitions; the limit is " +
                                                          std::to_string(limits::max_partitions_per_broker)};
  }
  if (validate_only) return std::nullopt;
  auto t = table_->create(name, request, *overrides);
  if (!t.ok()) return create_error{t.code(), t.err().message};
  if (table_->follows_controller()) return std::nullopt;  // logs follow the store (on_store_change)
  replicas_->add_slots(name, partitions);
  if (mode == create_mode::background) {
    enqueue_creation(name, hosted_from(*t, 0));
    SLUICE_LOG_INFO("created topic {} with {} partitions (logs being created)", name, partitions);
    return std::nullopt;
  }
  const auto hosted = hosted_from(*t, 0);
  create_logs_together(*t, hosted);
  for (int32_t p : hosted) {
    auto part = open_partition(*t, p);
    if (!part.ok()) {
      SLUICE_LOG_ERROR("creating partition {}-{}: {}", name, p, part.err().message);
      return create_error{part.code(), part.err().message};
    }
    install(*t, p, std::move(part).value());
  }
  SLUICE_LOG_INFO("created topic {} with {} partitions", name, partitions);
  return std::nullopt;
}

std::optional<partition_manager::create_error> partition_manager::delete_topic(const std::string& name,
                                                                               topic_info* deleted) {
  return delete_found([&] { return table_->get(name); },
                      create_error{errc::not_found, "topic '" + name + "' does not exist"}, deleted);
}

std::optional<partition_manager::create_error> partition_manager::delete_topic_by_id(const topic_id& id,
                                                                                     topic_info* deleted) {
  return delete_found([&] { return table_->get_by_id(id); }, create_error{errc::unknown_topic_id, "no topic has this id"},
                      deleted);
}

std::optional<partition_manager::create_error> partition_manager::delete_found(
    const std::function<std::optional<topic_info>()>& find, create_error missing, topic_info* deleted) {
  std::optional<topic_info> t;
  std::optional<create_error> e;
  std::vector<deleted_listener> listeners;
  {
    // The lookup and the deletion under one lock: a topic created again
    // under the name meanwhile is never deleted in place of the one found.
    std::lock_guard change(change_mu_);
    t = find();
    if (!t) return missing;
    if (deleted) *deleted = *t;
    e = delete_topic_locked(*t);
    listeners = deleted_listeners_;
  }
  if (!e)
    for (const auto& fn : listeners) fn(t->name, t->id);
  return e;
}

void partition_manager::on_topic_deleted(deleted_listener fn) {
  std::lock_guard change(change_mu_);
  deleted_listeners_.push_back(std::move(fn));
}

std::optional<partition_manager::create_error> partition_manager::delete_topic_locked(const topic_info& t) {
  const std::string& name = t.name;
  if (is_internal_topic(name)) {
    return create_error{errc::invalid_topic, "internal topic '" + name + "' cannot be deleted"};
  }
  if (auto s = table_->remove(name); !s.ok()) return create_error{s.code(), s.err().message};
  {
    // The background thread publishes partitions under change_mu_, which
    // this holds: from here on it creates none of this topic's, and
    // removes the one log it may be making.
    std::lock_guard g(create_mu_);
    for (auto& j : create_queue_)
      if (j->topic == name) j->cancelled = true;
  }
  if (!table_->follows_controller()) remove_local_locked(name, t.partitions);
  SLUICE_LOG_INFO("deleted topic {}", name);
  return std::nullopt;
}

void partition_manager::remove_local_locked(const std::string& name, int32_t partitions) {
  std::vector<std::shared_ptr<partition>> parts = replicas_->remove_topic(name);
  for (auto& p : parts)
    if (p) p->close();
  for (int32_t p = 0; p < partitions; ++p) {
    if (auto s = logs_.remove({name, p}); !s.ok() && s.code() != errc::not_found) {
      SLUICE_LOG_ERROR("deleting partition {}-{}: {} (removed at next start)", name, p, s.err().message);
    }
    if (fs_.exists(snapshot_path(name, p))) fs_.remove(snapshot_path(name, p)).ignore();
  }
}

std::optional<partition_manager::create_error> partition_manager::add_partitions(
    const std::string& name, int32_t total, bool validate_only, create_mode mode,
    std::vector<replica_list> assignment) {
  std::lock_guard change(change_mu_);
  auto t = table_->get(name);
  if (!t) return create_error{errc::not_found, "topic '" + name + "' does not exist"};
  if (total <= t->partitions) {
    return create_error{errc::invalid_partitions, "topic has " + std::to_string(t->partitions) +
                                                            " partitions; the new count must be larger"};
  }
  if (total > limits::max_partitions_per_topic) {
    return create_error{errc::invalid_partitions,
                        "number of partitions must be at most " + std::to_string(limits::max_partitions_per_topic)};
  }
  if (total_partitions() + (total - t->partitions) > limits::max_partitions_per_broker) {
    return create_error{errc::policy_violation,
                        "the limit of " + std::to_string(limits::max_partitions_per_broker) + " partitions per broker"};
  }
  const int32_t first = t->partitions;
  const auto rf = static_cast<int16_t>(t->assignment.empty() ? 1 : t->assignment[0].size());
  const partition_request request{total - first, rf, std::move(assignment)};
  if (auto s = table_->check_request(request); !s.ok()) return create_error{s.code(), s.err().message};
  if (validate_only) return std::nullopt;
  if (auto s = table_->add_partitions(name, request); !s.ok()) {
    return create_error{s.code(), s.err().message};
  }
  if (table_->follows_controller()) return std::nullopt;  // logs follow the store (on_store_change)
  t = table_->get(name);
  SLUICE_ASSERT(t && t->partitions == total, "the store holds the partitions it added");
  replicas_->add_slots(name, total);
  if (mode == create_mode::background) {
    enqueue_creation(name, hosted_from(*t, first));
    return std::nullopt;
  }
  const auto hosted = hosted_from(*t, first);
  create_logs_together(*t, hosted);
  for (int32_t p : hosted) {
    auto part = open_partition(*t, p);
    if (!part.ok()) return create_error{part.code(), part.err().message};
    install(*t, p, std::move(part).value());
  }
  return std::nullopt;
}

status partition_manager::set_topic_overrides(const std::string& name, const config::config_map& overrides) {
  std::lock_guard change(change_mu_);
  return set_topic_overrides_locked(name, overrides);
}

status partition_manager::alter_topic_overrides(const std::string& name,
                                                const topic_overrides_fn& compute,
                                                bool validate_only) {
  std::lock_guard change(change_mu_);
  auto t = table_->get(name);
  if (!t) return status(errc::not_found, "topic '" + name + "' does not exist");
  SLUICE_ASSIGN_OR_RETURN(auto next, compute(*broker_config(), t->overrides));
  if (validate_only) return {};
  return set_topic_overrides_locked(name, next);
}

status partition_manager::set_topic_overrides_locked(const std::string& name,
                                                     const config::config_map& overrides) {
  SLUICE_TRY(table_->set_overrides(name, overrides));
  auto eff = config::effective_topic_config(*broker_config(), overrides);
  for (auto& p : replicas_->of_topic(name)) SLUICE_TRY(p->set_config(eff));
  return {};
}

status partition_manager::alter_broker_config(bool cluster_default, const broker_config_fn& compute,
                                              bool validate_only) {
  std::lock_guard change(change_mu_);
  // A cluster keeps the cluster-wide default in the store: the change
  // starts from what the store holds, which this broker's snapshot may not
  // show yet (sync_broker_defaults applies it on the background thread).
  const auto store_defaults = cluster_default ? table_->broker_defaults() : std::nullopt;
  auto current = broker_config();
  if (store_defaults && *store_defaults != current->dynamic_default_values) {
    auto c = config::make_broker_config(current->static_values, *store_defaults, current->dynamic_broker_values);
    if (c.ok()) {
      current = std::make_shared<const config::broker_config>(std::move(c).value());
    } else {
      SLUICE_LOG_WARN("the cluster-wide broker config does not combine with this broker's: {}; altering "
                      "the level this broker applied", c.err().message);
    }
  }
  SLUICE_ASSIGN_OR_RETURN(auto next, compute(*current));
  if (validate_only) return {};
  if (store_defaults) {
    SLUICE_TRY(table_->set_broker_defaults(next.dynamic_default_values));
  } else {
    SLUICE_TRY(persist_dynamic_broker_config(fs_, next, cluster_default));
  }
  return publish_broker_config_locked(std::move(next), cluster_default ? "cluster-wide default" : "this node");
}

status partition_manager::publish_broker_config_locked(config::broker_config next, std::string_view why) {
  auto published = std::make_shared<const config::broker_config>(std::move(next));
  {
    std::lock_guard g(cfg_mu_);
    cfg_ = published;
  }
  // Every partition's effective config from the new broker values and its
  // topic's own overrides. The values were validated against the same
  // bounds the log checks, so a refusal here is a bug worth a loud line,
  // not a reason to leave the other partitions on the old values.
  status first_error;
  std::map<std::string, config::config_map> overrides;
  for (auto& t : table_->list()) overrides[t.name] = std::move(t.overrides);
  // Partitions being created are not in all(): the background thread
  // applies the new config when it publishes them.
  for (auto& p : replicas_->all()) {
    auto it = overrides.find(p->id().topic);
    if (it == overrides.end()) continue;  // deleted meanwhile
    const auto eff = config::effective_topic_config(*published, it->second);
    if (auto s = p->set_config(eff); !s.ok()) {
      SLUICE_LOG_ERROR("{}-{}: new broker config not applied: {}", p->id().topic, p->id().partition,
                       s.err().message);
      if (first_error.ok()) first_error = s;
    }
  }
  for (const auto& fn : cfg_listeners_) fn(*published);
  SLUICE_LOG_INFO("broker config changed ({}): {} dynamic default and {} node values", why,
                  published->dynamic_default_values.size(), published->dynamic_broker_values.size());
  return first_error;
}

void partition_manager::on_broker_defaults_change() {
  auto job = std::make_shared<creation_job>();
  job->broker_defaults = true;
  {
    std::lock_guard g(create_mu_);
    create_queue_.push_back(std::move(job));
  }
  create_cv_.notify_all();
}

void partition_manager::sync_broker_defaults() {
  std::lock_guard change(change_mu_);
  const auto defaults = table_->broker_defaults();
  const auto current = broker_config();
  if (!defaults || *defaults == current->dynamic_default_values) return;
  auto next = config::make_broker_config(current->static_values, *defaults, current->dynamic_broker_values);
  if (!next.ok()) {
    // As at start (broker_configs.h): a level that does not combine with
    // this broker's static settings is left out, loudly.
    SLUICE_LOG_ERROR("cluster-wide broker config not applied on this broker: {}", next.err().message);
    return;
  }
  publish_broker_config_locked(std::move(next).value(), "cluster-wide default, from the controller").ignore();
}

status partition_manager::alter_group_configs(const std::string& group, const group_configs_fn& compute,
                                              bool validate_only) {
  std::lock_guard change(group_change_mu_);
  const bool in_store = table_->keeps_group_configs();
  // A cluster's change starts from what the store holds, which this
  // broker's copy may not show yet.
  config::config_map current;
  if (in_store) {
    auto all = table_->group_configs();
    if (auto it = all.find(group); it != all.end()) current = it->second;
  } else {
    current = group_configs_.get(group);
  }
  SLUICE_ASSIGN_OR_RETURN(auto next, compute(*broker_config(), current));
  if (validate_only || next == current) return {};
  SLUICE_LOG_INFO("group {}: {} configs set", group, next.size());
  if (in_store) {
    // The copy is the metadata listener's to change: the store returns once
    // this broker's listener has applied the record (or a newer one, which
    // setting the copy here could overwrite).
    return table_->set_group_configs(group, next);
  }
  if (current.empty() && group_configs_.size() >= limits::max_groups_with_configs) {
    return status(errc::invalid_config, "group '" + group + "': " +
                                            std::to_string(limits::max_groups_with_configs) +
                                            " groups hold configs already, the most a broker keeps");
  }
  auto all = group_configs_.all();
  if (next.empty()) {
    all.erase(group);
  } else {
    all.insert_or_assign(group, next);
  }
  SLUICE_TRY(persist_group_configs(fs_, data_dir_, all));
  group_configs_.set(group, std::move(next));
  return {};
}

status partition_manager::delete_group_configs(const std::string& group) {
  return alter_group_configs(
      group, [](const config::broker_config&, const config::config_map&) -> result<config::config_map> {
        return config::config_map{};
      },
      false);
}

void partition_manager::apply_group_configs(const std::string& group, const config::config_map& configs) {
  group_configs_.set(group, configs);
}

void partition_manager::apply_all_group_configs(config::group_config_table groups) {
  group_configs_.replace_all(std::move(groups));
}

void partition_manager::reload_group_configs() {
  if (table_->keeps_group_configs()) group_configs_.replace_all(table_->group_configs());
}

void partition_manager::on_broker_config_change(
    std::function<void(const config::broker_config&)> fn) {
  std::lock_guard change(change_mu_);
  cfg_listeners_.push_back(std::move(fn));
}

partition_manager::~partition_manager() {
  stop_creator();
}

// ---- Background creation of partition logs ---------------------------------

void partition_manager::start_creator() {
  creator_ = std::thread([this] { run_creator(); });
}

void partition_manager::stop_creator() {
  {
    std::lock_guard g(create_mu_);
    create_stopping_ = true;
  }
  create_cv_.notify_all();
  if (creator_.joinable()) creator_.join();
  // Work left for the next start; whoever waits for it hears now.
  std::vector<std::function<void()>> done;
  {
    std::lock_guard g(create_mu_);
    for (auto& j : create_queue_)
      for (auto& fn : j->done) done.push_back(std::move(fn));
    for (auto& j : create_queue_) j->done.clear();
  }
  for (auto& fn : done) fn();
}

void partition_manager::when_created(const std::string& topic, std::function<void()> fn) {
  {
    std::lock_guard g(create_mu_);
    // Jobs run in order: the topic's last one ends after all the others.
    for (auto it = create_queue_.rbegin(); it != create_queue_.rend(); ++it) {
      if ((*it)->topic == topic && !create_stopping_) {
        (*it)->done.push_back(std::move(fn));
        return;
      }
    }
  }
  fn();
}

void partition_manager::enqueue_creation(std::string topic, std::vector<int32_t> partitions) {
  auto job = std::make_shared<creation_job>();
  job->topic = std::move(topic);
  job->partitions = std::move(partitions);
  {
    std::lock_guard g(create_mu_);
    create_queue_.push_back(std::move(job));
  }
  create_cv_.notify_all();
}

void partition_manager::on_store_change(const std::string& topic) {
  auto job = std::make_shared<creation_job>();
  job->topic = topic;
  job->sync = true;
  {
    std::lock_guard g(create_mu_);
    create_queue_.push_back(std::move(job));
  }
  create_cv_.notify_all();
}

void partition_manager::sync_topic(const std::string& name) {
  bool deleted = false;
  topic_id deleted_id{};  // all zero: no replica here told which topic went
  {
    std::lock_guard change(change_mu_);
    auto t = table_->get(name);
    auto hosted = replicas_->of_topic(name);
    const bool replaced = t && !hosted.empty() && hosted.front()->topic_id() != t->id;
    if (!t || replaced) {
      const int32_t slots = replicas_->slot_count(name);
      if (slots > 0) {
        if (!hosted.empty()) deleted_id = hosted.front()->topic_id();
        remove_local_locked(name, slots);
        SLUICE_LOG_INFO("deleted this broker's replicas of topic {}", name);
        deleted = true;
      }
    }
    if (t) {
      replicas_->add_slots(name, t->partitions);
      const auto eff = config::effective_topic_config(*broker_config(), t->overrides);
      const auto hosted = hosted_from(*t, 0);
      create_logs_together(*t, hosted);
      for (int32_t p : hosted) {
        if (auto part = replicas_->get(name, p)) {
          if (auto s = part->set_config(eff); !s.ok())
            SLUICE_LOG_ERROR("{}-{}: config not applied: {}", name, p, s.err().message);
          refresh_state(name, p);
          continue;
        }
        auto part = open_partition(*t, p);
        if (!part.ok()) {
          SLUICE_LOG_ERROR("creating replica {}-{}: {} (tried again at the next change or start)", name, p,
                           part.err().message);
          continue;
        }
        install(*t, p, std::move(part).value());
      }
    }
  }
  if (deleted) {
    std::vector<deleted_listener> listeners;
    {
      std::lock_guard change(change_mu_);
      listeners = deleted_listeners_;
    }
    for (const auto& fn : listeners) fn(name, deleted_id);
  }
}

void partition_manager::wait_for_creations() {
  std::unique_lock g(create_mu_);
  create_cv_.wait(g, [&] { return create_queue_.empty() || create_stopping_; });
}

void partition_manager::run_creator() {
  for (;;) {
    std::shared_ptr<creation_job> job;
    {
      std::unique_lock g(create_mu_);
      create_cv_.wait(g, [&] { return create_stopping_ || !create_queue_.empty(); });
      if (create_stopping_) return;
      job = create_queue_.front();  // stays queued, so delete_topic can cancel it
    }
    if (job->broker_defaults) {
      sync_broker_defaults();
    } else if (job->sync) {
      sync_topic(job->topic);
    } else {
      create_logs(*job);
    }
    std::vector<std::function<void()>> done;
    {
      std::lock_guard g(create_mu_);
      done.swap(job->done);
      create_queue_.pop_front();
    }
    create_cv_.notify_all();
    for (auto& fn : done) fn();
  }
}

// Creates the job's logs one by one without change_mu_ (file I/O), then
// publishes each under it: a partition is published with the topic's config
// of that moment, and never after delete_topic removed its topic.
void partition_manager::create_logs(creation_job& job) {
  const int64_t started_ms = clk_.monotonic_ms();
  size_t made = 0;
  for (int32_t p : job.partitions) {
    {
      std::lock_guard g(create_mu_);
      if (job.cancelled || create_stopping_) break;
    }
    auto t = table_->get(job.topic);
    if (!t) break;  // deleted; the job is cancelled too
    auto part = open_partition(*t, p);
    std::lock_guard change(change_mu_);
    bool cancelled;
    {
      std::lock_guard g(create_mu_);
      cancelled = job.cancelled;
    }
    if (cancelled) {
      if (part.ok()) (*part)->close();
      // The log made above outlived its deleted topic. Unless the name was
      // created again meanwhile (a delete, then an automatic creation): then
      // the log under that name is the new topic's (get_or_create handed the
      // same one to both), and removing it would take the new topic's data.
      if (!table_->get(job.topic)) {
        logs_.remove({job.topic, p}).ignore();
        if (fs_.exists(snapshot_path(job.topic, p))) fs_.remove(snapshot_path(job.topic, p)).ignore();
      }
      break;
    }
    if (!part.ok()) {
      // Stays "being created" (NOT_LEADER_OR_FOLLOWER); the next start tries again.
      SLUICE_LOG_ERROR("creating partition {}-{}: {} (tried again at the next start)", job.topic, p,
                       part.err().message);
      continue;
    }
    // The topic's config as of now: an alter since open_partition read it
    // skipped this partition (it had no slot yet), and a log left by a
    // cancelled job of the same name carries that topic's settings. The
    // topic is this job's (a delete cancels it, under change_mu_).
    auto now = table_->get(job.topic);
    const auto eff = config::effective_topic_config(*broker_config(), now ? now->overrides : t->overrides);
    if (auto s = (*part)->set_config(eff); !s.ok())
      SLUICE_LOG_ERROR("{}-{}: config not applied: {}", job.topic, p, s.err().message);
    install(now ? *now : *t, p, std::move(part).value());
    ++made;
  }
  SLUICE_LOG_INFO("topic {}: created {} of {} partition logs in {} ms", job.topic, made,
                  job.partitions.size(), clk_.monotonic_ms() - started_ms);
}

void partition_manager::stop_leading() {
  for (auto& p : replicas_->all()) p->leave();
}

status partition_manager::checkpoint_high_watermarks() {
  std::lock_guard g(checkpoint_mu_);
  std::string text;
  for (const auto& p : replicas_->all())
    text += p->id().topic + " " + std::to_string(p->id().partition) + " " +
            std::to_string(p->high_watermark().value()) + "\n";
  return fs_.write_atomic(io::join(io::join(data_dir_, "meta"), "high_watermarks"),
                          {reinterpret_cast<const std::byte*>(text.data()), text.size()});
}

void partition_manager::shutdown() {
  stop_creator();
  if (table_->follows_controller()) {
    if (auto s = checkpoint_high_watermarks(); !s.ok())
      SLUICE_LOG_WARN("high watermark checkpoint at shutdown failed: {}", s.err().message);
  }
  std::vector<std::shared_ptr<partition>> all = replicas_->all();
  // Each snapshot is an atomic write with two syncs; idle partitions skip
  // theirs, and the rest overlap on a few threads.
  parallel_for(all.size(), limits::shutdown_threads, [&](size_t i) {
    partition& p = *all[i];
    p.close();
    if (auto s = p.snapshot_producers_if_changed(); !s.ok()) {
      SLUICE_LOG_WARN("{}-{}: producer state snapshot at shutdown failed: {}", p.id().topic,
                      p.id().partition, s.err().message);
    }
  });
}

}  // namespace sluice::cluster
