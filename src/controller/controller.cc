#include "controller/controller.h"

#include <algorithm>
#include <set>

#include "base/limits.h"

namespace sluice::controller {

using etcd::compare;
using etcd::txn_op;

controller::controller(etcd::client& etcd, key_layout keys, controller_record self)
    : etcd_(etcd), keys_(std::move(keys)), self_(std::move(self)) {}

result<bool> controller::campaign(int64_t lease) {
  etcd::txn_request req;
  req.compares.push_back(compare::absent(keys_.controller()));
  req.then_ops.push_back(etcd::put_op{keys_.controller(), encode(self_), {lease, false, false}});
  req.else_ops.push_back(etcd::range_op{etcd::key_range::one(keys_.controller()), {}});
  // Create-if-absent is safe to repeat: a second attempt after a first that
  // applied fails its compare and reads back this broker's own key.
  req.retry_if_unknown = true;
  SLUICE_ASSIGN_OR_RETURN(auto r, etcd_.txn(req));
  if (r.succeeded) {
    epoch_ = r.header_revision;
    return true;
  }
  const auto& read = std::get<etcd::range_result>(r.results.at(0));
  epoch_ = 0;
  if (read.kvs.empty()) return false;  // gone again already: try at the next change
  auto holder = decode_controller(read.kvs[0].value);
  if (holder.ok() && *holder == self_) {
    epoch_ = read.kvs[0].create_revision;
    return true;
  }
  return false;
}

void controller::observe(const metadata_image& img) {
  if (!active()) return;
  const auto& c = img.controller();
  // Only a key the image has seen replace ours deposes us; an image that
  // has not yet caught up with our own campaign (no key, or an older one)
  // does not.
  if (c && c->epoch > epoch_ && !(c->record == self_)) step_down();
}

status controller::check_active() const {
  if (!active()) return status(errc::not_controller, "this broker is not the controller");
  return {};
}

status controller::commit(write w) {
  SLUICE_TRY(check_active());
  etcd::txn_request req;
  req.compares.push_back(compare::number_is(keys_.controller(), etcd::compare_target::create_revision,
                                            etcd::compare_op::equal, epoch_));
  for (auto& c : w.compares) req.compares.push_back(std::move(c));
  req.then_ops = std::move(w.ops);
  req.else_ops.push_back(etcd::range_op{etcd::key_range::one(keys_.controller()), {}});
  // Every write compares the epoch and the revisions it replaces, so a
  // second application is refused: the client may try again on another
  // member when an attempt's outcome is unknown (a member that died with
  // the request). If the first did apply, the retry reports a moved record
  // (invalid_update_version) and the caller's image shows the write.
  req.retry_if_unknown = true;
  SLUICE_ASSIGN_OR_RETURN(auto r, etcd_.txn(req));
  if (r.succeeded) {
    last_write_revision_ = r.header_revision;
    return {};
  }
  const auto& read = std::get<etcd::range_result>(r.results.at(0));
  if (read.kvs.empty() || read.kvs[0].create_revision != epoch_) {
    step_down();
    return status(errc::not_controller, "another broker became the controller; this one stepped down");
  }
  return status(errc::invalid_update_version, "the metadata changed since it was read; try again");
}

namespace {

// One validated ISR change, ready for a transaction: the compares that
// must hold (the partition record's mod revision first, then each added
// member's broker epoch) and the record to put.
struct prepared_isr_change {
  std::string label;  // "topic-partition", for messages
  std::vector<compare> compares;
  etcd::put_op put;
};

result<prepared_isr_change> prepare_isr_change(const metadata_image& img, const std::string& topic,
                                               int32_t partition, int32_t requester, int32_t leader_epoch,
                                               int32_t partition_epoch, const std::vector<int32_t>& new_isr,
                                               const std::map<int32_t, int64_t>& added_broker_epochs) {
  const std::string label = topic + "-" + std::to_string(partition);
  const topic_entry* t = img.topic(topic);
  const partition_entry* pe = img.partition(topic, partition);
  if (!t || !pe || pe->record.topic != t->record.id || partition < 0 ||
      partition >= static_cast<int32_t>(t->record.assignment.size()))
    return error{errc::not_found, label + " does not exist"};
  SLUICE_TRY(validate_isr_change(pe->record.state, requester, leader_epoch, partition_epoch, new_isr,
                                 t->record.assignment[static_cast<size_t>(partition)], img.live_brokers()));
  prepared_isr_change out;
  out.label = label;
  const std::string key = img.keys().partition(topic, partition);
  out.compares.push_back(compare::unchanged_since(key, pe->mod_revision));
  const auto& old_isr = pe->record.state.isr;
  for (int32_t id : new_isr) {
    if (std::find(old_isr.begin(), old_isr.end(), id) != old_isr.end()) continue;
    auto e = added_broker_epochs.find(id);
    if (e == added_broker_epochs.end() || e->second < 0)
      return error{errc::ineligible_replica,
                   label + ": adds broker " + std::to_string(id) + " without the broker epoch it fetched with"};
    // A broker's epoch is its registration's mod revision.
    out.compares.push_back(compare::unchanged_since(img.keys().broker(id), e->second));
  }
  out.put = etcd::put_op{key, encode(partition_record{t->record.id, apply_isr_change(pe->record.state, new_isr)}), {}};
  return out;
}

status changed_since_read(const prepared_isr_change& c) {
  return status(errc::invalid_update_version, c.label + " changed since it was read");
}

// Writes `batch` (indexes into `prepared`) in one transaction, then again
// without the changes it finds refused, until one holds or none is left.
void write_isr_batch(etcd::client& etcd, const std::vector<prepared_isr_change>& prepared,
                     std::vector<size_t> batch, const std::vector<size_t>& slot, std::vector<status>& out) {
  while (!batch.empty()) {
    etcd::txn_request req;
    std::set<std::string> read;
    for (size_t i : batch) {
      for (const auto& c : prepared[i].compares) {
        req.compares.push_back(c);
        // The else branch reads what the compares looked at, once each.
        if (read.insert(c.key).second) req.else_ops.push_back(etcd::range_op{etcd::key_range::one(c.key), {}});
      }
      req.then_ops.push_back(prepared[i].put);
    }
    // A second application is refused by the compares: safe to retry.
    req.retry_if_unknown = true;
    auto r = etcd.txn(req);
    if (!r.ok()) {
      for (size_t i : batch) out[slot[i]] = r.err();
      return;
    }
    if (r->succeeded) return;  // every status stays ok
    std::map<std::string, int64_t> now;  // key -> mod revision (absent: 0)
    for (const auto& res : r->results)
      if (const auto* rr = std::get_if<etcd::range_result>(&res))
        for (const auto& kv : rr->kvs) now[kv.key] = kv.mod_revision;
    auto holds = [&](const compare& c) {
      auto it = now.find(c.key);
      return (it == now.end() ? 0 : it->second) == c.number;
    };
    std::vector<size_t> rest;
    for (size_t i : batch) {
      const auto& cs = prepared[i].compares;
      if (std::all_of(cs.begin(), cs.end(), holds))
        rest.push_back(i);
      else
        out[slot[i]] = changed_since_read(prepared[i]);
    }
    // A failed compare that no read explains (an attempt repeated after an
    // unknown outcome): refuse them all rather than loop.
    if (rest.size() == batch.size()) {
      for (size_t i : batch) out[slot[i]] = changed_since_read(prepared[i]);
      return;
    }
    batch = std::move(rest);
  }
}

}  // namespace

status write_isr_change(etcd::client& etcd, const metadata_image& img, const std::string& topic,
                        int32_t partition, int32_t requester, int32_t leader_epoch, int32_t partition_epoch,
                        const std::vector<int32_t>& new_isr,
                        const std::map<int32_t, int64_t>& added_broker_epochs) {
  SLUICE_ASSIGN_OR_RETURN(auto c, prepare_isr_change(img, topic, partition, requester, leader_epoch,
                                                     partition_epoch, new_isr, added_broker_epochs));
  etcd::txn_request req;
  req.compares = c.compares;
  req.then_ops.push_back(c.put);
  // A second application is refused by the compare: safe to retry.
  req.retry_if_unknown = true;
  SLUICE_ASSIGN_OR_RETURN(auto r, etcd.txn(req));
  if (!r.succeeded) return changed_since_read(c);
  return {};
}

std::vector<status> write_isr_changes(etcd::client& etcd, const metadata_image& img, int32_t requester,
                                      const std::vector<isr_change>& changes, size_t max_ops, size_t max_bytes) {
  std::vector<status> out(changes.size());
  std::vector<prepared_isr_change> prepared;
  std::vector<size_t> slot;  // prepared index -> changes index
  for (size_t i = 0; i < changes.size(); ++i) {
    const auto& c = changes[i];
    auto p = prepare_isr_change(img, c.topic, c.partition, requester, c.leader_epoch, c.partition_epoch, c.isr,
                                c.added_broker_epochs);
    if (!p.ok()) {
      out[i] = p.err();
      continue;
    }
    prepared.push_back(std::move(*p));
    slot.push_back(i);
  }
  // Fill each transaction up to etcd's limits: compares and else-branch
  // reads grow by one per partition plus one per added member (reads of a
  // broker key shared by several changes counted each time: a bound, not
  // an exact count), puts by one.
  std::vector<size_t> batch;
  size_t compares = 0, bytes = 0;
  for (size_t i = 0; i < prepared.size(); ++i) {
    const auto& p = prepared[i];
    size_t b = p.put.key.size() + p.put.value.size();
    for (const auto& c : p.compares) b += c.key.size();
    if (!batch.empty() && (compares + p.compares.size() > max_ops || bytes + b > max_bytes)) {
      write_isr_batch(etcd, prepared, std::move(batch), slot, out);
      batch.clear();
      compares = bytes = 0;
    }
    batch.push_back(i);
    compares += p.compares.size();
    bytes += b;
  }
  if (!batch.empty()) write_isr_batch(etcd, prepared, std::move(batch), slot, out);
  return out;
}

bool unclean_election_enabled(const metadata_image& img, const std::string& topic, bool static_default) {
  static const std::string key = "unclean.leader.election.enable";
  // Values were validated and written as "true" or "false"
  // (config::format_value) by whoever wrote them.
  if (const topic_entry* t = img.topic(topic)) {
    if (auto it = t->record.configs.find(key); it != t->record.configs.end()) return it->second == "true";
  }
  if (const auto& d = img.broker_configs()) {
    if (auto it = d->configs.find(key); it != d->configs.end()) return it->second == "true";
  }
  return static_default;
}

bool elections_due(const std::vector<image_change>& changes) {
  using kind = key_layout::parsed::kind;
  for (const auto& c : changes) {
    switch (c.kind) {
      case kind::broker:
      case kind::controller:
      case kind::broker_configs:
        return true;
      case kind::topic:
        if (!c.deleted) return true;
        break;
      default:
        break;
    }
  }
  return false;
}

status controller::commit_chunks(const std::vector<compare>& compares, std::vector<txn_op> ops) {
  const size_t chunk = limits::controller_txn_max_ops;
  for (size_t i = 0; i < ops.size(); i += chunk) {
    write w{compares, {}};
    const size_t end = std::min(ops.size(), i + chunk);
    for (size_t j = i; j < end; ++j) w.ops.push_back(std::move(ops[j]));
    SLUICE_TRY(commit(std::move(w)));
  }
  return {};
}

namespace {

std::vector<broker_desc> live_descs(const metadata_image& img) {
  std::vector<broker_desc> out;
  for (const auto& [id, b] : img.brokers()) out.push_back({id, b.record.rack});
  return out;
}

cluster_load load_of(const metadata_image& img) {
  cluster_load load;
  for (const auto& [_, t] : img.topics()) add_load(load, t.record.assignment);
  return load;
}

// The assignment of `count` new partitions from `first` on: placed, or the
// caller's own, checked.
result<std::vector<partition_assignment>> assignment_for(const metadata_image& img, int32_t first,
                                                         int32_t count, int16_t rf,
                                                         const std::vector<manual_assignment>* manual,
                                                         std::optional<int16_t> existing_rf) {
  if (!manual) return assign_replicas(live_descs(img), first, count, rf, load_of(img));
  SLUICE_TRY(validate_assignment(*manual, first, img.live_brokers(), existing_rf));
  if (static_cast<int32_t>(manual->size()) != count)
    return error{errc::invalid_replica_assignment, "the assignment names " + std::to_string(manual->size()) +
                                                       " partitions, not " + std::to_string(count)};
  std::vector<partition_assignment> out(static_cast<size_t>(count));
  for (const auto& m : *manual) out[static_cast<size_t>(m.partition - first)] = m.replicas;
  return out;
}

// A new partition's first state: its preferred replica leads if live (else
// the first live one), every replica in sync.
partition_state first_state(const partition_assignment& a, const broker_set& live) {
  partition_state s;
  s.isr = a;
  for (int32_t r : a) {
    if (live.count(r)) {
      s.leader = r;
      break;
    }
  }
  return s;
}

}  // namespace

result<topic_record> controller::create_topic(const metadata_image& img, const std::string& name,
                                              int32_t partitions, int16_t rf,
                                              const std::vector<manual_assignment>* manual,
                                              const config_text& configs) {
  SLUICE_TRY(check_active());
  if (img.topic(name)) return error{errc::already_exists, "topic '" + name + "' already exists"};
  topic_record t;
  t.id = new_topic_id();
  t.configs = configs;
  SLUICE_ASSIGN_OR_RETURN(t.assignment, assignment_for(img, 0, partitions, rf, manual, std::nullopt));
  const broker_set live = img.live_brokers();
  std::vector<txn_op> parts;
  for (size_t p = 0; p < t.assignment.size(); ++p) {
    partition_record pr{t.id, first_state(t.assignment[p], live)};
    parts.push_back(etcd::put_op{keys_.partition(name, static_cast<int32_t>(p)), encode(pr), {}});
  }
  // Partition records first, then the topic record: the commit point.
  const std::vector<compare> absent{compare::absent(keys_.topic(name))};
  SLUICE_TRY(commit_chunks(absent, std::move(parts)));
  SLUICE_TRY(commit(write{absent, {etcd::put_op{keys_.topic(name), encode(t), {}}}}));
  return t;
}

status controller::add_partitions(const metadata_image& img, const std::string& name, int32_t total,
                                  const std::vector<manual_assignment>* manual) {
  SLUICE_TRY(check_active());
  const topic_entry* t = img.topic(name);
  if (!t) return status(errc::not_found, "topic '" + name + "' does not exist");
  const auto first = static_cast<int32_t>(t->record.assignment.size());
  if (total <= first)
    return status(errc::invalid_partitions, "topic has " + std::to_string(first) +
                                                " partitions; the new count must be larger");
  const auto rf = static_cast<int16_t>(t->record.assignment.at(0).size());
  SLUICE_ASSIGN_OR_RETURN(auto added, assignment_for(img, first, total - first, rf, manual, rf));
  topic_record next = t->record;
  const broker_set live = img.live_brokers();
  std::vector<txn_op> parts;
  for (size_t i = 0; i < added.size(); ++i) {
    partition_record pr{next.id, first_state(added[i], live)};
    parts.push_back(etcd::put_op{keys_.partition(name, first + static_cast<int32_t>(i)), encode(pr), {}});
    next.assignment.push_back(std::move(added[i]));
  }
  const std::vector<compare> unchanged{compare::unchanged_since(keys_.topic(name), t->mod_revision)};
  SLUICE_TRY(commit_chunks(unchanged, std::move(parts)));
  return commit(write{unchanged, {etcd::put_op{keys_.topic(name), encode(next), {}}}});
}

status controller::delete_topic(const metadata_image& img, const std::string& name) {
  SLUICE_TRY(check_active());
  const topic_entry* t = img.topic(name);
  if (!t) return status(errc::not_found, "topic '" + name + "' does not exist");
  write w;
  w.compares.push_back(compare::unchanged_since(keys_.topic(name), t->mod_revision));
  w.ops.push_back(etcd::delete_op{etcd::key_range::one(keys_.topic(name)), false});
  w.ops.push_back(etcd::delete_op{etcd::key_range::prefix(keys_.partitions_of(name)), false});
  return commit(std::move(w));
}

status controller::set_topic_configs(const metadata_image& img, const std::string& name,
                                     const config_text& configs) {
  SLUICE_TRY(check_active());
  const topic_entry* t = img.topic(name);
  if (!t) return status(errc::not_found, "topic '" + name + "' does not exist");
  topic_record next = t->record;
  next.configs = configs;
  return commit(write{{compare::unchanged_since(keys_.topic(name), t->mod_revision)},
                      {etcd::put_op{keys_.topic(name), encode(next), {}}}});
}

status controller::set_broker_configs(const metadata_image& img, const config_text& configs) {
  SLUICE_TRY(check_active());
  return commit(write{{compare::unchanged_since(keys_.broker_configs(), img.broker_configs_revision())},
                      {etcd::put_op{keys_.broker_configs(), encode(broker_configs_record{configs}), {}}}});
}

status controller::set_group_configs(const metadata_image& img, const std::string& group,
                                     const config_text& configs) {
  SLUICE_TRY(check_active());
  const group_configs_entry* now = img.group_configs(group);
  const std::string key = keys_.group_configs(group);
  if (configs.empty()) {
    if (!now) return {};  // nothing to delete
    return commit(write{{compare::unchanged_since(key, now->mod_revision)},
                        {etcd::delete_op{etcd::key_range::one(key), false}}});
  }
  if (!now && img.group_configs().size() >= limits::max_groups_with_configs) {
    return status(errc::invalid_config, "group '" + group + "': " +
                                            std::to_string(limits::max_groups_with_configs) +
                                            " groups hold configs already, the most a cluster keeps");
  }
  return commit(write{{now ? compare::unchanged_since(key, now->mod_revision) : compare::absent(key)},
                      {etcd::put_op{key, encode(group_configs_record{configs}), {}}}});
}

result<controller::election_report> controller::decide_partitions(
    const metadata_image& img, const std::vector<std::pair<std::string, int32_t>>* only,
    const partition_decision& decide) {
  SLUICE_TRY(check_active());
  election_report report;
  std::vector<compare> compares;
  std::vector<txn_op> ops;
  auto flush = [&]() -> status {
    if (ops.empty()) return {};
    write w{std::move(compares), std::move(ops)};
    compares.clear();
    ops.clear();
    return commit(std::move(w));
  };
  auto consider = [&](const std::string& topic, const topic_entry& t, int32_t p) -> status {
    const partition_entry* pe = img.partition(topic, p);
    if (!pe || pe->record.topic != t.record.id || p >= static_cast<int32_t>(t.record.assignment.size()))
      return {};
    auto change = decide(topic, t.record.assignment[static_cast<size_t>(p)], pe->record.state);
    if (!change) return {};
    ++report.changed;
    if (change->leadership == leader_change::clean) ++report.clean;
    if (change->leadership == leader_change::unclean) ++report.unclean;
    if (change->leadership == leader_change::offline) ++report.offline;
    const std::string key = keys_.partition(topic, p);
    compares.push_back(compare::unchanged_since(key, pe->mod_revision));
    ops.push_back(etcd::put_op{key, encode(partition_record{t.record.id, change->next}), {}});
    // Each partition adds a compare and an op.
    if (2 * ops.size() >= limits::controller_txn_max_ops) return flush();
    return {};
  };
  if (only && !only->empty()) {
    for (const auto& [topic, p] : *only) {
      if (const topic_entry* t = img.topic(topic)) SLUICE_TRY(consider(topic, *t, p));
    }
  } else {
    for (const auto& [name, t] : img.topics())
      for (int32_t p = 0; p < static_cast<int32_t>(t.record.assignment.size()); ++p)
        SLUICE_TRY(consider(name, t, p));
  }
  SLUICE_TRY(flush());
  clean_elections_total_.fetch_add(static_cast<uint64_t>(report.clean), std::memory_order_relaxed);
  unclean_elections_total_.fetch_add(static_cast<uint64_t>(report.unclean), std::memory_order_relaxed);
  return report;
}

result<controller::election_report> controller::elect_after_broker_change(const metadata_image& img,
                                                                          const unclean_policy& unclean) {
  const broker_set live = img.live_brokers();
  return decide_partitions(img, nullptr, [&](const std::string& topic, const auto& a, const auto& s) {
    return on_brokers_changed(s, a, live, unclean && unclean(topic));
  });
}

result<controller::election_report> controller::controlled_shutdown(const metadata_image& img, int32_t leaving) {
  const broker_set live = img.live_brokers();
  return decide_partitions(img, nullptr, [&](const std::string&, const auto& a, const auto& s) {
    return sluice::controller::controlled_shutdown(s, a, live, leaving);
  });
}

result<controller::election_report> controller::elect_preferred(
    const metadata_image& img, const std::vector<std::pair<std::string, int32_t>>& partitions) {
  const broker_set live = img.live_brokers();
  return decide_partitions(img, &partitions, [&](const std::string&, const auto& a, const auto& s) {
    return sluice::controller::elect_preferred(s, a, live);
  });
}

result<controller::requested_elections> controller::elect_on_request(
    const metadata_image& img, requested_election kind,
    const std::vector<std::pair<std::string, int32_t>>* partitions) {
  SLUICE_TRY(check_active());
  const broker_set live = img.live_brokers();
  requested_elections out;
  // The decisions first, so each partition's reason is known; then the
  // changed ones written, deciding again over the same image (the same
  // answer: the decision is a pure function of it).
  std::vector<std::pair<std::string, int32_t>> changed;
  auto consider = [&](const std::string& topic, int32_t p) {
    election_outcome& o = out.outcomes.emplace_back(election_outcome{topic, p, {}});
    const topic_entry* t = img.topic(topic);
    const partition_entry* pe = t ? img.partition(topic, p) : nullptr;
    if (!t || !pe || p < 0 || p >= static_cast<int32_t>(t->record.assignment.size()) ||
        pe->record.topic != t->record.id) {
      o.result = status(errc::not_found, "This server does not host this topic-partition.");
      return;
    }
    auto r = sluice::controller::elect_on_request(kind, pe->record.state,
                                                  t->record.assignment[static_cast<size_t>(p)], live);
    if (!r.ok()) {
      o.result = r.to_status();
      return;
    }
    // A partition named twice is written once (etcd refuses a transaction
    // that puts one key twice).
    if (std::find(changed.begin(), changed.end(), std::pair(topic, p)) == changed.end()) changed.emplace_back(topic, p);
  };
  if (partitions) {
    for (const auto& [topic, p] : *partitions) consider(topic, p);
  } else {
    for (const auto& [name, t] : img.topics())
      for (int32_t p = 0; p < static_cast<int32_t>(t.record.assignment.size()); ++p) consider(name, p);
  }
  if (changed.empty()) return out;
  SLUICE_ASSIGN_OR_RETURN(out.report,
                          decide_partitions(img, &changed, [&](const std::string&, const auto& a, const auto& s) {
                            auto r = sluice::controller::elect_on_request(kind, s, a, live);
                            return r.ok() ? std::optional<partition_change>(*r) : std::nullopt;
                          }));
  return out;
}

result<int32_t> controller::remove_orphans(const metadata_image& img) {
  SLUICE_TRY(check_active());
  write w;
  int32_t removed = 0;
  for (const auto& [key, pe] : img.partitions()) {
    // Only what was written before this controller's epoch: its own
    // creations are on this thread and finished, but the image may not show
    // their topic records yet.
    if (pe.mod_revision >= epoch_) continue;
    const topic_entry* t = img.topic(key.first);
    if (t && t->record.id == pe.record.topic && key.second < static_cast<int32_t>(t->record.assignment.size()))
      continue;
    const std::string k = keys_.partition(key.first, key.second);
    w.compares.push_back(compare::unchanged_since(k, pe.mod_revision));
    w.ops.push_back(etcd::delete_op{etcd::key_range::one(k), false});
    ++removed;
    if (2 * w.ops.size() >= limits::controller_txn_max_ops) {
      SLUICE_TRY(commit(std::move(w)));
      w = write{};
    }
  }
  if (!w.ops.empty()) SLUICE_TRY(commit(std::move(w)));
  return removed;
}

}  // namespace sluice::controller
