// The metadata listener applies a change from the image it is handed: a
// partition's state as the image holds it (not read again from the store),
// a deleted topic's leftover partition record never, and the image's
// brokers and controller to the metadata cache.

#include "metadata/metadata_listener.h"

#include <gtest/gtest.h>

#include "controller/records.h"
#include "metadata/memory_store.h"
#include "metadata/test_managers.h"
#include "storage/test_util.h"

namespace sluice::cluster {
namespace {

using kind = controller::key_layout::parsed::kind;

class MetadataListenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config::config_map m;
    m.set("log.dirs", std::vector<std::string>{tmp_.path()});
    auto cfg = config::make_broker_config(std::move(m));
    ASSERT_TRUE(cfg.ok()) << cfg.err().message;
    auto store = std::make_unique<testing::memory_store>();
    store_ = store.get();
    m_ = testing::open_managers(io::filesystem::posix(), tmp_.sub("logs"), *cfg, std::move(store));
    ASSERT_NE(m_.partitions, nullptr);
    ASSERT_FALSE(m_.partitions->create_topic("t", 1, 1, {}, false));
    cache_ = std::make_unique<metadata_cache>(*store_, m_.partitions->replicas(), 0, "c");
    listener_ = std::make_unique<metadata_listener>(*m_.partitions, *cache_);
  }
  void TearDown() override {
    listener_.reset();
    cache_.reset();
    if (m_.partitions) m_.partitions->shutdown();
    m_.partitions.reset();
    if (m_.logs) m_.logs->shutdown().ignore();
  }

  // An image holding topic t (with `id`) and its partition 0 at `st`,
  // recorded as belonging to `record_topic`.
  controller::metadata_image image(const topic_id& id, const topic_id& record_topic,
                                   const controller::partition_state& st) {
    controller::metadata_image img(keys_);
    std::vector<etcd::key_value> kvs;
    controller::topic_record t{id, {{0}}, {}};
    controller::partition_record p{record_topic, st};
    kvs.push_back({keys_.topic("t"), controller::encode(t), 2, 2, 1, 0});
    kvs.push_back({keys_.partition("t", 0), controller::encode(p), 3, 3, 1, 0});
    controller::broker_record b{0, "inc0", "127.0.0.1", 9092, std::nullopt};
    kvs.push_back({keys_.broker(0), controller::encode(b), 4, 4, 1, 0});
    kvs.push_back({keys_.controller(), controller::encode(controller::controller_record{0, "inc0"}), 5, 5, 1, 0});
    auto errors = img.load(kvs, 5);
    EXPECT_TRUE(errors.empty()) << errors[0].message;
    return img;
  }

  storage::testing::temp_dir tmp_;
  controller::key_layout keys_{"/s/"};
  testing::memory_store* store_ = nullptr;
  testing::managers m_;
  std::unique_ptr<metadata_cache> cache_;
  std::unique_ptr<metadata_listener> listener_;
};

TEST_F(MetadataListenerTest, APartitionTakesTheStateTheImageHolds) {
  const topic_id id = store_->get("t")->id;
  controller::partition_state st{0, 4, {0}, 7};
  auto img = image(id, id, st);
  listener_->apply(img, {{kind::partition, "t", 0, false}});
  auto part = m_.partitions->replicas().get("t", 0);
  ASSERT_NE(part, nullptr);
  EXPECT_EQ(part->epoch(), leader_epoch{4});
  EXPECT_TRUE(part->is_leader());
  // The store was not asked: it still holds the state of the topic's creation.
  EXPECT_EQ(store_->state("t", 0)->leader_epoch, 0);
}

TEST_F(MetadataListenerTest, ADeletedTopicsLeftoverPartitionRecordIsNotApplied) {
  const topic_id id = store_->get("t")->id;
  topic_id other = id;
  other[15] ^= 0xff;
  auto img = image(id, other, controller::partition_state{0, 9, {0}, 9});
  listener_->apply(img, {{kind::partition, "t", 0, false}});
  EXPECT_EQ(m_.partitions->replicas().get("t", 0)->epoch(), leader_epoch{0});
}

TEST_F(MetadataListenerTest, BrokersAndTheControllerReachTheCache) {
  const topic_id id = store_->get("t")->id;
  auto img = image(id, id, controller::partition_state{0, 0, {0}, 0});
  EXPECT_EQ(cache_->controller_id(), -1);
  listener_->apply(img, {{kind::broker, "", 0, false}});
  ASSERT_EQ(cache_->brokers().size(), 1u);
  EXPECT_EQ(cache_->brokers()[0].port, 9092);
  EXPECT_EQ(cache_->controller_id(), 0);
}

}  // namespace
}  // namespace sluice::cluster
