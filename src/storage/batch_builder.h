#pragma once

// Builds valid Kafka RecordBatch v2 bytes (uncompressed, key-less records)
// for tests, benchmarks and tools. Not used on the broker's data path, which
// stores the bytes producers send.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sluice::storage {

struct batch_spec {
  int32_t records = 1;
  size_t value_bytes = 100;     // per record
  int64_t base_timestamp = 1'700'000'000'000;
  int64_t timestamp_step = 1;   // record i has base_timestamp + i * timestamp_step
  uint32_t seed = 0;            // fills the values deterministically
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  int32_t base_sequence = -1;
  bool transactional = false;  // the transactional attribute bit
};

// One batch with base offset 0 and partition leader epoch -1, as a producer
// sends it. Deterministic in `spec`.
std::vector<std::byte> build_batch(const batch_spec& spec);

}  // namespace sluice::storage
