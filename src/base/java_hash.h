#pragma once

// Java's String.hashCode over a UTF-8 string, and the partition Kafka
// places a key in by it. Kafka's coordinators (groups in
// __consumer_offsets, transactional ids in __transaction_state) pick a
// key's partition as Utils.abs(key.hashCode()) % partitions; a Kafka client
// or tool finds the coordinator by the same rule, so ours must agree bit
// for bit (docs/group_records.md has the rule written out).

#include <cstdint>
#include <string_view>

namespace sluice {

// Java's String.hashCode of `s` read as UTF-8: h = 31*h + unit over the
// UTF-16 code units, 32-bit wrap-around. Bytes that are not valid UTF-8
// count as one unit each.
int32_t java_string_hash(std::string_view s);

// Kafka's Utils.abs(java_string_hash(key)) % partitions, where
// abs(INT32_MIN) is 0. `partitions` > 0.
int32_t java_hash_partition(std::string_view key, int32_t partitions);

}  // namespace sluice
