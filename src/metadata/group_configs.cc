#include "metadata/group_configs.h"

#include <mutex>

#include "config/overrides_file.h"

namespace sluice::cluster {

std::string group_configs_path(const std::string& data_dir) {
  return io::join(io::join(data_dir, "meta"), "group_configs");
}

result<config::group_config_table> load_group_configs(io::filesystem& fs, const std::string& data_dir) {
  const std::string path = group_configs_path(data_dir);
  if (!fs.exists(path)) return config::group_config_table{};
  return config::read_group_configs_file(fs, path);
}

status persist_group_configs(io::filesystem& fs, const std::string& data_dir,
                             const config::group_config_table& groups) {
  return config::write_group_configs_file(fs, group_configs_path(data_dir), groups);
}

config::config_map group_config_cache::get(std::string_view group) const {
  std::shared_lock g(mu_);
  auto it = groups_.find(group);
  return it == groups_.end() ? config::config_map{} : it->second;
}

config::group_config_table group_config_cache::all() const {
  std::shared_lock g(mu_);
  return groups_;
}

size_t group_config_cache::size() const {
  std::shared_lock g(mu_);
  return groups_.size();
}

void group_config_cache::set(const std::string& group, config::config_map configs) {
  std::unique_lock g(mu_);
  if (configs.empty()) {
    groups_.erase(group);
  } else {
    groups_.insert_or_assign(group, std::move(configs));
  }
}

void group_config_cache::replace_all(config::group_config_table groups) {
  std::unique_lock g(mu_);
  groups_ = std::move(groups);
}

}  // namespace sluice::cluster
