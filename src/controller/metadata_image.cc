#include "controller/metadata_image.h"

namespace sluice::controller {

using kind = key_layout::parsed::kind;

std::vector<error> metadata_image::load(const std::vector<etcd::key_value>& kvs, int64_t revision) {
  cluster_id_.reset();
  controller_.reset();
  brokers_.clear();
  topics_.clear();
  partitions_.clear();
  broker_configs_.reset();
  broker_configs_revision_ = 0;
  group_configs_.clear();
  std::vector<error> errors;
  for (const auto& kv : kvs) {
    auto r = set(kv, false);
    if (!r.ok()) errors.push_back(r.err());
  }
  revision_ = loaded_revision_ = revision;
  return errors;
}

result<std::optional<image_change>> metadata_image::apply(const etcd::watch_event& ev) {
  // One transaction's events share a revision, so only what load() read
  // is skipped, and the revision never goes back.
  if (ev.kv.mod_revision <= loaded_revision_ || ev.kv.mod_revision < revision_)
    return std::optional<image_change>{};
  revision_ = ev.kv.mod_revision;
  return set(ev.kv, ev.type == etcd::watch_event::kind::del);
}

result<std::optional<image_change>> metadata_image::set(const etcd::key_value& kv, bool deleted) {
  const auto key = keys_.parse(kv.key);
  image_change change{key.type, key.topic, key.id, deleted, key.group};
  auto with_key = [&](const error& e) { return error{e.code, kv.key + ": " + e.message}; };
  switch (key.type) {
    case kind::unknown:
      return std::optional<image_change>{};
    case kind::cluster_id:
      if (deleted) {
        cluster_id_.reset();
      } else {
        cluster_id_ = kv.value;
      }
      break;
    case kind::controller: {
      controller_.reset();
      if (deleted) break;
      auto r = decode_controller(kv.value);
      if (!r.ok()) return with_key(r.err());
      controller_ = controller_entry{std::move(r).value(), kv.create_revision, kv.lease};
      break;
    }
    case kind::broker: {
      brokers_.erase(key.id);
      if (deleted) break;
      auto r = decode_broker(kv.value);
      if (!r.ok()) return with_key(r.err());
      if (r->id != key.id) return error{errc::corrupt_data, kv.key + ": names broker " + std::to_string(r->id)};
      brokers_[key.id] = broker_entry{std::move(r).value(), kv.lease, kv.mod_revision};
      break;
    }
    case kind::topic: {
      topics_.erase(key.topic);
      if (deleted) break;
      auto r = decode_topic(kv.value);
      if (!r.ok()) return with_key(r.err());
      topics_[key.topic] = topic_entry{std::move(r).value(), kv.mod_revision};
      break;
    }
    case kind::partition: {
      partitions_.erase({key.topic, key.id});
      if (deleted) break;
      auto r = decode_partition(kv.value);
      if (!r.ok()) return with_key(r.err());
      partitions_[{key.topic, key.id}] = partition_entry{std::move(r).value(), kv.mod_revision};
      break;
    }
    case kind::group_configs: {
      group_configs_.erase(key.group);
      if (deleted) break;
      auto r = decode_group_configs(kv.value);
      if (!r.ok()) return with_key(r.err());
      group_configs_[key.group] = group_configs_entry{std::move(r).value(), kv.mod_revision};
      break;
    }
    case kind::broker_configs: {
      broker_configs_.reset();
      broker_configs_revision_ = deleted ? 0 : kv.mod_revision;
      if (deleted) break;
      auto r = decode_broker_configs(kv.value);
      if (!r.ok()) return with_key(r.err());
      broker_configs_ = std::move(r).value();
      break;
    }
  }
  return std::optional<image_change>{std::move(change)};
}

const topic_entry* metadata_image::topic(const std::string& name) const {
  auto it = topics_.find(name);
  return it == topics_.end() ? nullptr : &it->second;
}

const group_configs_entry* metadata_image::group_configs(std::string_view group) const {
  auto it = group_configs_.find(group);
  return it == group_configs_.end() ? nullptr : &it->second;
}

const partition_entry* metadata_image::partition(const std::string& topic, int32_t p) const {
  auto it = partitions_.find({topic, p});
  return it == partitions_.end() ? nullptr : &it->second;
}

std::vector<std::pair<int32_t, const partition_entry*>> metadata_image::partitions_of(
    const std::string& topic) const {
  std::vector<std::pair<int32_t, const partition_entry*>> out;
  for (auto it = partitions_.lower_bound({topic, 0}); it != partitions_.end() && it->first.first == topic; ++it)
    out.emplace_back(it->first.second, &it->second);
  return out;
}

broker_set metadata_image::live_brokers() const {
  broker_set s;
  for (const auto& [id, _] : brokers_) s.insert(id);
  return s;
}

}  // namespace sluice::controller
