#include "partition/replica_tracker.h"

#include <gtest/gtest.h>

#include "base/clock.h"

namespace sluice::cluster {
namespace {

using ids = std::vector<int32_t>;
constexpr int64_t lag_max = 10'000;

struct TrackerTest : ::testing::Test {
  manual_clock clk;
  replica_tracker t;
  int64_t now() const { return clk.monotonic_ms(); }
  void lead(offset end, offset hw = offset(0), ids isr = {1, 2, 3}) {
    t.become_leader(1, {1, 2, 3}, isr, hw, end, now());
  }
};

// A replica fetch counts only with the broker epoch of the registration
// the leader knows (KIP-903's ReplicaEpoch, required here).
TEST(ReplicaFetchTrusted, OnlyTheRegisteredBrokerEpochCounts) {
  EXPECT_TRUE(replica_fetch_trusted(42, 42));
  EXPECT_FALSE(replica_fetch_trusted(-1, 42));   // none sent (Fetch before v15)
  EXPECT_FALSE(replica_fetch_trusted(41, 42));   // an earlier process of that broker
  EXPECT_FALSE(replica_fetch_trusted(43, 42));   // a registration the leader has not seen yet
  EXPECT_FALSE(replica_fetch_trusted(42, std::nullopt));  // not registered
  EXPECT_FALSE(replica_fetch_trusted(-1, -1));   // a single node knows no epoch
  EXPECT_FALSE(replica_fetch_trusted(-1, std::nullopt));
}

TEST_F(TrackerTest, HighWatermarkIsTheSmallestInSyncLogEnd) {
  lead(offset(100), offset(40));
  // Followers not heard from yet hold it where the follower time left it.
  EXPECT_EQ(t.high_watermark(), offset(40));
  EXPECT_FALSE(t.on_fetch(2, offset(90), offset(100), now()));
  EXPECT_EQ(t.high_watermark(), offset(40));
  EXPECT_TRUE(t.on_fetch(3, offset(70), offset(100), now()));
  EXPECT_EQ(t.high_watermark(), offset(70));
  EXPECT_TRUE(t.on_fetch(3, offset(100), offset(100), now()));
  EXPECT_EQ(t.high_watermark(), offset(90));
  EXPECT_TRUE(t.on_fetch(2, offset(100), offset(100), now()));
  EXPECT_EQ(t.high_watermark(), offset(100));
  // Never past the leader's own end.
  EXPECT_FALSE(t.on_leader_end(offset(100)));
  EXPECT_EQ(t.high_watermark(), offset(100));
}

// Issue 31: DeleteRecords waits for the low watermark, the smallest log
// start offset over the ISR; followers say theirs in every fetch.
TEST_F(TrackerTest, LowWatermarkIsTheSmallestInSyncLogStart) {
  lead(offset(100), offset(100), {1, 2});
  // Follower 2 has not said its log start: unknown.
  EXPECT_EQ(t.low_watermark(offset(50)), offset(-1));
  t.on_fetch(2, offset(100), offset(100), now(), -1, offset(20));
  EXPECT_EQ(t.low_watermark(offset(50)), offset(20));
  // Replica 3 is not in the ISR: its log start does not count.
  t.on_fetch(3, offset(100), offset(100), now(), -1, offset(0));
  EXPECT_EQ(t.low_watermark(offset(50)), offset(20));
  t.on_fetch(2, offset(100), offset(100), now(), -1, offset(60));
  EXPECT_EQ(t.low_watermark(offset(50)), offset(50));
  // A fetch that does not name it leaves the last word.
  t.on_fetch(2, offset(100), offset(100), now());
  EXPECT_EQ(t.low_watermark(offset(70)), offset(60));
  // A new leadership hears from its followers afresh.
  lead(offset(100), offset(100), {1, 2});
  EXPECT_EQ(t.low_watermark(offset(70)), offset(-1));
}

TEST_F(TrackerTest, HighWatermarkNeverMovesBackwards) {
  lead(offset(50), offset(30));
  t.on_fetch(2, offset(50), offset(50), now());
  t.on_fetch(3, offset(50), offset(50), now());
  ASSERT_EQ(t.high_watermark(), offset(50));
  // A follower that truncated and fetches lower does not pull it back.
  EXPECT_FALSE(t.on_fetch(3, offset(20), offset(50), now()));
  EXPECT_EQ(t.high_watermark(), offset(50));
  // Nor does a new leadership that starts from a lower follower's view.
  t.become_leader(1, {1, 2, 3}, {1, 2, 3}, offset(45), offset(60), now());
  EXPECT_EQ(t.high_watermark(), offset(45));
  t.on_fetch(2, offset(10), offset(60), now());
  t.on_fetch(3, offset(10), offset(60), now());
  EXPECT_EQ(t.high_watermark(), offset(45));
}

TEST_F(TrackerTest, LeaderAloneInSyncFollowsItsOwnEnd) {
  lead(offset(10), offset(10), {1});
  EXPECT_EQ(t.high_watermark(), offset(10));
  EXPECT_TRUE(t.on_leader_end(offset(15)));
  EXPECT_EQ(t.high_watermark(), offset(15));
  // Followers outside the ISR do not hold it back.
  EXPECT_FALSE(t.on_fetch(2, offset(3), offset(15), now()));
  EXPECT_EQ(t.high_watermark(), offset(15));
}

TEST_F(TrackerTest, LaggingFollowerIsProposedForRemovalAfterTheLagAllowance) {
  lead(offset(0));
  t.on_fetch(2, offset(0), offset(0), now());
  t.on_fetch(3, offset(0), offset(0), now());
  EXPECT_FALSE(t.propose_isr(now(), lag_max));
  // The leader moves on; 2 keeps up, 3 stops fetching.
  for (int i = 1; i <= 11; ++i) {
    clk.advance_ms(1'000);
    t.on_leader_end(offset(i * 10));
    t.on_fetch(2, offset(i * 10), offset(i * 10), now());
    if (i < 11) {
      EXPECT_FALSE(t.propose_isr(now(), lag_max)) << i;
    }
  }
  // 3 last caught up 11 s ago.
  auto p = t.propose_isr(now(), lag_max);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, (ids{1, 2}));
  // Until the store confirms, 3 still holds the high watermark.
  EXPECT_EQ(t.high_watermark(), offset(0));
  EXPECT_TRUE(t.set_isr({1, 2, 3}, {1, 2}, offset(110), now()));
  EXPECT_EQ(t.high_watermark(), offset(110));
}

TEST_F(TrackerTest, SlowButProgressingFollowerStaysInSync) {
  lead(offset(0));
  t.on_fetch(2, offset(0), offset(0), now());
  t.on_fetch(3, offset(0), offset(0), now());
  // Each fetch of 3 reaches where the leader was at its previous fetch, never
  // the end itself: it is caught up as of its previous fetch each time.
  for (int i = 1; i <= 30; ++i) {
    clk.advance_ms(1'000);
    t.on_leader_end(offset(i * 10 + 5));
    t.on_fetch(2, offset(i * 10 + 5), offset(i * 10 + 5), now());
    t.on_fetch(3, offset((i - 1) * 10 + 5 + (i == 1 ? -5 : 0)), offset(i * 10 + 5), now());
    EXPECT_FALSE(t.propose_isr(now(), lag_max)) << i;
  }
}

TEST_F(TrackerTest, CaughtUpFollowerIsProposedForAdditionAndCountsAtOnce) {
  lead(offset(100), offset(100), {1, 2});
  t.on_fetch(2, offset(100), offset(100), now());
  // 3 is behind the start of this leadership: not yet.
  t.on_fetch(3, offset(60), offset(100), now());
  EXPECT_FALSE(t.propose_isr(now(), lag_max));
  t.on_leader_end(offset(120));
  t.on_fetch(2, offset(120), offset(120), now());
  ASSERT_EQ(t.high_watermark(), offset(120));
  t.on_fetch(3, offset(120), offset(120), now());
  auto p = t.propose_isr(now(), lag_max);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, (ids{1, 2, 3}));
  // Pending: 3 now holds the high watermark with the others.
  t.on_leader_end(offset(130));
  t.on_fetch(2, offset(130), offset(130), now());
  EXPECT_EQ(t.high_watermark(), offset(120));
  t.on_fetch(3, offset(130), offset(130), now());
  EXPECT_EQ(t.high_watermark(), offset(130));
  t.set_isr({1, 2, 3}, {1, 2, 3}, offset(130), now());
  EXPECT_FALSE(t.propose_isr(now(), lag_max));
}

// A pending addition that lags again is not proposed again, but the
// proposal that added it may still be written: until the store moves on it
// holds the high watermark where the follower is, and the leader proposes
// the ISR unchanged to move the partition epoch past the old proposal.
// Once the store's next state leaves it out, it no longer counts. Before,
// the leader stopped counting it at once; the controller then applied the
// old proposal, the follower joined the ISR below the high watermark, and
// a clean election to it lost committed records (the cluster simulation,
// seed 900229 of 1,500 steps).
TEST_F(TrackerTest, PendingAdditionThatLagsAgainCountsUntilTheStoreMovesOn) {
  lead(offset(10), offset(10), {1, 2});
  t.on_fetch(2, offset(10), offset(10), now());
  t.on_fetch(3, offset(10), offset(10), now());
  ASSERT_TRUE(t.propose_isr(now(), lag_max));  // 3 pending
  clk.advance_ms(lag_max + 1);
  t.on_leader_end(offset(20));
  t.on_fetch(2, offset(20), offset(20), now());
  EXPECT_EQ(t.high_watermark(), offset(10));  // 3 still counts
  // 3 went silent: the leader withdraws by proposing the store's ISR.
  auto p = t.propose_isr(now(), lag_max);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, (ids{1, 2}));
  EXPECT_EQ(t.high_watermark(), offset(10));
  // The withdrawal is written: 3 no longer counts.
  EXPECT_TRUE(t.set_isr({1, 2, 3}, {1, 2}, offset(20), now()));
  EXPECT_EQ(t.high_watermark(), offset(20));
  EXPECT_FALSE(t.propose_isr(now(), lag_max));
}

// The other outcome of the same race: the old proposal is written first.
// 3 joins the ISR at its log end, and the high watermark never passed it.
TEST_F(TrackerTest, AnAdditionWrittenAfterTheFollowerLaggedFindsTheHighWatermarkAtIt) {
  lead(offset(10), offset(10), {1, 2});
  t.on_fetch(2, offset(10), offset(10), now());
  t.on_fetch(3, offset(10), offset(10), now());
  ASSERT_TRUE(t.propose_isr(now(), lag_max));  // 3 pending
  clk.advance_ms(lag_max + 1);
  t.on_leader_end(offset(20));
  t.on_fetch(2, offset(20), offset(20), now());
  t.set_isr({1, 2, 3}, {1, 2, 3}, offset(20), now());
  EXPECT_EQ(t.high_watermark(), offset(10));
  auto p = t.propose_isr(now(), lag_max);  // and now it lags in the ISR
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, (ids{1, 2}));
}

TEST_F(TrackerTest, UnassignedReplicaChangesNothing) {
  lead(offset(10), offset(10), {1});
  EXPECT_FALSE(t.on_fetch(7, offset(10), offset(10), now()));
  EXPECT_FALSE(t.propose_isr(now(), lag_max));
}

TEST_F(TrackerTest, NoFollowerIsRemovedBeforeItHadTheAllowanceToFetch) {
  lead(offset(10), offset(0));
  clk.advance_ms(lag_max);
  EXPECT_FALSE(t.propose_isr(now(), lag_max));
  clk.advance_ms(1);
  auto p = t.propose_isr(now(), lag_max);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, (ids{1}));
}

}  // namespace
}  // namespace sluice::cluster
