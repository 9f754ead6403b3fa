#include "base/clock.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(ClockTest, SleepUntilADeadlineOnTheRealClockReachesIt) {
  const clock& c = clock::system();
  const int64_t now = c.monotonic_ms();
  // A deadline within a day is slept to in one go; a later one in day-long steps.
  EXPECT_GE(c.sleep_ms_until(now + 60'000), 59'000);
  EXPECT_LE(c.sleep_ms_until(now + 60'000), 60'000);
  EXPECT_EQ(c.sleep_ms_until(now + 10 * limits::max_clock_sleep_ms), limits::max_clock_sleep_ms);
  EXPECT_EQ(c.sleep_ms_until(now - 5), 0);
}

TEST(ClockTest, WaitersOnAManualClockLookAgainSoon) {
  manual_clock c;
  // However far the deadline, a waiter reads the clock again within the
  // poll interval, so an advance is noticed.
  EXPECT_EQ(c.sleep_ms_until(c.monotonic_ms() + 60'000), limits::manual_clock_poll_ms);
  c.advance_ms(60'000);
  EXPECT_EQ(c.sleep_ms_until(60'000), 0);
  EXPECT_EQ(c.monotonic_ns(), 60'000'000'000);
}

TEST(ClockTest, DeadlinePassesWhenItsClockDoes) {
  manual_clock c;
  deadline d(100, c);
  EXPECT_FALSE(d.passed());
  EXPECT_EQ(d.left_ms(), 100);
  c.advance_ms(99);
  EXPECT_FALSE(d.passed());
  EXPECT_EQ(d.left_ms(), 1);
  c.advance_ms(1);
  EXPECT_TRUE(d.passed());
  EXPECT_EQ(d.left_ms(), 0);
}

}  // namespace
}  // namespace sluice
