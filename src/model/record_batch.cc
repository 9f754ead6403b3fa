#include "model/record_batch.h"

#include <limits>
#include <string>

#include "base/crc32c.h"
#include "base/endian.h"

namespace sluice::model::batch {

header parse(const std::byte* p) {
  header h;
  h.base_offset = offset(load_be<int64_t>(p + base_offset_pos));
  h.batch_length = load_be<int32_t>(p + length_pos);
  h.partition_leader_epoch = load_be<int32_t>(p + epoch_pos);
  h.magic = load_be<int8_t>(p + magic_pos);
  h.crc = load_be<uint32_t>(p + crc_pos);
  h.attributes = load_be<int16_t>(p + attributes_pos);
  h.last_offset_delta = load_be<int32_t>(p + last_delta_pos);
  h.base_timestamp = load_be<int64_t>(p + base_timestamp_pos);
  h.max_timestamp = load_be<int64_t>(p + max_timestamp_pos);
  h.producer_id = load_be<int64_t>(p + producer_id_pos);
  h.producer_epoch = load_be<int16_t>(p + producer_epoch_pos);
  h.base_sequence = load_be<int32_t>(p + base_sequence_pos);
  h.records_count = load_be<int32_t>(p + records_count_pos);
  return h;
}

void write(std::byte* p, const header& h) {
  store_be<int64_t>(p + base_offset_pos, h.base_offset.value());
  store_be<int32_t>(p + length_pos, h.batch_length);
  store_be<int32_t>(p + epoch_pos, h.partition_leader_epoch);
  store_be<int8_t>(p + magic_pos, h.magic);
  store_be<uint32_t>(p + crc_pos, h.crc);
  store_be<int16_t>(p + attributes_pos, h.attributes);
  store_be<int32_t>(p + last_delta_pos, h.last_offset_delta);
  store_be<int64_t>(p + base_timestamp_pos, h.base_timestamp);
  store_be<int64_t>(p + max_timestamp_pos, h.max_timestamp);
  store_be<int64_t>(p + producer_id_pos, h.producer_id);
  store_be<int16_t>(p + producer_epoch_pos, h.producer_epoch);
  store_be<int32_t>(p + base_sequence_pos, h.base_sequence);
  store_be<int32_t>(p + records_count_pos, h.records_count);
}

status check(const header& h, size_t available, strictness s) {
  if (h.magic != current_magic) {
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

result<header> read_header(std::span<const std::byte> bytes) {
  if (bytes.size() < header_bytes)
    return error{errc::corrupt_data, "record batch: shorter than the " + std::to_string(header_bytes) + "-byte header"};
  header h = parse(bytes.data());
  // The rest of the batch need not be present: check it as if it were.
  status st = check(h, std::numeric_limits<size_t>::max(), strictness::stored);
  if (!st.ok()) {
    if (st.code() == errc::unsupported_format) return st.err();
    return error{errc::corrupt_data, "record batch: " + st.err().message};
  }
  return h;
}

uint32_t compute_crc(std::span<const std::byte> batch) {
  SLUICE_ASSERT(batch.size() >= header_bytes, "compute_crc on less than a header");
  return crc32c(batch.data() + attributes_pos, batch.size() - attributes_pos);
}

bool crc_matches(std::span<const std::byte> batch) {
  if (batch.size() < header_bytes) return false;
  return load_be<uint32_t>(batch.data() + crc_pos) == compute_crc(batch);
}

void update_crc(std::span<std::byte> batch) {
  store_be<uint32_t>(batch.data() + crc_pos, compute_crc(batch));
}

status check_crc(const header& h, std::span<const std::byte> bytes) {
  if (compute_crc(bytes.first(h.size_bytes())) != h.crc) return status(errc::corrupt_data, "record batch CRC mismatch");
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

result<size_t> check_whole_prefix(std::span<const std::byte> bytes, strictness s, std::vector<header>& out) {
  size_t pos = 0;
  while (bytes.size() - pos >= header_bytes) {
    const size_t left = bytes.size() - pos;
    header h = parse(bytes.data() + pos);
    // A batch cut at the end: its header must still be sound.
    if (h.batch_length >= 0 && h.size_bytes() > left) {
      SLUICE_TRY(check(h, h.size_bytes(), s));
      break;
    }
    SLUICE_TRY(check(h, left, s));
    SLUICE_TRY(check_crc(h, bytes.subspan(pos)));
    out.push_back(h);
    pos += h.size_bytes();
  }
  return pos;
}

}  // namespace sluice::model::batch
