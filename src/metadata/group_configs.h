#pragma once

// Per-group configs (GROUP config resources, config/group_config.h): where
// they are kept and the copy every broker reads them from.
//
// A single broker keeps every group's configs in one file,
// <data_dir>/meta/group_configs (config/overrides_file.h writes and reads
// it; the grammar is in docs/configuration.md), replaced atomically at each
// change, so after a crash it holds either the configs before the change or
// after it, never a mix. A cluster keeps them in etcd instead, one record
// per group under configs/groups/ (docs/metadata_format.md), written by the
// controller and seen by every broker through its metadata image
// (metadata_store::group_configs, metadata_listener).
//
// Group configs are kept whether or not the group exists (Kafka lets an
// operator set them before the group's first member joins) and removed
// with it by DeleteGroups.

#include <shared_mutex>
#include <string>
#include <string_view>

#include "base/result.h"
#include "config/group_config.h"
#include "io/file.h"

namespace sluice::cluster {

std::string group_configs_path(const std::string& data_dir);

// Reads <data_dir>/meta/group_configs; a missing file is no configs. A
// damaged file is errc::corrupt_data naming the file and line: the broker
// refuses to start rather than run its share groups on other values.
result<config::group_config_table> load_group_configs(io::filesystem& fs, const std::string& data_dir);

// Replaces the file with `groups` (the meta directory exists: the broker
// makes it first). Durable when it returns ok; on an error the file is as
// it was. errc::invalid_config when the file would exceed
// limits::max_group_configs_file_bytes.
status persist_group_configs(io::filesystem& fs, const std::string& data_dir,
                             const config::group_config_table& groups);

// The configs every broker serves lookups from: a copy of the store's (the
// file's, or the cluster's image), replaced by the partition manager after
// each change it makes and by the metadata listener after each change the
// controller made.
//
// Thread safety: every method may be called from any thread; lookups share
// a reader lock and copy one group's few values, so the share service may
// call get() on every request.
class group_config_cache {
 public:
  // The keys set for `group`; empty when none is (the group then has every
  // key's inherited value).
  config::config_map get(std::string_view group) const;
  config::group_config_table all() const;
  size_t size() const;
  // Replaces one group's configs; empty removes the group.
  void set(const std::string& group, config::config_map configs);
  void replace_all(config::group_config_table groups);

 private:
  mutable std::shared_mutex mu_;
  config::group_config_table groups_;
};

}  // namespace sluice::cluster
