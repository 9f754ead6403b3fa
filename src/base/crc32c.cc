#include "base/crc32c.h"

#include <isa-l/crc.h>

namespace sluice {

// ISA-L's crc32_iscsi neither pre- nor post-inverts, so the standard CRC-32C
// is ~crc32_iscsi(p, n, ~0u), and extending a finished value re-inverts it.
uint32_t crc32c(const void* data, size_t size) { return crc32c_extend(0, data, size); }

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size) {
  return ~crc32_iscsi(static_cast<unsigned char*>(const_cast<void*>(data)), static_cast<int>(size),
                      ~crc);
}

}  // namespace sluice
