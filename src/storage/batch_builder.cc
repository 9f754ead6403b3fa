#include "storage/batch_builder.h"

#include "base/crc32c.h"
#include "base/endian.h"
#include "storage/record_batch.h"

namespace sluice::storage {
namespace {

void put_varlong(std::vector<std::byte>& out, int64_t v) {
  uint64_t z = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);  // zigzag
  while (z >= 0x80) {
    out.push_back(static_cast<std::byte>((z & 0x7f) | 0x80));
    z >>= 7;
  }
  out.push_back(static_cast<std::byte>(z));
}

std::vector<std::byte> build_record(const batch_spec& spec, int32_t i) {
  std::vector<std::byte> body;
  body.push_back(std::byte{0});                     // attributes
  put_varlong(body, int64_t{i} * spec.timestamp_step);  // timestamp delta
  put_varlong(body, i);                             // offset delta
  put_varlong(body, -1);                            // null key
  put_varlong(body, static_cast<int64_t>(spec.value_bytes));
  uint32_t x = spec.seed * 2654435761u + static_cast<uint32_t>(i) * 40503u + 1;
  for (size_t k = 0; k < spec.value_bytes; ++k) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    body.push_back(static_cast<std::byte>(x));
  }
  put_varlong(body, 0);  // no headers
  std::vector<std::byte> rec;
  put_varlong(rec, static_cast<int64_t>(body.size()));
  rec.insert(rec.end(), body.begin(), body.end());
  return rec;
}

}  // namespace

std::vector<std::byte> build_batch(const batch_spec& spec) {
  std::vector<std::byte> b(batch::header_bytes);
  for (int32_t i = 0; i < spec.records; ++i) {
    auto r = build_record(spec, i);
    b.insert(b.end(), r.begin(), r.end());
  }
  std::byte* p = b.data();
  store_be<int64_t>(p + batch::base_offset_pos, 0);
  store_be<int32_t>(p + batch::length_pos, static_cast<int32_t>(b.size() - batch::length_field_end));
  store_be<int32_t>(p + batch::epoch_pos, -1);
  store_be<int8_t>(p + batch::magic_pos, 2);
  store_be<int16_t>(p + batch::attributes_pos, 0);
  store_be<int32_t>(p + batch::last_delta_pos, spec.records - 1);
  store_be<int64_t>(p + batch::base_timestamp_pos, spec.base_timestamp);
  store_be<int64_t>(p + batch::max_timestamp_pos,
                    spec.base_timestamp + int64_t{spec.records - 1} * spec.timestamp_step);
  store_be<int64_t>(p + batch::producer_id_pos, spec.producer_id);
  store_be<int16_t>(p + batch::producer_epoch_pos, spec.producer_epoch);
  store_be<int32_t>(p + batch::base_sequence_pos, spec.base_sequence);
  store_be<int32_t>(p + batch::records_count_pos, spec.records);
  const size_t crc_len = b.size() - batch::attributes_pos;
  store_be<uint32_t>(p + batch::crc_pos, crc32c(p + batch::attributes_pos, crc_len));
  return b;
}

}  // namespace sluice::storage
