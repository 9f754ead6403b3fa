#include "metadata/topic_table.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "config/dynamic.h"

namespace sluice::cluster {
namespace {

class TopicTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("topic_table_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::unique_ptr<topic_table> open(int32_t node_id = 0) {
    auto t = topic_table::open(io::filesystem::posix(), dir_.string(), node_id);
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.err().message);
    return std::move(t).value();
  }
  std::filesystem::path dir_;
};

// `n` partitions, each on broker `node` alone.
std::vector<replica_list> on(size_t n, int32_t node) { return std::vector<replica_list>(n, {node}); }
// A request for `n` partitions of one replica (placed by the store).
partition_request here(int32_t n) { return partition_request{n, 1, {}}; }
// The same, naming broker `node` for each.
partition_request here(int32_t n, int32_t node) { return partition_request{n, 1, on(static_cast<size_t>(n), node)}; }

TEST(TopicName, KafkaRules) {
  EXPECT_TRUE(validate_topic_name("orders").ok());
  EXPECT_TRUE(validate_topic_name("a.b_c-D9").ok());
  EXPECT_FALSE(validate_topic_name("").ok());
  EXPECT_FALSE(validate_topic_name(".").ok());
  EXPECT_FALSE(validate_topic_name("..").ok());
  EXPECT_FALSE(validate_topic_name("has space").ok());
  EXPECT_FALSE(validate_topic_name("slash/no").ok());
  EXPECT_FALSE(validate_topic_name("é").ok());
  EXPECT_TRUE(validate_topic_name(std::string(249, 'a')).ok());
  EXPECT_FALSE(validate_topic_name(std::string(250, 'a')).ok());
}

TEST_F(TopicTableTest, CreateSurvivesReopen) {
  auto cfg = config::make_broker_config({});
  ASSERT_TRUE(cfg.ok());
  std::vector<config::config_entry> entries = {{"retention.ms", std::string("1000")}};
  auto ov = config::make_topic_overrides(*cfg, entries);
  ASSERT_TRUE(ov.ok());
  topic_id id;
  {
    auto t = open();
    auto a = t->create("orders", here(8), *ov);
    ASSERT_TRUE(a.ok());
    id = a->id;
    ASSERT_TRUE(t->create("plain", here(1), {}).ok());
    EXPECT_EQ(t->create("orders", here(2), {}).code(), errc::already_exists);
    EXPECT_EQ(t->create("bad name", here(2), {}).code(), errc::invalid_argument);
    EXPECT_EQ(t->create("zero", here(0), {}).code(), errc::invalid_argument);
  }
  auto t = open();
  ASSERT_EQ(t->size(), 2u);
  auto o = t->get("orders");
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->partitions, 8);
  EXPECT_EQ(o->id, id);
  EXPECT_EQ(o->overrides, *ov);
  EXPECT_TRUE(t->get("plain")->overrides.empty());
  ASSERT_TRUE(t->get_by_id(id).has_value());
  EXPECT_EQ(t->get_by_id(id)->name, "orders");
}

TEST_F(TopicTableTest, RecreatedTopicGetsANewIdAndTheOldIdFindsNothing) {
  auto t = open();
  auto first = t->create("orders", here(1), {});
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(t->remove("orders").ok());
  EXPECT_FALSE(t->get_by_id(first->id).has_value());
  auto second = t->create("orders", here(1), {});
  ASSERT_TRUE(second.ok());
  EXPECT_NE(first->id, second->id);
  EXPECT_FALSE(t->get_by_id(first->id).has_value());
  EXPECT_EQ(t->get_by_id(second->id)->name, "orders");
  auto reopened = open();
  EXPECT_FALSE(reopened->get_by_id(first->id).has_value());
  EXPECT_EQ(reopened->get_by_id(second->id)->name, "orders");
}

TEST_F(TopicTableTest, RemoveAndGrow) {
  {
    auto t = open();
    ASSERT_TRUE(t->create("a", here(1), {}).ok());
    ASSERT_TRUE(t->create("b", here(1), {}).ok());
    ASSERT_TRUE(t->add_partitions("a", here(3)).ok());
    EXPECT_EQ(t->add_partitions("a", here(0)).code(), errc::invalid_argument);
    EXPECT_EQ(t->add_partitions("nope", here(1)).code(), errc::not_found);
    ASSERT_TRUE(t->remove("b").ok());
    EXPECT_EQ(t->remove("b").code(), errc::not_found);
  }
  auto t = open();
  EXPECT_EQ(t->size(), 1u);
  EXPECT_EQ(t->get("a")->partitions, 4);
}

TEST_F(TopicTableTest, CorruptFileRefused) {
  {
    auto t = open();
    ASSERT_TRUE(t->create("a", here(1), {}).ok());
  }
  // Flip one byte of the table: the checksum must catch it.
  auto path = dir_ / "topics";
  std::string text;
  {
    std::FILE* f = std::fopen(path.c_str(), "r+");
    ASSERT_NE(f, nullptr);
    std::fseek(f, 17, SEEK_SET);
    std::fputc('b', f);
    std::fclose(f);
  }
  auto t = topic_table::open(io::filesystem::posix(), dir_.string(), 0);
  EXPECT_EQ(t.code(), errc::corrupt_data);
}

// A single broker's store holds every partition on this broker alone,
// leading at epoch 0; the node id is not on disk, so a broker restarted
// under another id still finds its topics, now on itself.
TEST_F(TopicTableTest, EveryPartitionIsThisBrokerAlone) {
  {
    auto t = open(3);
    ASSERT_TRUE(t->create("a", here(2, 3), {}).ok());
    EXPECT_EQ(t->create("rf2", partition_request{1, 2, {{3, 4}}}, {}).code(), errc::invalid_replica_assignment);
    auto rf3 = t->create("rf3", partition_request{1, 3, {}}, {});
    EXPECT_EQ(rf3.code(), errc::invalid_replication_factor);
    EXPECT_EQ(rf3.err().message, "Replication factor: 3 larger than available brokers: 1.");
    EXPECT_EQ(t->create("other", here(1, 4), {}).code(), errc::invalid_replica_assignment);
    EXPECT_EQ(t->add_partitions("a", here(1, 5)).code(), errc::invalid_replica_assignment);
    EXPECT_EQ(t->get("a")->partitions, 2);
    EXPECT_EQ(t->get("a")->assignment, on(2, 3));
    EXPECT_EQ(t->state("a", 1), (partition_state{3, 0, {3}, 0}));
    EXPECT_FALSE(t->state("a", 2).has_value());
    EXPECT_FALSE(t->state("b", 0).has_value());
  }
  auto t = open(7);
  EXPECT_EQ(t->get("a")->assignment, on(2, 7));
  EXPECT_EQ(t->list()[0].assignment, on(2, 7));
  EXPECT_EQ(t->get_by_id(t->get("a")->id)->assignment, on(2, 7));
  EXPECT_EQ(t->state("a", 0), (partition_state{7, 0, {7}, 0}));
}

}  // namespace
}  // namespace sluice::cluster
