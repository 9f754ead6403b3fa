// Group configs (GROUP config resources) on a broker: the file they live in
// on a single broker (round trip, damage refused, atomic replacement under
// a crash at every step), the partition manager's changes and lookup, and
// a cluster's store and metadata listener.

#include "metadata/group_configs.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <unistd.h>

#include "base/limits.h"
#include "config/overrides_file.h"
#include "controller/records.h"
#include "io/fault_fs.h"
#include "metadata/memory_store.h"
#include "metadata/metadata_listener.h"
#include "metadata/partition_manager.h"
#include "metadata/test_managers.h"

namespace sluice::cluster {
namespace {

class GroupConfigsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("group_configs_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "meta");
  }
  void TearDown() override {
    close_managers();
    std::filesystem::remove_all(dir_);
  }

  config::broker_config broker() const {
    config::config_map m;
    m.set("log.dirs", std::vector<std::string>{dir_.string()});
    auto b = config::make_broker_config(std::move(m));
    EXPECT_TRUE(b.ok()) << b.err().message;
    return std::move(b).value();
  }
  partition_manager* open_managers(std::unique_ptr<metadata_store> store = nullptr) {
    m_ = testing::open_managers(fs_, (dir_ / "logs").string(), broker(), std::move(store));
    return m_.partitions.get();
  }
  void close_managers() {
    if (m_.partitions) m_.partitions->shutdown();
    m_.partitions.reset();
    if (m_.logs) m_.logs->shutdown().ignore();
    m_.logs.reset();
  }

  static config::group_config_table table(int64_t lock_ms) {
    config::group_config_table t;
    t["orders"].set("share.record.lock.duration.ms", lock_ms);
    t["odd id/with=bytes"].set("share.isolation.level", std::string("read_committed"));
    return t;
  }

