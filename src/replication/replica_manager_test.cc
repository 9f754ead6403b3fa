#include "replication/replica_manager.h"

#include <gtest/gtest.h>

namespace sluice::cluster {
namespace {

// Which partitions a broker hosts follows from the assignment alone.
TEST(ReplicaManager, HostsWhatTheAssignmentNamesIt) {
  replica_manager rm(2);
  EXPECT_EQ(rm.node_id(), 2);
  EXPECT_TRUE(rm.hosts({2}));
  EXPECT_TRUE(rm.hosts({1, 3, 2}));
  EXPECT_FALSE(rm.hosts({1, 3}));
  EXPECT_FALSE(rm.hosts({}));
}

// A partition with a slot but no log yet is retriable (NOT_LEADER_OR_FOLLOWER);
// one without a slot is unknown; a bad name is an invalid topic.
TEST(ReplicaManager, SlotsWithoutLogsAnswerNotLeader) {
  replica_manager rm(0);
  rm.add_slots("t", 2);
  rm.add_slots("t", 1);  // never shrinks
  EXPECT_EQ(rm.get("t", 0), nullptr);
  EXPECT_TRUE(rm.being_created("t", 1));
  EXPECT_FALSE(rm.being_created("t", 2));
  EXPECT_EQ(rm.missing_partition_error("t", 1), errc::not_leader);
  EXPECT_EQ(rm.missing_partition_error("t", 2), errc::not_found);
  EXPECT_EQ(rm.missing_partition_error("t", -1), errc::not_found);
  EXPECT_EQ(rm.missing_partition_error("u", 0), errc::not_found);
  EXPECT_EQ(rm.missing_partition_error("bad name", 0), errc::invalid_topic);
  EXPECT_TRUE(rm.all().empty());
  EXPECT_FALSE(rm.apply("t", 0, {0}, {0, 1, {0}, 1}));
  EXPECT_TRUE(rm.remove_topic("t").size() == 2);
  EXPECT_EQ(rm.missing_partition_error("t", 1), errc::not_found);
  EXPECT_TRUE(rm.remove_topic("t").empty());
}

}  // namespace
}  // namespace sluice::cluster
