#include "kafka/share_sessions.h"

#include <gtest/gtest.h>

#include "base/limits.h"

namespace sluice::kafka {
namespace {

share_tp tp(uint8_t t, int32_t p) {
  sluice::topic_id id{};
  id[15] = t;
  return {id, p};
}

TEST(ShareSessions, EpochsMoveOnByOneAndAMismatchIsRefused) {
  share_session_cache c(1000);
  auto o = c.fetch("g", "m", 0, {tp(1, 0), tp(1, 1)}, {}, 0);
  ASSERT_EQ(o.error, error_code::none);
  EXPECT_EQ(o.partitions.size(), 2u);
  EXPECT_TRUE(o.released.empty());
  EXPECT_EQ(c.fetch("g", "m", 2, {}, {}, 0).error, error_code::invalid_share_session_epoch);
  o = c.fetch("g", "m", 1, {tp(2, 0)}, {tp(1, 1)}, 0);
  ASSERT_EQ(o.error, error_code::none);
  EXPECT_EQ(o.partitions, (std::vector<share_tp>{tp(1, 0), tp(2, 0)}));
  ASSERT_EQ(o.released.size(), 1u);
  EXPECT_EQ(o.released[0].second, (std::vector<share_tp>{tp(1, 1)}));
  EXPECT_EQ(c.acknowledge("g", "m", 2, 0).error, error_code::none);
  EXPECT_EQ(c.fetch("g", "m", 3, {}, {}, 0).error, error_code::none);
  EXPECT_EQ(c.acknowledge("g", "m", 0, 0).error, error_code::invalid_share_session_epoch);
  EXPECT_EQ(c.fetch("g", "other", 1, {}, {}, 0).error, error_code::share_session_not_found);
  EXPECT_EQ(c.acknowledge("g", "other", 1, 0).error, error_code::share_session_not_found);
}

TEST(ShareSessions, ReopeningReplacesAndClosingReleases) {
  share_session_cache c(1000);
  (void)c.fetch("g", "m", 0, {tp(1, 0)}, {}, 0);
  auto o = c.fetch("g", "m", 0, {tp(1, 1)}, {}, 0);
  ASSERT_EQ(o.error, error_code::none);
  ASSERT_EQ(o.released.size(), 1u);
  EXPECT_EQ(o.released[0].second, (std::vector<share_tp>{tp(1, 0)}));
  o = c.acknowledge("g", "m", -1, 0);
  ASSERT_EQ(o.error, error_code::none);
  EXPECT_EQ(o.released[0].second, (std::vector<share_tp>{tp(1, 1)}));
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.fetch("g", "m", -1, {}, {}, 0).error, error_code::share_session_not_found);
}

TEST(ShareSessions, TheCacheIsBoundedAndEvictsOnlyIdleSessions) {
  share_session_cache c(1000);
  for (size_t i = 0; i < limits::max_share_sessions; ++i)
    ASSERT_EQ(c.fetch("g", "m" + std::to_string(i), 0, {tp(1, 0)}, {}, static_cast<int64_t>(i)).error,
              error_code::none);
  EXPECT_EQ(c.fetch("g", "new", 0, {}, {}, 500).error, error_code::share_session_limit_reached);
  auto o = c.fetch("g", "new", 0, {}, {}, 1000);
  ASSERT_EQ(o.error, error_code::none);
  ASSERT_EQ(o.released.size(), 1u);
  EXPECT_EQ(o.released[0].first.second, "m0");  // the least recently used
  EXPECT_EQ(c.size(), limits::max_share_sessions);
}

}  // namespace
}  // namespace sluice::kafka