  io::filesystem& fs_ = io::filesystem::posix();
  std::filesystem::path dir_;
  testing::managers m_;
};

using ops = std::vector<config::alter_request>;

auto alter_with(ops o) {
  return [o = std::move(o)](const config::broker_config& b, const config::config_map& current) {
    return config::alter_group_configs(b, current, o);
  };
}

// ---- The file ----------------------------------------------------------------

TEST_F(GroupConfigsTest, FileRoundTripsAndMissingIsEmpty) {
  auto none = load_group_configs(fs_, dir_.string());
  ASSERT_TRUE(none.ok()) << none.err().message;
  EXPECT_TRUE(none->empty());
  ASSERT_TRUE(persist_group_configs(fs_, dir_.string(), table(20000)).ok());
  EXPECT_TRUE(std::filesystem::exists(dir_ / "meta" / "group_configs"));
  auto back = load_group_configs(fs_, dir_.string());
  ASSERT_TRUE(back.ok()) << back.err().message;
  EXPECT_EQ(*back, table(20000));
}

TEST_F(GroupConfigsTest, ADamagedFileIsRefusedNamingFileAndLine) {
  ASSERT_TRUE(persist_group_configs(fs_, dir_.string(), table(20000)).ok());
  const auto path = dir_ / "meta" / "group_configs";
  std::string text;
  {
    std::ifstream in(path, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  text[text.find("20000")] = '3';  // a value changed behind the checksum's back
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  auto r = load_group_configs(fs_, dir_.string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), errc::corrupt_data);
  EXPECT_NE(r.err().message.find(path.string() + ":"), std::string::npos) << r.err().message;
  EXPECT_NE(r.err().message.find("checksum mismatch"), std::string::npos) << r.err().message;
  // And the broker refuses to start on it.
  storage::log_manager_config lcfg;
  lcfg.data_dir = (dir_ / "logs").string();
  auto logs = storage::log_manager::open(fs_, sluice::clock::system(), lcfg);
  ASSERT_TRUE(logs.ok()) << logs.err().message;
  auto pm = partition_manager::open(fs_, sluice::clock::system(),
                                    std::make_shared<const config::broker_config>(broker()), **logs);
  ASSERT_FALSE(pm.ok());
  EXPECT_EQ(pm.code(), errc::corrupt_data);
  (*logs)->shutdown().ignore();
}

// A replacement cut short by a crash at each of its steps in turn (the
// temporary file's write, its sync, the rename, the directory's sync), then
// the power lost: the file holds the old table or the new one, whole.
TEST_F(GroupConfigsTest, ReplacementIsAtomicUnderACrashAtEveryStep) {
  ASSERT_TRUE(persist_group_configs(fs_, dir_.string(), table(20000)).ok());
  io::fault_fs probe(fs_);
  ASSERT_TRUE(persist_group_configs(probe, dir_.string(), table(30000)).ok());
  const uint64_t steps = probe.ops();
  ASSERT_GE(steps, 4u);
  bool saw_old = false, saw_new = false;
  for (uint64_t k = 0; k <= steps; ++k) {
    SCOPED_TRACE("crash after " + std::to_string(k) + " of " + std::to_string(steps) + " steps");
    ASSERT_TRUE(persist_group_configs(fs_, dir_.string(), table(20000)).ok());
    io::fault_fs ffs(fs_);
    ffs.crash_after_ops(k);
    const bool ok = persist_group_configs(ffs, dir_.string(), table(40000)).ok();
    ASSERT_TRUE(ffs.drop_unsynced().ok());
    auto after = load_group_configs(fs_, dir_.string());
    ASSERT_TRUE(after.ok()) << after.err().message;
    if (*after == table(20000)) {
      saw_old = true;
      EXPECT_FALSE(ok) << "acknowledged, then lost";
    } else {
      EXPECT_EQ(*after, table(40000));
      saw_new = true;
    }
  }
  EXPECT_TRUE(saw_old);
  EXPECT_TRUE(saw_new);
}

TEST_F(GroupConfigsTest, AFileBeyondItsBoundIsNotWritten) {
  config::group_config_table huge;
  size_t bytes = 0;
  for (size_t i = 0; bytes <= limits::max_group_configs_file_bytes; ++i) {
    const std::string id = std::to_string(i) + std::string(limits::max_group_id_bytes - 8, 'g');
    huge[id].set("share.delivery.count.limit", int64_t{3});
    bytes += id.size();  // the file holds more: each id, and a key per group
  }
  auto s = persist_group_configs(fs_, dir_.string(), huge);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), errc::invalid_config);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "meta" / "group_configs"));
}

// ---- The partition manager: one broker --------------------------------------

TEST_F(GroupConfigsTest, AltersArePersistedLookedUpAndSurviveARestart) {
  auto* pm = open_managers();
  ASSERT_NE(pm, nullptr);
  EXPECT_TRUE(pm->group_config("orders").empty());
  ASSERT_TRUE(pm->alter_group_configs("orders",
                                      alter_with({{"share.record.lock.duration.ms", config::alter_op::set, "20000"},
                                                  {"share.auto.offset.reset", config::alter_op::set, "earliest"}}),
                                      false)
                  .ok());
  auto c = pm->group_config("orders");
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(std::get<int64_t>(*c.find("share.record.lock.duration.ms")), 20000);
  EXPECT_TRUE(pm->group_config("other").empty());
  EXPECT_EQ(config::effective_share_group_config(*pm->broker_config(), c).record_lock_duration_ms, 20000);

  // validate_only and refusals change nothing.
  ASSERT_TRUE(pm->alter_group_configs("orders",
                                      alter_with({{"share.record.lock.duration.ms", config::alter_op::set, "25000"}}),
                                      true)
                  .ok());
  auto bad = pm->alter_group_configs(
      "orders", alter_with({{"share.record.lock.duration.ms", config::alter_op::set, "1"}}), false);
  EXPECT_EQ(bad.code(), errc::invalid_config);
  EXPECT_EQ(pm->group_config("orders"), c);

  close_managers();
  pm = open_managers();
  ASSERT_NE(pm, nullptr);
  EXPECT_EQ(pm->group_config("orders"), c);

  // Deleting the group takes its configs; a group without any is fine too.
  ASSERT_TRUE(pm->delete_group_configs("orders").ok());
  ASSERT_TRUE(pm->delete_group_configs("never-had-any").ok());
  EXPECT_TRUE(pm->group_config("orders").empty());
  close_managers();
  pm = open_managers();
  ASSERT_NE(pm, nullptr);
  EXPECT_TRUE(pm->group_configs().empty());
}

