#include "produce_phase.h"

#include <gtest/gtest.h>

namespace sluice::bench {
namespace {

TEST(PartitionsTakingMessagesTest, KeysSpreadOverEveryPartition) {
  EXPECT_EQ(partitions_taking_messages(16, true, {}), 16);
  EXPECT_EQ(partitions_taking_messages(16, true, {"sticky.partitioning.linger.ms=10"}), 16);
}

TEST(PartitionsTakingMessagesTest, WithoutKeysTheStickyPartitionerUsesOne) {
  EXPECT_EQ(partitions_taking_messages(16, false, {}), 1);
  EXPECT_EQ(partitions_taking_messages(16, false, {"linger.ms=5"}), 1);
  EXPECT_EQ(partitions_taking_messages(16, false, {"sticky.partitioning.linger.ms=100"}), 1);
}

TEST(PartitionsTakingMessagesTest, StickyOffSpreadsMessagesWithoutKeys) {
  EXPECT_EQ(
      partitions_taking_messages(16, false, {"linger.ms=1", "sticky.partitioning.linger.ms=0"}),
      16);
  // A different property that merely starts alike is not the switch.
  EXPECT_EQ(partitions_taking_messages(16, false, {"sticky.partitioning.linger.ms.x=0"}), 1);
}

}  // namespace
}  // namespace sluice::bench
