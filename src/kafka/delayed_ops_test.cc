#include "kafka/delayed_ops.h"

#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace sluice::kafka {
namespace {

// A long poll's time runs out on the broker's clock: a fetch parked with
// max_wait_ms answers when the clock passes it, not when real time does.
TEST(DelayedOps, AWaitEndsWhenItsClockPassesTheDelay) {
  manual_clock clk;
  delayed_ops ops(clk);
  std::promise<bool> fired;
  auto result = fired.get_future();
  auto t = ops.after(std::chrono::milliseconds(500), [&](bool cancelled) { fired.set_value(cancelled); });
  clk.advance_ms(499);
  // Let the delayed-ops thread look at the clock: a task posted after the
  // timer's arming runs once that look is done.
  std::promise<void> looked;
  ops.post([&] { looked.set_value(); });
  looked.get_future().wait();
  EXPECT_NE(result.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  clk.advance_ms(1);
  ASSERT_EQ(result.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_FALSE(result.get());  // timed out, not cancelled
}

TEST(DelayedOps, CancelAnswersAtOnceAndOnlyOnce) {
  manual_clock clk;
  delayed_ops ops(clk);
  std::atomic<int> calls{0};
  std::promise<bool> fired;
  auto result = fired.get_future();
  auto t = ops.after(std::chrono::hours(1), [&](bool cancelled) {
    if (calls++ == 0) fired.set_value(cancelled);
  });
  t->cancel();
  ASSERT_EQ(result.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(result.get());
  clk.advance_ms(2 * 3600 * 1000);
  t->cancel();
  ops.stop();  // runs whatever is queued
  EXPECT_EQ(calls.load(), 1);
}

TEST(DelayedOps, DrainFiresPendingAndLaterTimersCancelled) {
  manual_clock clk;
  delayed_ops ops(clk);
  std::promise<bool> before, after;
  auto b = before.get_future(), a = after.get_future();
  auto t1 = ops.after(std::chrono::hours(1), [&](bool c) { before.set_value(c); });
  ops.drain();
  auto t2 = ops.after(std::chrono::hours(1), [&](bool c) { after.set_value(c); });
  ASSERT_EQ(b.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  ASSERT_EQ(a.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(b.get());
  EXPECT_TRUE(a.get());
}

// A cancel runs the function on the cancelling thread, at once: the
// delayed-ops thread is not woken for it.
TEST(DelayedOps, CancelRunsOnTheCancellingThread) {
  manual_clock clk;
  delayed_ops ops(clk);
  std::thread::id ran_on;
  bool cancelled = false;
  auto t = ops.after(std::chrono::hours(1), [&](bool c) {
    ran_on = std::this_thread::get_id();
    cancelled = c;
  });
  t->cancel();
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_TRUE(cancelled);
}

// Timers armed out of order fire in the order of their deadlines, and one
// whose owner dropped it without cancelling never fires.
TEST(DelayedOps, TimersFireByDeadlineAndDroppedOnesNever) {
  manual_clock clk;
  delayed_ops ops(clk);
  std::mutex mu;
  std::vector<int> fired;
  std::promise<void> last;
  auto note = [&](int id) {
    std::lock_guard g(mu);
    fired.push_back(id);
  };
  auto t3 = ops.after(std::chrono::milliseconds(300), [&](bool) {
    note(3);
    last.set_value();
  });
  auto t1 = ops.after(std::chrono::milliseconds(100), [&](bool) { note(1); });
  auto dropped = ops.after(std::chrono::milliseconds(150), [&](bool) { note(9); });
  dropped.reset();
  auto t2 = ops.after(std::chrono::milliseconds(200), [&](bool) { note(2); });
  clk.advance_ms(150);
  clk.advance_ms(150);
  ASSERT_EQ(last.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  std::lock_guard g(mu);
  EXPECT_EQ(fired, (std::vector<int>{1, 2, 3}));
}

}  // namespace
}  // namespace sluice::kafka
