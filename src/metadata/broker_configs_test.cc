// Dynamic broker configs: persisted per level, loaded at start with the
// right precedence, and applied by partition_manager to every partition that
// has no override of its own.

#include "metadata/broker_configs.h"
#include "metadata/test_managers.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <unistd.h>

#include "config/dynamic.h"
#include "config/overrides_file.h"
#include "metadata/partition_manager.h"
#include "storage/log.h"

namespace sluice::cluster {
namespace {

class BrokerConfigsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("broker_configs_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "meta");
  }
  void TearDown() override {
    pm_.reset();
    logs_.reset();
    std::filesystem::remove_all(dir_);
  }

  // A log manager and a partition manager on the static config `s`; null
  // (with the failure recorded) when either cannot open.
  partition_manager* open_managers(const config::broker_config& s) {
    auto m = testing::open_managers(fs_, (dir_ / "logs").string(), s);
    logs_ = std::move(m.logs);
    pm_ = std::move(m.partitions);
    return pm_.get();
  }

  // The static config: the data directory plus `settings`.
  config::broker_config static_config(
      std::vector<std::pair<std::string, std::string>> settings = {}) {
    config::config_map m;
    m.set("log.dirs", std::vector<std::string>{dir_.string()});
    m.set("node.id", int64_t{7});
    for (auto& [k, v] : settings) {
      auto parsed = config::parse_value(*config::find_broker_setting(k), k, v);
      EXPECT_TRUE(parsed.ok()) << k;
      m.set(k, std::move(parsed).value());
    }
    auto b = config::make_broker_config(std::move(m));
    EXPECT_TRUE(b.ok()) << b.err().message;
    return std::move(b).value();
  }

