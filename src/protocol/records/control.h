#pragma once

// Control batches: the transaction markers a coordinator has the leaders
// write at the end of a transaction (docs/log_format.md, "Transaction
// markers"). A marker is a batch with the transactional and control
// attribute bits, the producer's id and epoch, no sequence (-1) and one
// uncompressed record:
//   key:   version int16 (0) | type int16 (0 ABORT, 1 COMMIT)
//   value: version int16 (0) | coordinator_epoch int32
// Kafka keeps a third control type (LEADER_CHANGE, 2) for its own quorum;
// Sluice never writes it and a marker parser refuses it.

#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"

namespace sluice::protocol::records {

struct txn_marker {
  bool commit = false;
  int32_t coordinator_epoch = 0;
  bool operator==(const txn_marker&) const = default;
};

// A whole marker batch at base offset 0 (the log assigns the offset) with a
// correct CRC.
std::vector<uint8_t> build_marker_batch(int64_t producer_id, int16_t producer_epoch, const txn_marker& marker,
                                        int64_t timestamp_ms);

// The marker a whole control batch holds. errc::invalid_txn_marker for a
// batch that is not a control batch, holds other than one record, is
// compressed, or whose key or value is not a COMMIT/ABORT marker's.
result<txn_marker> parse_marker(std::span<const uint8_t> batch);
inline result<txn_marker> parse_marker(std::span<const std::byte> batch) {
  return parse_marker(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(batch.data()), batch.size()));
}

}  // namespace sluice::protocol::records
