#include "produce_phase.h"

#include <gtest/gtest.h>

#include "pacer.h"

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

TEST(PacerTest, MessagesFallDueOnScheduleAndAreTimedFromThen) {
  pacer p(1'000'000, 20'000, 500'000);  // 50 us apart, ticks of 0.5 ms
  EXPECT_EQ(p.due(), 1'000'000);
  EXPECT_EQ(p.sleep_ns(1'000'000), 0);
  EXPECT_EQ(p.sent(), 1'000'000);
  // The next is due in 50 us: the sender sleeps a whole tick instead.
  EXPECT_EQ(p.sleep_ns(1'000'000), 500'000);
  // After the tick, the ten that fell due go at once, each timed from its
  // own due time, not from when it went.
  const int64_t woke = 1'500'000;
  for (int i = 1; i <= 10; ++i) {
    EXPECT_EQ(p.sleep_ns(woke), 0) << i;
    EXPECT_EQ(p.sent(), 1'000'000 + i * 50'000) << i;
  }
  EXPECT_GT(p.sleep_ns(woke), 0);
  // Further ahead than a tick: sleep until it is due.
  pacer slow(0, 10, 500'000);  // 100 ms apart
  slow.sent();
  EXPECT_EQ(slow.sleep_ns(0), 100'000'000);
}

}  // namespace
}  // namespace sluice::bench
