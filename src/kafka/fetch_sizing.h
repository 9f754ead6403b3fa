#pragma once
// How many bytes of records one Fetch answer may carry.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>

#include "base/limits.h"

namespace sluice::kafka {

// Kafka's rule: the request's max_bytes and the broker's fetch.max.bytes,
// whichever is smaller (a negative max_bytes counts as 0). Sluice adds one:
// with bytes_per_rtt_ms > 0 (sluice.fetch.bytes.per.rtt.ms) and the
// connection's minimum round trip known, at most min_rtt × bytes_per_rtt_ms,
// though never under limits::fetch_rtt_sized_floor_bytes nor under the
// request's min_bytes (an answer kept below min_bytes would only wait out
// max_wait_ms). The sizing lowers the limit, never raises it. The first
// batch of an answer may exceed whatever this returns (KIP-74).
inline uint64_t fetch_answer_max_bytes(int32_t request_max_bytes, int32_t request_min_bytes,
                                       int64_t broker_fetch_max_bytes, int64_t bytes_per_rtt_ms,
                                       std::optional<std::chrono::microseconds> min_rtt) {
  uint64_t cap = std::min(static_cast<uint64_t>(std::max<int64_t>(broker_fetch_max_bytes, 0)),
                          static_cast<uint64_t>(std::max<int32_t>(request_max_bytes, 0)));
  if (bytes_per_rtt_ms <= 0 || !min_rtt || min_rtt->count() < 0) return cap;
  const auto per_ms = static_cast<uint64_t>(bytes_per_rtt_ms);
  const auto us = static_cast<uint64_t>(min_rtt->count());
  constexpr uint64_t most = std::numeric_limits<uint64_t>::max();
  uint64_t sized = us != 0 && per_ms > most / us ? most : per_ms * us / 1000;
  sized = std::max({sized, static_cast<uint64_t>(limits::fetch_rtt_sized_floor_bytes),
                    static_cast<uint64_t>(std::max<int32_t>(request_min_bytes, 0))});
  return std::min(cap, sized);
}

}  // namespace sluice::kafka
