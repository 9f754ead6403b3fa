#include "storage/record_batch.h"

#include <string>
#include <vector>

#include "base/crc32c.h"
#include "base/endian.h"

namespace sluice::storage::batch {

header parse(const std::byte* p) {
  header h;
  h.base = offset(load_be<int64_t>(p + base_offset_pos));
  h.batch_length = load_be<int32_t>(p + length_pos);
  h.epoch = load_be<int32_t>(p + epoch_pos);
  h.magic = load_be<int8_t>(p + magic_pos);
  h.crc = load_be<uint32_t>(p + crc_pos);
  h.attributes = load_be<int16_t>(p + attributes_pos);
  h.last_offset_delta = load_be<int32_t>(p + last_delta_pos);
  h.base_timestamp = load_be<int64_t>(p + base_timestamp_pos);
  h.max_timestamp = load_be<int64_t>(p + max_timestamp_pos);
  h.records_count = load_be<int32_t>(p + records_count_pos);
  return h;
}

status check(const header& h, size_t available, strictness s) {
  if (h.magic != 2) {
    if (h.magic == 0 || h.magic == 1)
      return status(errc::unsupported_format, "record batch magic " + std::to_string(h.magic));
    return status(errc::invalid_record, "record batch magic " + std::to_string(h.magic));
  }
  const int64_t size = static_cast<int64_t>(length_field_end) + h.batch_length;
  if (size < static_cast<int64_t>(header_bytes) || size > limits::max_batch_bytes)
    return status(errc::invalid_record, "record batch length " + std::to_string(h.batch_length));
  if (static_cast<uint64_t>(size) > available)
    return status(errc::corrupt_data, "record batch of " + std::to_string(size) + " bytes but only " +
                                          std::to_string(available) + " present");
  if (h.last_offset_delta < 0 || h.records_count < 0)
    return status(errc::invalid_record, "negative last offset delta or record count");
  const int64_t span = int64_t{h.last_offset_delta} + 1;
  const bool count_ok = s == strictness::leader ? h.records_count == span : h.records_count <= span;
  if (!count_ok)
    return status(errc::invalid_record, "record count " + std::to_string(h.records_count) +
                                            " does not match last offset delta " +
                                            std::to_string(h.last_offset_delta));
  return {};
}

status check_crc(const header& h, std::span<const std::byte> bytes) {
  const size_t n = h.size_bytes() - attributes_pos;
  const uint32_t got = crc32c(bytes.data() + attributes_pos, n);
  if (got != h.crc) return status(errc::corrupt_data, "record batch CRC mismatch");
  return {};
}

void stamp(std::byte* p, offset base, leader_epoch epoch) {
  store_be<int64_t>(p + base_offset_pos, base.value());
  store_be<int32_t>(p + epoch_pos, epoch.value());
}

status check_all(std::span<const std::byte> bytes, strictness s, std::vector<header>& out, crc_check crc) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const size_t left = bytes.size() - pos;
    if (left < header_bytes)
      return status(errc::corrupt_data, "trailing " + std::to_string(left) + " bytes are not a batch");
    header h = parse(bytes.data() + pos);
    SLUICE_TRY(check(h, left, s));
    if (crc == crc_check::verify) SLUICE_TRY(check_crc(h, bytes.subspan(pos)));
    out.push_back(h);
    pos += h.size_bytes();
  }
  if (out.empty()) return status(errc::invalid_record, "no record batch");
  return {};
}

}  // namespace sluice::storage::batch
