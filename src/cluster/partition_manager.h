#pragma once

// The topics and partitions this broker serves: the topic table (what
// exists), the partitions (open logs with their producer state), and the
// operations that change them (create, delete, add partitions, alter
// configs). The Kafka handlers go through this class for everything about
// topics; in a cluster it will follow the controller's decisions instead of
// deciding alone.
//
// Thread safety: every method is thread-safe. Lookups take a shared lock;
// changes to the set of topics are serialised by change_mu_ so that two
// CreateTopics of one name cannot both succeed.

#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"
#include "cluster/compaction.h"
#include "cluster/partition.h"
#include "cluster/producer_ids.h"
#include "cluster/retention.h"
#include "cluster/topic_table.h"
#include "config/broker_config.h"
#include "config/dynamic.h"
#include "storage/log_manager.h"

namespace sluice::cluster {

class partition_manager {
 public:
  // Opens the topic table under <data_dir>/meta, opens every partition of
  // every topic (creating logs that are missing) and deletes log directories
  // of topics that no longer exist (leftovers of an interrupted deletion).
  static result<std::unique_ptr<partition_manager>> open(io::filesystem& fs, sluice::clock& clk,
                                                         std::shared_ptr<const config::broker_config> cfg,
                                                         storage::log_manager& logs);

  std::shared_ptr<const config::broker_config> broker_config() const;

  std::shared_ptr<partition> get(const std::string& topic, int32_t partition) const;
  std::optional<topic_info> topic(const std::string& name) const;
  std::vector<topic_info> topics() const;

  // Creates a topic with `partitions` partitions (-1: num.partitions) and
  // replication factor `replication_factor` (-1: default.replication.factor).
  // Errors carry the Kafka code to answer with.
  struct create_error {
    kafka::error_code code;
    std::string message;
  };
  std::optional<create_error> create_topic(const std::string& name, int32_t partitions,
                                           int16_t replication_factor,
                                           std::span<const config::config_entry> configs, bool validate_only);
  // Deletes a topic and all its data.
  std::optional<create_error> delete_topic(const std::string& name);
  // Raises the partition count to `total`.
  std::optional<create_error> add_partitions(const std::string& name, int32_t total, bool validate_only);
  // Replaces a topic's overrides (already validated by config/dynamic.h)
  // and applies them to its partitions.
  status set_topic_overrides(const std::string& name, const config::config_map& overrides);

  producer_id_allocator& producer_ids() { return *producer_ids_; }

  ~partition_manager();

  // Starts the background retention pass (every
  // log.retention.check.interval.ms); open() calls it.
  void start_retention();
  retention_task* retention() { return retention_.get(); }
  // Starts the log cleaner (log.cleaner.enable, log.cleaner.threads);
  // open() calls it.
  void start_cleaner();
  log_cleaner* cleaner() { return cleaner_.get(); }

  // Stops retention and the cleaner, writes producer-state snapshots and wakes every fetch
  // waiter. The logs themselves are closed by the log manager.
  void shutdown();

 private:
  partition_manager(io::filesystem& fs, sluice::clock& clk, std::shared_ptr<const config::broker_config> cfg,
                    storage::log_manager& logs)
      : fs_(fs), clk_(clk), cfg_(std::move(cfg)), logs_(logs) {}
  status load();
  result<std::shared_ptr<partition>> open_partition(const topic_info& t, int32_t p);
  std::string snapshot_path(const std::string& topic, int32_t p) const;
  // Partitions of every topic; called with change_mu_ held.
  int64_t total_partitions() const;

  io::filesystem& fs_;
  sluice::clock& clk_;
  std::shared_ptr<const config::broker_config> cfg_;
  storage::log_manager& logs_;
  std::unique_ptr<topic_table> table_;
  std::unique_ptr<producer_id_allocator> producer_ids_;
  std::unique_ptr<retention_task> retention_;
  std::unique_ptr<log_cleaner> cleaner_;

  std::mutex change_mu_;  // serialises create/delete/add-partitions/alter
  mutable std::shared_mutex mu_;  // guards partitions_
  std::map<std::string, std::vector<std::shared_ptr<partition>>, std::less<>> partitions_;
};

}  // namespace sluice::cluster
