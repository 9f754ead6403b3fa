#include "maintenance/retention.h"

#include <gtest/gtest.h>

namespace sluice::cluster {
namespace {

// A high watermark past every segment: all of them committed.
const offset kAll(INT64_MAX);

std::vector<storage::segment_info> segs(std::initializer_list<std::tuple<int64_t, int64_t, uint64_t, int64_t>> l) {
  std::vector<storage::segment_info> v;
  for (auto [base, next, size, ts] : l) v.push_back({offset(base), offset(next), size, ts, ts});
  return v;
}

TEST(Retention, ASegmentWithoutTimestampsGoesByItsFileTime) {
  // Records that carry no timestamp (-1) leave max_timestamp -1; the
  // segment's file time stands in, as in Kafka. Before, such a segment was
  // deleted on the first pass whatever retention.ms said.
  std::vector<storage::segment_info> s = {{offset(0), offset(50), 100, -1, 7000},
                                          {offset(50), offset(60), 100, -1, 7500}};
  EXPECT_FALSE(retention_cutoff(s, offset(0), kAll, 8000, 4000, -1).has_value());
  EXPECT_EQ(retention_cutoff(s, offset(0), kAll, 12000, 4000, -1), offset(50));
  // A file time that could not be read keeps the segment.
  s[0].largest_time_ms = -1;
  EXPECT_FALSE(retention_cutoff(s, offset(0), kAll, 1'000'000, 4000, -1).has_value());
}

TEST(Retention, ActiveSegmentIsNeverDeleted) {
  auto s = segs({{0, 10, 1000, 100}});
  EXPECT_FALSE(retention_cutoff(s, offset(0), kAll, 1'000'000, 1, 0).has_value());
}

TEST(Retention, ByTimeStopsAtFirstYoungSegment) {
  auto s = segs({{0, 10, 100, 1000}, {10, 20, 100, 5000}, {20, 30, 100, 2000}, {30, 35, 50, 9000}});
  // Retain 4 s at now = 8000: segments with max ts < 4000 may go, but only
  // from the start: the second segment (5000) stops it.
  auto cut = retention_cutoff(s, offset(0), kAll, 8000, 4000, -1);
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(*cut, offset(10));
  EXPECT_FALSE(retention_cutoff(s, offset(0), kAll, 8000, -1, -1).has_value());
}

TEST(Retention, BySizeKeepsAtLeastTheLimit) {
  auto s = segs({{0, 10, 100, 1}, {10, 20, 100, 1}, {20, 30, 100, 1}, {30, 35, 50, 1}});
  // 350 bytes in all; keep at least 200: drop the first segment (-> 250),
  // the second would leave 150 < 200.
  auto cut = retention_cutoff(s, offset(0), kAll, 0, -1, 200);
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(*cut, offset(10));
  // Keep 0 bytes: every closed segment goes, never the active one.
  EXPECT_EQ(*retention_cutoff(s, offset(0), kAll, 0, -1, 0), offset(30));
}

TEST(Retention, NothingBelowTheCurrentStart) {
  auto s = segs({{0, 10, 100, 1}, {10, 20, 100, 1}});
  EXPECT_FALSE(retention_cutoff(s, offset(10), kAll, 1000, 1, -1).has_value());
}

TEST(Retention, NeverPastTheHighWatermark) {
  // Every closed segment is old enough and over the size limit, but the
  // high watermark sits inside the second: only the first, wholly below
  // it, may go. A leader whose follower still fetches the second segment
  // keeps it.
  auto s = segs({{0, 10, 100, 1}, {10, 20, 100, 1}, {20, 30, 100, 1}, {30, 35, 50, 1}});
  EXPECT_EQ(retention_cutoff(s, offset(0), offset(15), 1'000'000, 1, -1), offset(10));
  EXPECT_EQ(retention_cutoff(s, offset(0), offset(15), 0, -1, 0), offset(10));
  // A high watermark at a segment's end lets it go.
  EXPECT_EQ(retention_cutoff(s, offset(0), offset(20), 1'000'000, 1, -1), offset(20));
  // Nothing committed past the first segment's end: nothing goes.
  EXPECT_FALSE(retention_cutoff(s, offset(0), offset(9), 1'000'000, 1, 0).has_value());
}

}  // namespace
}  // namespace sluice::cluster
