#include "raw_limits.h"

#include <gtest/gtest.h>

namespace sluice::bench {
namespace {

constexpr int64_t ms = 1'000'000;

TEST(GroupCommitFloorTest, AStallWeighsByTheMessagesBehindIt) {
  // A 10 ms round, then two of 2 ms; a message every 1 ms from the first
  // start to the last start.
  const std::vector<fsync_round> rounds{{0, 10 * ms}, {10 * ms, 12 * ms}, {12 * ms, 14 * ms}};
  const auto got = group_commit_floor_ms(rounds, 1 * ms);
  // t=0 goes into the first round (ends at 10); t=1..10 wait for the
  // second (ends at 12); t=11 and 12 for the third (ends at 14).
  const std::vector<double> want{2, 2, 3, 3, 4, 5, 6, 7, 8, 9, 10, 10, 11};
  EXPECT_EQ(got, want);
}

TEST(GroupCommitFloorTest, AMessageInAGapWaitsForTheNextRound) {
  // Rounds with idle time between them: t=0 goes into the first (ends at
  // 4); t=5, after it ended, into the second, which starts at 8 and ends at
  // 9; t=10 is past the last start.
  const std::vector<fsync_round> rounds{{0, 4 * ms}, {8 * ms, 9 * ms}};
  EXPECT_EQ(group_commit_floor_ms(rounds, 5 * ms), (std::vector<double>{4, 4}));
}

TEST(GroupCommitFloorTest, ADenseStreamIsSampledWithinTheBound) {
  // 10 s of 2 ms rounds at one message per nanosecond would be 1e10
  // arrivals; the floor takes at most max_floor_arrivals of them, and their
  // latencies stay within a round and a half (at most 4 ms here).
  std::vector<fsync_round> rounds;
  for (int64_t t = 0; t < 10'000 * ms; t += 2 * ms) rounds.push_back({t, t + 2 * ms});
  const auto got = group_commit_floor_ms(rounds, 1);
  EXPECT_LE(got.size(), static_cast<size_t>(max_floor_arrivals) + 1);
  EXPECT_GT(got.size(), static_cast<size_t>(max_floor_arrivals) / 2);
  EXPECT_GE(got.front(), 2.0);
  EXPECT_LE(got.back(), 4.0);
}

TEST(GroupCommitFloorTest, TooFewRoundsOrNoRateGiveNothing) {
  EXPECT_TRUE(group_commit_floor_ms({}, ms).empty());
  EXPECT_TRUE(group_commit_floor_ms({{0, ms}}, ms).empty());
  EXPECT_TRUE(group_commit_floor_ms({{0, ms}, {ms, 2 * ms}}, 0).empty());
}

}  // namespace
}  // namespace sluice::bench
