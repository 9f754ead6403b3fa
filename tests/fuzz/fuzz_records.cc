// libFuzzer targets for the broker's validation of produced record batches
// (protocol/records/validate.h), built twice from this file:
//   fuzz_record_batch      the input is the uncompressed records of a batch;
//   fuzz_compressed_batch  the input is a compressed payload under a codec
//                          the input picks (0-7, so unknown codecs too).
// Input layout: byte 0 = record count (low 6 bits) and "compacted topic"
// (bit 6); with FUZZ_COMPRESSED, byte 1 = codec; the rest is the payload.
// The harness wraps it in a v2 header with a correct CRC, as a producer
// would, so the fuzzer's time goes to the records rather than the CRC.
//
// Besides "never crash, never over-allocate" (ASan, the RSS limit), the
// properties: whatever validation accepts, the full decoder accepts too,
// with records_count records, offset deltas 0..n-1 and the largest
// timestamp validation reported; no accepted batch decompresses past the
// cap; and the decompression budget is back to zero after every call.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fuzz_util.h"
#include "base/crc32c.h"
#include "base/endian.h"
#include "model/record_batch.h"
#include "protocol/records/record_batch.h"
#include "protocol/records/validate.h"

using namespace sluice;
using namespace sluice::protocol::records;

namespace {

using fuzz::check;

std::vector<uint8_t> wrap(int16_t attributes, int32_t count, std::span<const uint8_t> payload) {
  model::batch::header h;
  h.batch_length = static_cast<int32_t>(model::batch::header_bytes - model::batch::length_field_end + payload.size());
  h.attributes = attributes;
  h.last_offset_delta = count == 0 ? 0 : count - 1;
  h.base_timestamp = 1'700'000'000'000;
  h.max_timestamp = -1;
  h.records_count = count;
  std::vector<uint8_t> b(model::batch::header_bytes);
  model::batch::write(b.data(), h);
  b.insert(b.end(), payload.begin(), payload.end());
  model::batch::update_crc(b);
  return b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
#ifdef FUZZ_COMPRESSED
  constexpr size_t prefix = 2;
#else
  constexpr size_t prefix = 1;
#endif
  if (size < prefix) return 0;
  const int32_t count = data[0] & 0x3f;
  validation_options o;
  o.max_decompressed_bytes = fuzz::decompress_cap;
  o.require_keys = (data[0] & 0x40) != 0;
  int16_t attributes = 0;
#ifdef FUZZ_COMPRESSED
  attributes = static_cast<int16_t>(data[1] & model::attr::compression_mask);
#endif
  const auto batch = wrap(attributes, count, std::span<const uint8_t>(data + prefix, size - prefix));
  static decompression_budget budget(4 * fuzz::decompress_cap);
  auto facts = validate_records(batch, o, &budget);
  check(budget.in_use_bytes() == 0, "the budget is released");
  if (!facts.ok()) return 0;
  auto d = decode_batch(batch, fuzz::decompress_cap);
  check(d.ok(), "a validated batch decodes");
  check(d->records.size() == static_cast<size_t>(count), "records_count records");
  int64_t max_ts = -1;
  for (size_t i = 0; i < d->records.size(); ++i) {
    const record& r = d->records[i];
    check(r.offset_delta == static_cast<int32_t>(i), "offset deltas count up");
    check(!o.require_keys || r.key.has_value(), "keys where required");
    max_ts = i == 0 ? d->header.base_timestamp + r.timestamp_delta
                    : std::max(max_ts, d->header.base_timestamp + r.timestamp_delta);
  }
  check(facts->max_timestamp == max_ts, "the largest timestamp");
  check(d->decompressed.size() <= fuzz::decompress_cap, "decompressed within the cap");
  return 0;
}
