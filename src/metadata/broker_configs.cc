#include "metadata/broker_configs.h"

#include <vector>

#include "base/log.h"
#include "config/overrides_file.h"

namespace sluice::cluster {
namespace {

// A missing file is an empty level; entries no longer dynamic are dropped.
result<config::config_map> read_level(io::filesystem& fs, const std::string& path) {
  if (!fs.exists(path)) return config::config_map{};
  SLUICE_ASSIGN_OR_RETURN(auto level,
                          config::read_overrides_file(fs, path, config::overrides_kind::broker));
  std::vector<std::string> fixed;
  for (const auto& [key, v] : level.entries()) {
    const config::setting* s = config::find_broker_setting(key);
    if (s != nullptr && !s->dynamic) fixed.push_back(key);
  }
  for (const auto& key : fixed) {
    SLUICE_LOG_ERROR("{}: {} is no longer dynamically updatable; ignoring its dynamic value", path,
                     key);
    level.erase(key);
  }
  return level;
}

}  // namespace

std::string broker_configs_dir(const std::string& data_dir) {
  return io::join(io::join(data_dir, "meta"), "broker_configs");
}

std::string broker_default_configs_path(const std::string& data_dir) {
  return io::join(broker_configs_dir(data_dir), "default");
}

std::string broker_node_configs_path(const std::string& data_dir, int32_t node_id) {
  return io::join(broker_configs_dir(data_dir), std::to_string(node_id));
}

result<config::broker_config> load_dynamic_broker_config(io::filesystem& fs,
                                                         const config::broker_config& static_cfg,
                                                         const config::config_map* cluster_defaults) {
  const std::string default_path =
      cluster_defaults ? std::string("the cluster's configs/brokers") : broker_default_configs_path(static_cfg.data_dir);
  const std::string node_path = broker_node_configs_path(static_cfg.data_dir, static_cfg.node_id);
  config::config_map defaults;
  if (cluster_defaults) {
    defaults = *cluster_defaults;
    if (fs.exists(broker_default_configs_path(static_cfg.data_dir))) {
      SLUICE_LOG_WARN("{} is not read: in a cluster the cluster-wide broker defaults live in etcd",
                      broker_default_configs_path(static_cfg.data_dir));
    }
  } else {
    SLUICE_ASSIGN_OR_RETURN(defaults, read_level(fs, default_path));
  }
  SLUICE_ASSIGN_OR_RETURN(auto node, read_level(fs, node_path));
  if (defaults.empty() && node.empty()) return static_cfg;
  auto both = config::make_broker_config(static_cfg.static_values, defaults, node);
  if (both.ok()) return both;
  // Leave out as little as works: one file (the default level first, as the
  // node's own values take precedence), else both.
  auto ignoring = [&](const std::string& what) {
    SLUICE_LOG_ERROR(
        "dynamic broker config does not combine with the static settings: {}; "
        "ignoring {}",
        both.err().message, what);
  };
  if (auto r = config::make_broker_config(static_cfg.static_values, {}, node);
      r.ok() && !node.empty()) {
    ignoring(default_path);
    return r;
  }
  if (auto r = config::make_broker_config(static_cfg.static_values, defaults, {});
      r.ok() && !defaults.empty()) {
    ignoring(node_path);
    return r;
  }
  ignoring(default_path + " and " + node_path);
  return static_cfg;
}

status persist_dynamic_broker_config(io::filesystem& fs, const config::broker_config& next,
                                     bool cluster_default) {
  const std::string dir = broker_configs_dir(next.data_dir);
  if (!fs.exists(dir)) {
    // The directory entry itself must survive a crash, or the file in it
    // would not.
    SLUICE_TRY(fs.create_dirs(dir));
    SLUICE_TRY(fs.sync_dir(io::dirname(dir)));
  }
  const std::string path = cluster_default ? broker_default_configs_path(next.data_dir)
                                           : broker_node_configs_path(next.data_dir, next.node_id);
  return config::write_overrides_file(
      fs, path, config::overrides_kind::broker,
      cluster_default ? next.dynamic_default_values : next.dynamic_broker_values);
}

}  // namespace sluice::cluster
