#include "controller/records.h"

#include <gtest/gtest.h>

namespace sluice::controller {
namespace {

topic_id some_id() {
  topic_id id{};
  for (size_t i = 0; i < id.size(); ++i) id[i] = static_cast<uint8_t>(0xa0 + i);
  return id;
}

TEST(Records, BrokerRoundTripsWithAndWithoutRack) {
  broker_record r{3, "0123abcd", "127.0.0.1", 9093, std::string("r1")};
  const std::string v = encode(r);
  EXPECT_EQ(v, "sluice-broker v1\nid 3\nincarnation 0123abcd\nendpoint 127.0.0.1 9093\nrack r1\n");
  EXPECT_EQ(decode_broker(v).value(), r);
  r.rack.reset();
  EXPECT_EQ(decode_broker(encode(r)).value(), r);
}

TEST(Records, ControllerRoundTrips) {
  controller_record r{7, "ff00"};
  EXPECT_EQ(encode(r), "sluice-controller v1\nid 7\nincarnation ff00\n");
  EXPECT_EQ(decode_controller(encode(r)).value(), r);
}

TEST(Records, TopicRoundTripsWithAssignmentAndConfigs) {
  topic_record r{some_id(), {{1, 2, 3}, {2, 3, 1}}, {{"cleanup.policy", "compact,delete"}, {"retention.ms", "1000"}}};
  const std::string v = encode(r);
  EXPECT_EQ(v,
            "sluice-topic v1\nid a0a1a2a3a4a5a6a7a8a9aaabacadaeaf\npartitions 2\nreplicas 0 1,2,3\n"
            "replicas 1 2,3,1\nconfig cleanup.policy compact,delete\nconfig retention.ms 1000\n");
  EXPECT_EQ(decode_topic(v).value(), r);
}

TEST(Records, PartitionRoundTripsIncludingOffline) {
  partition_record r{some_id(), {2, 5, {2, 3}, 9}};
  const std::string v = encode(r);
  EXPECT_EQ(v,
            "sluice-partition v1\ntopic-id a0a1a2a3a4a5a6a7a8a9aaabacadaeaf\nleader 2\nleader-epoch 5\n"
            "isr 2,3\npartition-epoch 9\n");
  EXPECT_EQ(decode_partition(v).value(), r);
  r.state.leader = -1;
  EXPECT_EQ(decode_partition(encode(r)).value(), r);
}

TEST(Records, BrokerConfigsRoundTrip) {
  broker_configs_record r{{{"log.retention.ms", "5"}}};
  EXPECT_EQ(decode_broker_configs(encode(r)).value(), r);
  EXPECT_EQ(decode_broker_configs(encode(broker_configs_record{})).value(), broker_configs_record{});
}

TEST(Records, GroupConfigsRoundTripAndHoldAtLeastOneConfig) {
  group_configs_record r{{{"share.auto.offset.reset", "by_duration:PT1H"}, {"share.delivery.count.limit", "3"}}};
  const std::string v = encode(r);
  EXPECT_EQ(v, "sluice-group-configs v1\nconfig share.auto.offset.reset by_duration:PT1H\n"
               "config share.delivery.count.limit 3\n");
  EXPECT_EQ(decode_group_configs(v).value(), r);
  EXPECT_EQ(decode_group_configs("sluice-group-configs v1\n").code(), errc::corrupt_data);
  EXPECT_EQ(decode_group_configs("sluice-broker-configs v1\nconfig a 1\n").code(), errc::corrupt_data);
}

// Every way a value can be damaged is refused, naming the line.
TEST(Records, DamagedValuesAreCorrupt) {
  const std::string good = encode(partition_record{some_id(), {2, 5, {2, 3}, 9}});
  auto refused = [](const result<partition_record>& r) { return !r.ok() && r.code() == errc::corrupt_data; };
  EXPECT_TRUE(refused(decode_partition("")));
  EXPECT_TRUE(refused(decode_partition("sluice-partition v2\n")));
  EXPECT_TRUE(refused(decode_partition(good.substr(0, good.size() - 1))));  // last line cut
  EXPECT_TRUE(refused(decode_partition(good + "extra 1\n")));
  std::string s = good;
  s.replace(s.find("isr 2,3"), 7, "isr 2,2");
  EXPECT_TRUE(refused(decode_partition(s)));
  s = good;
  s.replace(s.find("isr 2,3"), 7, "isr 2,");
  EXPECT_TRUE(refused(decode_partition(s)));
  s = good;
  s.replace(s.find("leader 2"), 8, "leader 02");
  EXPECT_TRUE(refused(decode_partition(s)));
  s = good;
  s.replace(s.find("leader 2"), 8, "leader -2");
  EXPECT_TRUE(refused(decode_partition(s)));
  EXPECT_NE(decode_partition(s).err().message.find("line 3"), std::string::npos);

  const std::string topic = encode(topic_record{some_id(), {{1}, {2}}, {}});
  EXPECT_FALSE(decode_topic(topic.substr(0, topic.find("replicas 1"))).ok());  // a partition missing
  s = topic;
  s.replace(s.find("replicas 1 2"), 12, "replicas 2 2");
  EXPECT_FALSE(decode_topic(s).ok());
  EXPECT_FALSE(decode_topic(topic + "config b 1\nconfig a 1\n").ok());  // keys out of order
  EXPECT_FALSE(decode_topic(topic + "config nokey\n").ok());
  s = topic;
  s.replace(s.find("id a0"), 5, "id 00");
  s.replace(s.find("a1a2"), 30, std::string(30, '0'));
  EXPECT_FALSE(decode_topic(s).ok());  // an all-zero id
  EXPECT_FALSE(decode_broker("sluice-broker v1\nid 1\nincarnation x\nendpoint h 0\n").ok());
  EXPECT_FALSE(decode_broker("sluice-broker v1\nid 1\nincarnation x\nendpoint h\n").ok());
  EXPECT_FALSE(decode_broker("sluice-broker v1\nid 1\nincarnation x\nendpoint h 1\nrack \n").ok());
  EXPECT_FALSE(decode_controller("sluice-controller v1\nid x\nincarnation y\n").ok());
}

TEST(Records, KeysParseBackToWhatTheyName) {
  key_layout k("/sluice/");
  using kind = key_layout::parsed::kind;
  EXPECT_EQ(k.parse(k.cluster_id()).type, kind::cluster_id);
  EXPECT_EQ(k.parse(k.controller()).type, kind::controller);
  EXPECT_EQ(k.parse(k.broker_configs()).type, kind::broker_configs);
  auto b = k.parse(k.broker(12));
  EXPECT_EQ(b.type, kind::broker);
  EXPECT_EQ(b.id, 12);
  auto t = k.parse(k.topic("orders.v1"));
  EXPECT_EQ(t.type, kind::topic);
  EXPECT_EQ(t.topic, "orders.v1");
  auto p = k.parse(k.partition("orders.v1", 10));
  EXPECT_EQ(p.type, kind::partition);
  EXPECT_EQ(p.topic, "orders.v1");
  EXPECT_EQ(p.id, 10);
  EXPECT_EQ(k.parse("/other/controller").type, kind::unknown);
  EXPECT_EQ(k.parse("/sluice/brokers/x").type, kind::unknown);
  EXPECT_EQ(k.parse("/sluice/brokers/01").type, kind::unknown);
  EXPECT_EQ(k.parse("/sluice/partitions/t").type, kind::unknown);
  EXPECT_EQ(k.parse("/sluice/topics/a/b").type, kind::unknown);
  EXPECT_EQ(k.parse("/sluice/future-key").type, kind::unknown);
  EXPECT_EQ(k.partitions_of("t"), "/sluice/partitions/t/");
  // A group id may hold any byte: it is percent-encoded in its key.
  EXPECT_EQ(k.group_configs("orders/eu 1"), "/sluice/configs/groups/orders%2Feu%201");
  auto g = k.parse(k.group_configs("orders/eu 1"));
  EXPECT_EQ(g.type, kind::group_configs);
  EXPECT_EQ(g.group, "orders/eu 1");
  EXPECT_EQ(k.parse("/sluice/configs/groups/plain-name").group, "plain-name");
  EXPECT_EQ(k.parse("/sluice/configs/groups/").type, kind::unknown);
  EXPECT_EQ(k.parse("/sluice/configs/groups/a/b").type, kind::unknown);    // '/' must be encoded
  EXPECT_EQ(k.parse("/sluice/configs/groups/a%2fb").type, kind::unknown);  // not the one encoding
}

}  // namespace
}  // namespace sluice::controller
