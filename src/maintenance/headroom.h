#pragma once

// Retention headroom and the disk use retention leads to: the one
// definition of both, shared by the broker's /metrics
// (broker/retention_watch.h) and `sluice group lag` (cli/group_command.cc).
// docs/operations.md explains the figures to the operator; change them here
// and there together.
//
// Header-only and free of the broker's types so the command-line tools,
// which see the broker only through the Kafka protocol, compute with the
// same code. Pure functions: thread-safe.

#include <algorithm>
#include <cstdint>
#include <optional>

namespace sluice::cluster {

// The part of a topic's config that decides deletion.
struct retention_policy {
  bool deletes = true;           // cleanup.policy includes delete
  int64_t retention_ms = -1;     // -1: no time limit
  int64_t retention_bytes = -1;  // -1: no size limit
};

// Where the oldest message a consumer group has not consumed sits, as far
// as the caller knows it.
struct unconsumed_position {
  // The largest record timestamp of the segment holding the message; -1
  // when unknown (time retention then cannot be judged).
  int64_t segment_max_timestamp_ms = -1;
  // Bytes of the partition's segments after that segment; -1 when unknown
  // (size retention then cannot be judged).
  int64_t bytes_after_segment = -1;
};

// Milliseconds before retention may delete the segment holding the oldest
// unconsumed message, or nullopt for never (no limit applies, or size is the
// only limit and nothing is being written). Retention deletes whole closed
// segments, so:
//   by time: segment_max_timestamp + retention.ms - now;
//   by size: the segment goes once the segments after it reach
//            retention.bytes, so (retention.bytes - bytes_after_segment)
//            at the current write rate;
// the smaller of the two, never below 0 (0: due at the next retention
// check). A segment still active is deleted only after it rolls, so for it
// this is a lower bound. `write_bytes_per_s` is the partition's recent
// write rate.
inline std::optional<int64_t> retention_headroom_ms(const retention_policy& p,
                                                    const unconsumed_position& u, int64_t now_ms,
                                                    double write_bytes_per_s) {
  if (!p.deletes) return std::nullopt;
  std::optional<int64_t> out;
  auto take = [&out](int64_t ms) { out = std::max<int64_t>(0, out ? std::min(*out, ms) : ms); };
  if (p.retention_ms >= 0 && u.segment_max_timestamp_ms >= 0) {
    take(u.segment_max_timestamp_ms + p.retention_ms - now_ms);
  }
  if (p.retention_bytes >= 0 && u.bytes_after_segment >= 0) {
    const int64_t room = p.retention_bytes - u.bytes_after_segment;
    if (room <= 0) {
      take(0);
    } else if (write_bytes_per_s > 0) {
      const double ms = static_cast<double>(room) * 1000.0 / write_bytes_per_s;
      take(ms >= 9e18 ? INT64_MAX : static_cast<int64_t>(ms));
    }
  }
  return out;
}

// Bytes retention will hold for a partition written at `write_bytes_per_s`:
// the rate times retention.ms, capped by retention.bytes when set; nullopt
// when nothing bounds it (no deletion, or neither limit set).
inline std::optional<double> retention_projected_bytes(const retention_policy& p,
                                                       double write_bytes_per_s) {
  if (!p.deletes) return std::nullopt;
  std::optional<double> out;
  if (p.retention_ms >= 0)
    out = std::max(0.0, write_bytes_per_s) * static_cast<double>(p.retention_ms) / 1000.0;
  if (p.retention_bytes >= 0) {
    const double cap = static_cast<double>(p.retention_bytes);
    out = out ? std::min(*out, cap) : cap;
  }
  return out;
}

}  // namespace sluice::cluster
