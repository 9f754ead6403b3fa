#include "storage/batch_builder.h"

#include "model/record_batch.h"

namespace sluice::storage {

namespace batch = model::batch;
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
  batch::header h;
  h.base_offset = offset(0);
  h.batch_length = static_cast<int32_t>(b.size() - batch::length_field_end);
  h.partition_leader_epoch = -1;
  h.last_offset_delta = spec.records - 1;
  h.base_timestamp = spec.base_timestamp;
  h.max_timestamp = spec.base_timestamp + int64_t{spec.records - 1} * spec.timestamp_step;
  h.producer_id = spec.producer_id;
  h.producer_epoch = spec.producer_epoch;
  h.base_sequence = spec.base_sequence;
  if (spec.transactional) h.attributes = model::attr::transactional;
  h.records_count = spec.records;
  batch::write(b.data(), h);
  batch::update_crc(b);
  return b;
}

}  // namespace sluice::storage
