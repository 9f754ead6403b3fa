#pragma once

// The broker's dynamic configuration on disk, and loading it at start.
//
// AlterConfigs on the broker resource writes one level of dynamic values:
// the cluster-wide default (resource name "") of a single broker to
// <data_dir>/meta/broker_configs/default, this node's values (resource name
// = node.id) to <data_dir>/meta/broker_configs/<node.id>. Each is an
// overrides file of kind "broker" (config/overrides_file.h; grammar in
// docs/configuration.md), replaced atomically, so after a crash a file holds
// either the old or the new level, never a mix. The node's file is named by
// its id so that a data directory moved to another node.id does not carry
// one node's values to another. In a cluster the cluster-wide default lives
// in etcd instead (configs/brokers, written by the controller and applied by
// every broker: partition_manager::alter_broker_config).
//
// Precedence at start (config/internal.h broker_value): this node's dynamic
// value, else the dynamic default, else the file or command line, else the
// schema default.
//
// Thread safety: these are plain functions; the caller (partition_manager)
// serialises writes.

#include <string>

#include "base/result.h"
#include "config/broker_config.h"
#include "io/file.h"

namespace sluice::cluster {

std::string broker_configs_dir(const std::string& data_dir);
std::string broker_default_configs_path(const std::string& data_dir);
std::string broker_node_configs_path(const std::string& data_dir, int32_t node_id);

// Reads both files (a missing file is an empty level) and returns
// `static_cfg` with them applied. A damaged file (checksum, header, a key or
// value the schema refuses) is errc::corrupt_data naming the file and line:
// the broker refuses to start rather than silently run on other values.
// Two cases are forgiven with a logged error, as Kafka ignores invalid
// dynamic configs at start: an entry for a setting that is no longer
// dynamically updatable is dropped, and a level that no longer combines
// with the static settings (group.min.session.timeout.ms above a lowered
// static max) is left out.
// `cluster_defaults`, when given, is the cluster-wide default level a
// cluster keeps in etcd (metadata_store::broker_defaults); the local
// default file is then not read, and the level is never written there.
result<config::broker_config> load_dynamic_broker_config(io::filesystem& fs,
                                                         const config::broker_config& static_cfg,
                                                         const config::config_map* cluster_defaults = nullptr);

// Writes the level of `next` that `cluster_default` names (the whole level,
// replacing the file). Durable when it returns ok.
status persist_dynamic_broker_config(io::filesystem& fs, const config::broker_config& next,
                                     bool cluster_default);

}  // namespace sluice::cluster
