#pragma once

// CRC-32C (Castagnoli), the checksum of Kafka's RecordBatch v2, computed by
// ISA-L. `crc32c_extend` continues a running checksum so a range can be fed
// in pieces: crc32c(ab) == crc32c_extend(crc32c(a), b).

#include <cstddef>
#include <cstdint>

namespace sluice {

uint32_t crc32c(const void* data, size_t size);
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);

}  // namespace sluice
