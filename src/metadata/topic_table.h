#pragma once

// The broker's registry of topics: name, topic id, partition count and
// config overrides, persisted under <data_dir>/meta/ so topics survive a
// restart. This is the single-node metadata_store (metadata/metadata_store.h,
// whose contract it keeps); in a cluster the same facts come from the
// controller (etcd), behind the same interface.
//
// A single broker's store has no controller, so nothing elects: every
// partition's one replica is this broker (the node id the table was opened
// with), leading at leader epoch 0 with itself in sync, partition epoch 0.
// These facts are not written to disk: they follow from the broker owning
// the table, so a broker restarted with another node.id keeps its topics.
// create() and add_partitions() accept only such assignments.
//
// On-disk format (docs/log_format.md, "Topic metadata"): `meta/topics` holds
// one line per topic and a CRC-32C line; `meta/configs/<topic>` holds the
// topic's overrides in config/overrides_file.h's format. Both are replaced
// atomically.
//
// Ordering for crash safety: a topic is written to `meta/topics` before its
// partition directories are created, and removed from it before they are
// deleted; so on start every directory that is not in the table is a
// leftover of a deletion, and a listed partition without a directory was
// not yet created (the broker creates it).
//
// Thread safety: every method is thread-safe (one mutex; callers never hold
// it across I/O other than the small metadata files).

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/types.h"
#include "config/schema.h"
#include "io/file.h"
#include "metadata/metadata_store.h"

namespace sluice::cluster {

class topic_table final : public metadata_store {
 public:
  // Loads the table from `meta_dir` (created if missing). A corrupt file is
  // an error (errc::corrupt_data): the broker refuses to start rather than
  // forget topics.
  static result<std::unique_ptr<topic_table>> open(io::filesystem& fs, std::string meta_dir,
                                                   int32_t node_id);

  std::optional<topic_info> get(const std::string& name) const override;
  // The topic with this id (KIP-516), or nullopt: a topic deleted and
  // created again under its name has a new id, so an old id finds nothing.
  std::optional<topic_info> get_by_id(const topic_id& id) const override;
  std::vector<topic_info> list() const override;
  size_t size() const override;

  // errc::invalid_replication_factor unless the request is for this broker
  // alone (replication factor 1; an explicit assignment of only itself).
  status check_request(const partition_request& req) const override;
  // Adds a topic (errc::already_exists if present). Persists before return.
  result<topic_info> create(const std::string& name, const partition_request& req,
                            const config::config_map& overrides) override;
  // Removes a topic (errc::not_found if absent). Persists before return.
  status remove(const std::string& name) override;
  // Adds partitions after the last. Persists before return.
  status add_partitions(const std::string& name, const partition_request& req) override;
  // Replaces the topic's overrides. Persists before return.
  status set_overrides(const std::string& name, const config::config_map& overrides) override;
  // This broker leading at epoch 0, alone in sync (see above).
  std::optional<partition_state> state(const std::string& topic, int32_t partition) const override;

 private:
  topic_table(io::filesystem& fs, std::string meta_dir, int32_t node_id)
      : fs_(fs), meta_dir_(std::move(meta_dir)), node_id_(node_id) {}

  // `t` with its assignment filled in: this broker for every partition.
  topic_info with_assignment(topic_info t) const;
  status load();
  // Removes overrides files of topics not in the table: leftovers of a
  // deletion cut short between its two steps (or ".tmp" files of writes cut
  // short), which a topic created later under that name must not inherit.
  // Housekeeping: failures are ignored.
  void remove_orphan_configs();
  status persist_locked();
  std::string configs_path(const std::string& topic) const;

  io::filesystem& fs_;
  const std::string meta_dir_;
  const int32_t node_id_;
  mutable std::mutex mu_;
  std::map<std::string, topic_info> topics_;
  std::map<topic_id, std::string> names_by_id_;  // the same topics, by id
};

}  // namespace sluice::cluster
