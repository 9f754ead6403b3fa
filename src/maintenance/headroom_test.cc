#include "maintenance/headroom.h"

#include <gtest/gtest.h>

namespace sluice::cluster {
namespace {

constexpr int64_t now = 1'700'000'000'000;

TEST(Headroom, ByTimeFromTheSegmentsLargestTimestamp) {
  retention_policy p{true, 3'600'000, -1};
  EXPECT_EQ(retention_headroom_ms(p, {now - 600'000, 5000}, now, 100.0), 3'000'000);
  // Past due: 0, not negative.
  EXPECT_EQ(retention_headroom_ms(p, {now - 7'200'000, 5000}, now, 100.0), 0);
  // Unknown timestamp: time retention cannot be judged, and nothing else applies.
  EXPECT_EQ(retention_headroom_ms(p, {-1, 5000}, now, 100.0), std::nullopt);
}

TEST(Headroom, InfiniteWithoutLimitsOrWithoutDeletion) {
  EXPECT_EQ(retention_headroom_ms({true, -1, -1}, {now, 0}, now, 1e6), std::nullopt);
  EXPECT_EQ(retention_headroom_ms({false, 1000, 1000}, {now - 5000, 5000}, now, 1e6), std::nullopt);
}

TEST(Headroom, BySizeAtTheWriteRate) {
  retention_policy p{true, -1, 10'000};
  // 6,000 bytes follow the segment: 4,000 more at 2,000 B/s is 2 s.
  EXPECT_EQ(retention_headroom_ms(p, {now, 6000}, now, 2000.0), 2000);
  // Nothing written: size never gets there.
  EXPECT_EQ(retention_headroom_ms(p, {now, 6000}, now, 0.0), std::nullopt);
  // Already over: due now.
  EXPECT_EQ(retention_headroom_ms(p, {now, 12'000}, now, 0.0), 0);
  // Unknown layout: size cannot be judged.
  EXPECT_EQ(retention_headroom_ms(p, {now, -1}, now, 2000.0), std::nullopt);
}

TEST(Headroom, TheSoonerOfTimeAndSize) {
  retention_policy p{true, 60'000, 10'000};
  EXPECT_EQ(retention_headroom_ms(p, {now - 10'000, 6000}, now, 2000.0), 2000);
  EXPECT_EQ(retention_headroom_ms(p, {now - 59'000, 6000}, now, 2000.0), 1000);
  EXPECT_EQ(retention_headroom_ms(p, {now - 59'000, 6000}, now, 0.0), 1000);
}

TEST(Headroom, ProjectedBytes) {
  EXPECT_EQ(retention_projected_bytes({true, 10'000, -1}, 500.0), 5000.0);
  EXPECT_EQ(retention_projected_bytes({true, 10'000, 3000}, 500.0), 3000.0);
  EXPECT_EQ(retention_projected_bytes({true, -1, 3000}, 500.0), 3000.0);
  EXPECT_EQ(retention_projected_bytes({true, -1, -1}, 500.0), std::nullopt);
  EXPECT_EQ(retention_projected_bytes({false, 10'000, 3000}, 500.0), std::nullopt);
  EXPECT_EQ(retention_projected_bytes({true, 10'000, -1}, 0.0), 0.0);
}

}  // namespace
}  // namespace sluice::cluster
