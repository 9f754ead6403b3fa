#pragma once

// The consumer group "consumer" protocol embedded in JoinGroup metadata
// (subscription) and SyncGroup assignments: an int16 version followed by
// the struct (schema/consumer_protocol.schema). Kafka's rule for versions
// newer than we know: read them as our highest version and ignore the bytes
// after it, since each version only appends fields. An empty assignment
// (zero bytes) is a member that got nothing, as the Java client sends it.

#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"
#include "protocol/messages.h"

namespace sluice::protocol {

result<consumer_protocol_subscription> decode_subscription(std::span<const uint8_t> bytes,
                                                           int16_t* version = nullptr);
std::vector<uint8_t> encode_subscription(const consumer_protocol_subscription& s, int16_t version);

result<consumer_protocol_assignment> decode_assignment(std::span<const uint8_t> bytes, int16_t* version = nullptr);
std::vector<uint8_t> encode_assignment(const consumer_protocol_assignment& a, int16_t version);

}  // namespace sluice::protocol
