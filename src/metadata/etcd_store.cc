#include "metadata/etcd_store.h"

#include "base/log.h"

namespace sluice::cluster {

topic_info etcd_store::to_info(const std::string& name, const controller::topic_record& r) {
  topic_info t;
  t.name = name;
  t.id = r.id;
  t.partitions = static_cast<int32_t>(r.assignment.size());
  t.assignment = r.assignment;
  for (const auto& [key, text] : r.configs) {
    const config::setting* s = config::find_topic_setting(key);
    if (!s) continue;  // a newer version's setting
    auto v = config::parse_value(*s, key, text);
    if (!v.ok()) {
      SLUICE_LOG_WARN("topic {}: config {}={} left out: {}", name, key, text, v.err().message);
      continue;
    }
    t.overrides.set(key, std::move(v).value());
  }
  return t;
}

controller::config_text etcd_store::to_text(const config::config_map& overrides) {
  controller::config_text out;
  for (const auto& [key, v] : overrides.entries()) out[key] = config::format_value(v);
  return out;
}

config::config_map etcd_store::to_broker_level(const controller::config_text& text) {
  config::config_map level;
  for (const auto& [key, value] : text) {
    const config::setting* s = config::find_broker_setting(key);
    if (!s || !s->dynamic) {
      // A newer version's setting, or one no longer changed at runtime.
      SLUICE_LOG_WARN("cluster-wide broker config {}={} left out: not a dynamic broker setting", key, value);
      continue;
    }
    auto v = config::parse_value(*s, key, value);
    if (!v.ok()) {
      SLUICE_LOG_WARN("cluster-wide broker config {}={} left out: {}", key, value, v.err().message);
      continue;
    }
    level.set(key, std::move(v).value());
  }
  return level;
}

config::config_map etcd_store::to_group_configs(const std::string& group, const controller::config_text& text) {
  config::config_map out;
  for (const auto& [key, value] : text) {
    const config::group_setting* g = config::find_group_setting(key);
    if (!g) {
      SLUICE_LOG_WARN("group {}: config {}={} left out: not a group config", group, key, value);
      continue;
    }
    auto v = config::parse_group_value(*g, value);
    if (!v.ok()) {
      SLUICE_LOG_WARN("group {}: config {}={} left out: {}", group, key, value, v.err().message);
      continue;
    }
    out.set(key, std::move(v).value());
  }
  return out;
}

config::group_config_table etcd_store::group_configs() const {
  return cp_.with_image([](const controller::metadata_image& img) {
    config::group_config_table out;
    for (const auto& [group, e] : img.group_configs()) {
      auto c = to_group_configs(group, e.record.configs);
      if (!c.empty()) out.emplace(group, std::move(c));
    }
    return out;
  });
}

status etcd_store::set_group_configs(const std::string& group, const config::config_map& configs) {
  const auto text = to_text(configs);
  return cp_.submit([&](controller::controller& k, const controller::metadata_image& img) {
    return k.set_group_configs(img, group, text);
  }, timeout_ms_);
}

std::optional<config::config_map> etcd_store::broker_defaults() const {
  return cp_.with_image([](const controller::metadata_image& img) {
    return img.broker_configs() ? to_broker_level(img.broker_configs()->configs) : config::config_map{};
  });
}

status etcd_store::set_broker_defaults(const config::config_map& defaults) {
  const auto text = to_text(defaults);
  return cp_.submit([&](controller::controller& k, const controller::metadata_image& img) {
    return k.set_broker_configs(img, text);
  }, timeout_ms_);
}

std::optional<topic_info> etcd_store::get(const std::string& name) const {
  return cp_.with_image([&](const controller::metadata_image& img) -> std::optional<topic_info> {
    const auto* t = img.topic(name);
    if (!t) return std::nullopt;
    return to_info(name, t->record);
  });
}

std::optional<topic_info> etcd_store::get_by_id(const topic_id& id) const {
  return cp_.with_image([&](const controller::metadata_image& img) -> std::optional<topic_info> {
    for (const auto& [name, t] : img.topics())
      if (t.record.id == id) return to_info(name, t.record);
    return std::nullopt;
  });
}

std::vector<topic_info> etcd_store::list() const {
  return cp_.with_image([&](const controller::metadata_image& img) {
    std::vector<topic_info> out;
    out.reserve(img.topics().size());
    for (const auto& [name, t] : img.topics()) out.push_back(to_info(name, t.record));
    return out;
  });
}

size_t etcd_store::size() const {
  return cp_.with_image([](const controller::metadata_image& img) { return img.topics().size(); });
}

std::optional<partition_state> etcd_store::state(const std::string& topic, int32_t partition) const {
  return cp_.with_image([&](const controller::metadata_image& img) -> std::optional<partition_state> {
    const auto* t = img.topic(topic);
    const auto* p = img.partition(topic, partition);
    // A partition record of another topic id is a leftover, not this topic's.
    if (!t || !p || p->record.topic != t->record.id) return std::nullopt;
    return p->record.state;
  });
}

std::optional<metadata_store::placed_partition> etcd_store::placed(const std::string& topic,
                                                                   int32_t partition) const {
  return cp_.with_image([&](const controller::metadata_image& img) -> std::optional<placed_partition> {
    const auto* t = img.topic(topic);
    const auto* p = img.partition(topic, partition);
    if (!t || !p || p->record.topic != t->record.id || partition < 0 ||
        static_cast<size_t>(partition) >= t->record.assignment.size())
      return std::nullopt;
    return placed_partition{t->record.assignment[static_cast<size_t>(partition)], p->record.state};
  });
}

status etcd_store::check_request(const partition_request& req) const {
  if (!req.assignment.empty()) {
    // Partition indexes are the caller's to get right (create_topics.cc);
    // the brokers must be registered ones, each once per partition, the
    // replica counts equal.
    std::vector<controller::manual_assignment> m;
    for (size_t i = 0; i < req.assignment.size(); ++i) m.push_back({static_cast<int32_t>(i), req.assignment[i]});
    const auto live = cp_.with_image([](const controller::metadata_image& img) { return img.live_brokers(); });
    return controller::validate_assignment(m, 0, live);
  }
  const size_t live = cp_.with_image([](const controller::metadata_image& img) { return img.brokers().size(); });
  if (req.replication_factor < 1 || static_cast<size_t>(req.replication_factor) > live) {
    return status(errc::invalid_replication_factor, "Replication factor: " + std::to_string(req.replication_factor) +
                                                        " larger than available brokers: " + std::to_string(live) +
                                                        ".");
  }
  return {};
}

namespace {

std::vector<controller::manual_assignment> manual_of(const partition_request& req, int32_t first) {
  std::vector<controller::manual_assignment> m;
  for (size_t i = 0; i < req.assignment.size(); ++i)
    m.push_back({first + static_cast<int32_t>(i), req.assignment[i]});
  return m;
}

}  // namespace

result<topic_info> etcd_store::create(const std::string& name, const partition_request& req,
                                      const config::config_map& overrides) {
  SLUICE_TRY(validate_topic_name(name));
  const auto manual = manual_of(req, 0);
  const auto text = to_text(overrides);
  SLUICE_TRY(cp_.submit(
      [&](controller::controller& k, const controller::metadata_image& img) -> status {
        auto r = k.create_topic(img, name, req.count, req.replication_factor, manual.empty() ? nullptr : &manual,
                                text);
        if (!r.ok()) return r.err();
        return {};
      },
      timeout_ms_));
  auto t = get(name);
  if (!t) return error{errc::unavailable, "topic '" + name + "' was created but is not visible yet"};
  return *t;
}

status etcd_store::remove(const std::string& name) {
  return cp_.submit([&](controller::controller& k, const controller::metadata_image& img) {
    return k.delete_topic(img, name);
  }, timeout_ms_);
}

status etcd_store::add_partitions(const std::string& name, const partition_request& req) {
  return cp_.submit(
      [&](controller::controller& k, const controller::metadata_image& img) -> status {
        const auto* t = img.topic(name);
        if (!t) return status(errc::not_found, "topic '" + name + "' does not exist");
        const auto first = static_cast<int32_t>(t->record.assignment.size());
        const auto manual = manual_of(req, first);
        return k.add_partitions(img, name, first + req.count, manual.empty() ? nullptr : &manual);
      },
      timeout_ms_);
}

status etcd_store::set_overrides(const std::string& name, const config::config_map& overrides) {
  const auto text = to_text(overrides);
  return cp_.submit([&](controller::controller& k, const controller::metadata_image& img) {
    return k.set_topic_configs(img, name, text);
  }, timeout_ms_);
}

}  // namespace sluice::cluster