  io::filesystem& fs_ = io::filesystem::posix();
  std::filesystem::path dir_;
  std::unique_ptr<storage::log_manager> logs_;
  std::unique_ptr<partition_manager> pm_;
};

using ops = std::vector<config::alter_request>;

TEST_F(BrokerConfigsTest, NoFilesIsTheStaticConfig) {
  auto s = static_config({{"log.retention.ms", "5000"}});
  auto loaded = load_dynamic_broker_config(fs_, s);
  ASSERT_TRUE(loaded.ok()) << loaded.err().message;
  EXPECT_EQ(loaded->topic_defaults.retention_ms, 5000);
  EXPECT_TRUE(loaded->dynamic_default_values.empty() && loaded->dynamic_broker_values.empty());
}

TEST_F(BrokerConfigsTest, PersistedLevelsComeBackWithPrecedence) {
  auto s = static_config({{"log.retention.ms", "5000"}, {"log.segment.bytes", "1048576"}});
  auto b = config::alter_broker_config(s, true,
                                       ops{{"log.retention.ms", config::alter_op::set, "4000"},
                                           {"num.partitions", config::alter_op::set, "3"}});
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(persist_dynamic_broker_config(fs_, *b, true).ok());
  b = config::alter_broker_config(*b, false,
                                  ops{{"log.retention.ms", config::alter_op::set, "3000"}});
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(persist_dynamic_broker_config(fs_, *b, false).ok());
  EXPECT_TRUE(std::filesystem::exists(broker_default_configs_path(dir_.string())));
  EXPECT_TRUE(std::filesystem::exists(broker_node_configs_path(dir_.string(), 7)));

  // A restart with the same static settings: node > default > static > default.
  auto loaded = load_dynamic_broker_config(fs_, s);
  ASSERT_TRUE(loaded.ok()) << loaded.err().message;
  EXPECT_EQ(loaded->topic_defaults.retention_ms, 3000);
  EXPECT_EQ(loaded->num_partitions, 3);
  EXPECT_EQ(loaded->topic_defaults.segment_bytes, 1048576);
  EXPECT_EQ(loaded->dynamic_default_values, b->dynamic_default_values);
  EXPECT_EQ(loaded->dynamic_broker_values, b->dynamic_broker_values);

  // Another node.id on the same directory gets the default level only.
  config::config_map other = s.static_values;
  other.set("node.id", int64_t{8});
  auto as_other = load_dynamic_broker_config(fs_, *config::make_broker_config(other));
  ASSERT_TRUE(as_other.ok());
  EXPECT_EQ(as_other->topic_defaults.retention_ms, 4000);
  EXPECT_TRUE(as_other->dynamic_broker_values.empty());
}

TEST_F(BrokerConfigsTest, DamagedFileRefusesStart) {
  auto s = static_config();
  auto b = config::alter_broker_config(s, false,
                                       ops{{"log.retention.ms", config::alter_op::set, "3000"}});
  ASSERT_TRUE(persist_dynamic_broker_config(fs_, *b, false).ok());
  const auto path = broker_node_configs_path(dir_.string(), 7);
  std::string text;
  {
    std::ifstream in(path);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  text.replace(text.find("3000"), 4, "9000");
  std::ofstream(path, std::ios::trunc) << text;
  auto loaded = load_dynamic_broker_config(fs_, s);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.code(), errc::corrupt_data);
  EXPECT_NE(loaded.err().message.find(path), std::string::npos) << loaded.err().message;
}

TEST_F(BrokerConfigsTest, ValuesThatNoLongerFitAreIgnoredNotFatal) {
  // A node value of a setting that is not dynamic (an older version's, or
  // an edited file), and a default level that fights a lowered static max.
  config::config_map node;
  node.set("log.retention.ms", int64_t{3000});
  node.set("num.io.threads", int64_t{3});
  ASSERT_TRUE(config::write_overrides_file(
                  fs_,
                  (std::filesystem::create_directories(dir_ / "meta" / "broker_configs"),
                   broker_node_configs_path(dir_.string(), 7)),
                  config::overrides_kind::broker, node)
                  .ok());
  config::config_map defaults;
  defaults.set("group.min.session.timeout.ms", int64_t{9000});
  ASSERT_TRUE(config::write_overrides_file(fs_, broker_default_configs_path(dir_.string()),
                                           config::overrides_kind::broker, defaults)
                  .ok());
  auto s = static_config({{"group.max.session.timeout.ms", "8000"}});
  auto loaded = load_dynamic_broker_config(fs_, s);
  ASSERT_TRUE(loaded.ok()) << loaded.err().message;
  EXPECT_EQ(loaded->dynamic_broker_values.find("num.io.threads"), nullptr);
  // The node file alone combines; the default level was left out.
  EXPECT_EQ(loaded->topic_defaults.retention_ms, 3000);
  EXPECT_EQ(loaded->group_min_session_timeout_ms, 6000);
}

// flush.messages and flush.ms reach the partition's log; without them the
// log syncs only for acks=all waiters.
TEST_F(BrokerConfigsTest, FlushSettingsReachTheLog) {
  auto s = static_config({});
  partition_manager* pm = open_managers(s);
  ASSERT_NE(pm, nullptr);
  auto& m = *pm;
  std::vector<config::config_entry> own = {{"flush.messages", "3"}, {"flush.ms", "250"}};
  ASSERT_FALSE(m.create_topic("flushy", 1, 1, own, false).has_value());
  ASSERT_FALSE(m.create_topic("plain", 1, 1, {}, false).has_value());
  EXPECT_EQ(partition_test_access::log(*m.get("flushy", 0)).config().flush_messages, 3);
  EXPECT_EQ(partition_test_access::log(*m.get("flushy", 0)).config().flush_ms, 250);
  EXPECT_EQ(partition_test_access::log(*m.get("plain", 0)).config().flush_messages, INT64_MAX);
  EXPECT_EQ(partition_test_access::log(*m.get("plain", 0)).config().flush_ms, INT64_MAX);
}

// partition_manager applies a change to every partition without its own
// override, persists it, and tells the listeners.
TEST_F(BrokerConfigsTest, AlterAppliesToPartitionsWithoutOverrides) {
  auto s = static_config({{"log.retention.check.interval.ms", "3600000"}});
  partition_manager* pm = open_managers(s);
  ASSERT_NE(pm, nullptr);
  auto& m = *pm;
  std::vector<config::config_entry> own = {{"retention.ms", "123456"}};
  ASSERT_FALSE(m.create_topic("plain", 2, 1, {}, false).has_value());
  ASSERT_FALSE(m.create_topic("own", 1, 1, own, false).has_value());
  int calls = 0;
  int64_t seen_max_connections = 0;
  m.on_broker_config_change([&](const config::broker_config& c) {
    ++calls;
    seen_max_connections = c.max_connections;
  });

  auto alter = [&](bool cluster_default, ops o, bool validate_only) {
    return m.alter_broker_config(
        cluster_default,
        [&](const config::broker_config& current) {
          return config::alter_broker_config(current, cluster_default, o);
        },
        validate_only);
  };
  // validate_only and a refused value change nothing.
  ASSERT_TRUE(alter(true, ops{{"log.retention.ms", config::alter_op::set, "1000"}}, true).ok());
  auto refused = alter(true, ops{{"log.retention.ms", config::alter_op::set, "soon"}}, false);
  EXPECT_EQ(refused.code(), errc::invalid_config);
  EXPECT_EQ(m.get("plain", 0)->config().retention_ms, 604800000);
  EXPECT_EQ(calls, 0);
  EXPECT_FALSE(std::filesystem::exists(broker_default_configs_path(dir_.string())));

  ASSERT_TRUE(alter(true,
                    ops{{"log.retention.ms", config::alter_op::set, "1000"},
                        {"message.max.bytes", config::alter_op::set, "2000"},
                        {"max.connections", config::alter_op::set, "5"}},
                    false)
                  .ok());
  EXPECT_EQ(m.broker_config()->topic_defaults.retention_ms, 1000);
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(m.get("plain", p)->config().retention_ms, 1000);
    EXPECT_EQ(m.get("plain", p)->config().max_message_bytes, 2000);
  }
  EXPECT_EQ(m.get("own", 0)->config().retention_ms, 123456);  // its own override wins
  EXPECT_EQ(m.get("own", 0)->config().max_message_bytes, 2000);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen_max_connections, 5);

  // A topic created afterwards starts from the new defaults; deleting the
  // dynamic value restores the static one everywhere.
  ASSERT_FALSE(m.create_topic("later", 1, 1, {}, false).has_value());
  EXPECT_EQ(m.get("later", 0)->config().retention_ms, 1000);
  ASSERT_TRUE(
      alter(true, ops{{"log.retention.ms", config::alter_op::remove, std::nullopt}}, false).ok());
  EXPECT_EQ(m.get("later", 0)->config().retention_ms, 604800000);
  EXPECT_EQ(m.get("plain", 1)->config().max_message_bytes, 2000);

  // A topic alter computes from the current overrides under the same lock.
  auto topic_set = [&](const std::string& t, const std::string& key, const std::string& v,
                       bool validate_only) {
    return m.alter_topic_overrides(
        t,
        [&](const config::broker_config& broker, const config::config_map& current) {
          return config::alter_topic_overrides(broker, current,
                                               ops{{key, config::alter_op::set, v}});
        },
        validate_only);
  };
  EXPECT_EQ(topic_set("nope", "retention.ms", "1", false).code(), errc::not_found);
  ASSERT_TRUE(topic_set("plain", "retention.ms", "777", true).ok());
  EXPECT_EQ(m.get("plain", 0)->config().retention_ms, 604800000);
  ASSERT_TRUE(topic_set("plain", "retention.ms", "777", false).ok());
  ASSERT_TRUE(topic_set("plain", "segment.ms", "60000", false).ok());
  EXPECT_EQ(m.get("plain", 1)->config().retention_ms, 777);  // kept by the second alter
  EXPECT_EQ(m.get("plain", 1)->config().segment_ms, 60000);
  EXPECT_EQ(topic_set("plain", "segment.ms", "x", false).code(), errc::invalid_config);
  EXPECT_EQ(m.get("plain", 1)->config().segment_ms, 60000);

  // What was persisted is what a restart loads.
  auto reloaded = load_dynamic_broker_config(fs_, s);
  ASSERT_TRUE(reloaded.ok());
  EXPECT_EQ(reloaded->dynamic_default_values, m.broker_config()->dynamic_default_values);
  m.shutdown();
}

}  // namespace
}  // namespace sluice::cluster
