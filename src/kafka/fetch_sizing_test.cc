#include "kafka/fetch_sizing.h"

#include <gtest/gtest.h>

namespace sluice::kafka {
namespace {

using std::chrono::microseconds;
constexpr uint64_t mib = 1 << 20;
constexpr int64_t per_ms = limits::default_fetch_bytes_per_rtt_ms;  // 10 MiB
constexpr int32_t ask = 50 * (1 << 20);                             // librdkafka's fetch.max.bytes
constexpr int64_t broker = limits::default_fetch_max_bytes;         // 55 MiB

TEST(FetchSizing, KafkasRuleWhenSizingIsOffOrTheRttUnknown) {
  EXPECT_EQ(fetch_answer_max_bytes(ask, 1, broker, 0, microseconds(20)),
            static_cast<uint64_t>(ask));
  EXPECT_EQ(fetch_answer_max_bytes(ask, 1, broker, per_ms, std::nullopt),
            static_cast<uint64_t>(ask));
  EXPECT_EQ(fetch_answer_max_bytes(ask, 1, 4096, 0, std::nullopt), 4096u);
  EXPECT_EQ(fetch_answer_max_bytes(-5, 1, broker, 0, std::nullopt), 0u);
}

TEST(FetchSizing, ShortPathsGetTheFloor) {
  // Loopback (1-20 us) and a LAN (100 us): 1 MiB.
  EXPECT_EQ(fetch_answer_max_bytes(ask, 1, broker, per_ms, microseconds(0)), mib);
  EXPECT_EQ(fetch_answer_max_bytes(ask, 1, broker, per_ms, microseconds(20)), mib);
  EXPECT_EQ(fetch_answer_max_bytes(ask, 1, broker, per_ms, microseconds(100)), mib);
}

TEST(FetchSizing, LongerPathsGetMoreUpToTheOtherLimits) {
  // 2 ms: 20 MiB.
  EXPECT_EQ(fetch_answer_max_bytes(ask, 1, broker, per_ms, microseconds(2000)), 20 * mib);
  // 10 ms would be 100 MiB: the request's 50 MiB and the broker's 55 MiB win.
  EXPECT_EQ(fetch_answer_max_bytes(ask, 1, broker, per_ms, microseconds(10000)),
            static_cast<uint64_t>(ask));
  EXPECT_EQ(fetch_answer_max_bytes(ask, 1, 30 * mib, per_ms, microseconds(10000)), 30 * mib);
  // No overflow at the extremes.
  EXPECT_EQ(fetch_answer_max_bytes(ask, 1, broker, limits::max_fetch_bytes_per_rtt_ms,
                                   microseconds(std::numeric_limits<int64_t>::max())),
            static_cast<uint64_t>(ask));
}

TEST(FetchSizing, NeverAboveWhatTheRequestOrBrokerAllows) {
  // A request for 64 KiB gets 64 KiB, though the floor is 1 MiB.
  EXPECT_EQ(fetch_answer_max_bytes(64 << 10, 1, broker, per_ms, microseconds(20)), 64u << 10);
  EXPECT_EQ(fetch_answer_max_bytes(ask, 1, 2048, per_ms, microseconds(20)), 2048u);
}

TEST(FetchSizing, MinBytesAboveTheSizeRaisesIt) {
  EXPECT_EQ(fetch_answer_max_bytes(ask, 3 * (1 << 20), broker, per_ms, microseconds(20)), 3 * mib);
  // Still not above the request's own max_bytes.
  EXPECT_EQ(fetch_answer_max_bytes(2 << 20, 3 * (1 << 20), broker, per_ms, microseconds(20)),
            2 * mib);
}

}  // namespace
}  // namespace sluice::kafka
