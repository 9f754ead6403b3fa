#pragma once

// For tests: the broker's two storage owners opened as the broker opens
// them, a log manager over `logs_dir` and a partition manager on it.

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "config/broker_config.h"
#include "metadata/partition_manager.h"
#include "partition/test_access.h"
#include "storage/log_manager.h"

namespace sluice::cluster {

namespace testing {

struct managers {
  std::unique_ptr<storage::log_manager> logs;
  std::unique_ptr<partition_manager> partitions;  // uses *logs: reset it first
};

// Both open, or both null with the failure recorded by EXPECT. `store`:
// the metadata store (null: the file-backed topic table under the data
// directory). `clk`: the clock both run on (a manual one in tests that roll
// segments or age tombstones).
inline managers open_managers(io::filesystem& fs, const std::string& logs_dir, const config::broker_config& s,
                              std::unique_ptr<metadata_store> store = nullptr,
                              sluice::clock& clk = sluice::clock::system()) {
  managers m;
  storage::log_manager_config lcfg;
  lcfg.data_dir = logs_dir;
  lcfg.default_log = to_log_config(s.topic_defaults);
  auto logs = storage::log_manager::open(fs, clk, lcfg);
  EXPECT_TRUE(logs.ok()) << logs.err().message;
  if (!logs.ok()) return m;
  m.logs = std::move(logs).value();
  auto pm = partition_manager::open(fs, clk, std::make_shared<const config::broker_config>(s),
                                    *m.logs, std::move(store));
  EXPECT_TRUE(pm.ok()) << pm.err().message;
  if (!pm.ok()) return managers{};
  m.partitions = std::move(pm).value();
  return m;
}

}  // namespace testing
}  // namespace sluice::cluster