// ---- A cluster's store --------------------------------------------------------

TEST_F(GroupConfigsTest, AClusterStoreKeepsThemAndTheFileIsNotWritten) {
  auto store = std::make_unique<testing::memory_store>();
  store->keep_group_configs();
  auto* raw = store.get();
  auto* pm = open_managers(std::move(store));
  ASSERT_NE(pm, nullptr);
  ASSERT_TRUE(pm->alter_group_configs("g", alter_with({{"share.delivery.count.limit", config::alter_op::set, "3"}}),
                                      false)
                  .ok());
  EXPECT_EQ(raw->group_configs().at("g").size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "meta" / "group_configs"));
  // The copy follows the store through the metadata listener (an etcd
  // store returns once the listener applied the record); this store has
  // none, so the broker's start-up reload stands in for it.
  EXPECT_TRUE(pm->group_config("g").empty());
  pm->reload_group_configs();
  EXPECT_EQ(pm->group_config("g").size(), 1u);
  // Another broker's change reaches this one through the listener.
  config::config_map theirs;
  theirs.set("share.isolation.level", std::string("read_committed"));
  pm->apply_group_configs("h", theirs);
  EXPECT_EQ(pm->group_config("h"), theirs);
  pm->apply_group_configs("h", {});
  EXPECT_TRUE(pm->group_config("h").empty());
}

TEST_F(GroupConfigsTest, TheListenerAppliesTheImagesGroupRecords) {
  auto store = std::make_unique<testing::memory_store>();
  store->keep_group_configs();
  auto* raw = store.get();
  auto* pm = open_managers(std::move(store));
  ASSERT_NE(pm, nullptr);
  metadata_cache cache(*raw, pm->replicas(), 0, "c");
  metadata_listener listener(*pm, cache);
  using kind = controller::key_layout::parsed::kind;
  controller::key_layout keys("/s/");
  controller::metadata_image img(keys);
  std::vector<etcd::key_value> kvs;
  kvs.push_back({keys.group_configs("a/b"),
                 controller::encode(controller::group_configs_record{{{"share.delivery.count.limit", "4"}}}), 2, 2,
                 1, 0});
  // A value this broker's schema refuses is left out, not the group.
  kvs.push_back({keys.group_configs("c"),
                 controller::encode(controller::group_configs_record{
                     {{"share.delivery.count.limit", "x"}, {"share.isolation.level", "read_committed"}}}),
                 3, 3, 1, 0});
  ASSERT_TRUE(img.load(kvs, 3).empty());
  controller::image_change one{kind::group_configs, "", -1, false, "a/b"};
  listener.apply(img, {one});
  EXPECT_EQ(std::get<int64_t>(*pm->group_config("a/b").find("share.delivery.count.limit")), 4);
  EXPECT_TRUE(pm->group_config("c").empty());
  controller::image_change all{kind::group_configs, "", -1, false, ""};
  listener.apply(img, {all});
  EXPECT_EQ(pm->group_config("c").size(), 1u);
  EXPECT_EQ(pm->group_configs().size(), 2u);
  // The record deleted: the group has none.
  controller::metadata_image gone(keys);
  ASSERT_TRUE(gone.load({}, 4).empty());
  listener.apply(gone, {controller::image_change{kind::group_configs, "", -1, true, "a/b"}});
  EXPECT_TRUE(pm->group_config("a/b").empty());
}

}  // namespace
}  // namespace sluice::cluster
