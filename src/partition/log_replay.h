#pragma once

// Reading a partition back in log order, batch by batch, as the
// coordinators rebuild their state from their internal topics
// (__consumer_offsets, __transaction_state): from the log start offset to
// the log end offset seen when the read began.

#include <cstdint>
#include <functional>
#include <span>

#include "base/result.h"
#include "protocol/records/record_batch.h"

namespace sluice::cluster {

class partition;

// Calls `fn(bytes, decoded)` for every batch of `part` in offset order, control
// batches included, reading at most `read_bytes` at a time; `fn` answers
// false to stop early. Stops with errc::shutting_down as soon as `stopping`
// answers true (checked between reads). A read that fails, bytes that do
// not split into batches or a batch that does not decode end the replay
// with that error, naming the offset: the rest of the partition cannot be
// trusted to follow.
status replay_in_log_order(partition& part, size_t read_bytes, const std::function<bool()>& stopping,
                           const std::function<bool(std::span<const uint8_t> bytes,
                                                    const protocol::records::decoded_batch& batch)>& fn);

}  // namespace sluice::cluster
