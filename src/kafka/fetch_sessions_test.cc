// Fetch sessions are bounded in partitions (issue 31, item 11): one
// session, and all sessions of the cache together.

#include "kafka/fetch_sessions.h"

#include <gtest/gtest.h>

namespace sluice::kafka {
namespace {

bool add(fetch_session& s, int32_t partition) { return s.upsert({}, "t", partition, 0, 1 << 20); }

TEST(FetchSessions, ASessionHoldsAtMostItsLimitOfPartitions) {
  fetch_session_cache cache(10, limits::max_fetch_session_partitions * 2);
  auto s = cache.create();
  ASSERT_NE(s, nullptr);
  for (size_t p = 0; p < limits::max_fetch_session_partitions; ++p) ASSERT_TRUE(add(*s, static_cast<int32_t>(p)));
  EXPECT_FALSE(add(*s, -1));  // a new one past the limit
  EXPECT_TRUE(add(*s, 0));    // an update of one it holds
  EXPECT_EQ(s->partitions.size(), limits::max_fetch_session_partitions);
  s->forget({}, "t", 0);
  EXPECT_TRUE(add(*s, -1));
}

TEST(FetchSessions, AllSessionsTogetherStayWithinTheCachesBudget) {
  fetch_session_cache cache(10, 5);
  auto a = cache.create(), b = cache.create();
  for (int32_t p = 0; p < 3; ++p) ASSERT_TRUE(add(*a, p));
  EXPECT_TRUE(add(*b, 0));
  EXPECT_TRUE(add(*b, 1));
  EXPECT_FALSE(add(*b, 2));  // 5 held in all
  EXPECT_EQ(cache.partitions(), 5u);
  a->forget({}, "t", 0);
  EXPECT_EQ(cache.partitions(), 4u);
  EXPECT_TRUE(add(*b, 2));
  // An ended session gives its partitions back once nobody holds it.
  cache.remove(a->id);
  a.reset();
  EXPECT_EQ(cache.partitions(), 3u);
  // And so does an evicted one.
  fetch_session_cache small(1, 5);
  auto c = small.create();
  ASSERT_TRUE(add(*c, 0));
  c.reset();
  auto d = small.create();  // evicts c
  EXPECT_EQ(small.partitions(), 0u);
}

}  // namespace
}  // namespace sluice::kafka
