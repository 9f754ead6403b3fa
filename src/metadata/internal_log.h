#pragma once

// A coordinator's internal topic (__transaction_state, __share_group_state)
// as its coordinator uses it: one record appended per write, as one batch
// (magic 2, no compression, producer id -1) with acks=all, and a
// partition's records read back in log order to rebuild the coordinator's
// state on a load.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"

namespace sluice::cluster {

class partition_manager;

class internal_log {
 public:
  internal_log(partition_manager& partitions, sluice::clock& clk, std::string topic)
      : partitions_(partitions), clk_(clk), topic_(std::move(topic)) {}

  const std::string& topic() const { return topic_; }

  // Appends the record (`value` nullopt: a tombstone) to partition `p`.
  // `done` runs once: at once on a refused append (NOT_COORDINATOR when the
  // partition is not here, the partition's code when the ISR is short or
  // the append fails), else when the acks=all rule has answered (on
  // whichever thread that is).
  void append(int32_t p, const std::vector<uint8_t>& key, const std::optional<std::vector<uint8_t>>& value,
              std::function<void(status)> done);

  // Every keyed record of partition `p` in log order, to `fn(key, value)`
  // (value nullopt: a tombstone); control batches are skipped. Nothing
  // when the partition is not here.
  status read(int32_t p,
              const std::function<void(std::span<const uint8_t>, std::optional<std::span<const uint8_t>>)>& fn,
              const std::function<bool()>& stopping);

 private:
  partition_manager& partitions_;
  sluice::clock& clk_;
  std::string topic_;
};

}  // namespace sluice::cluster
