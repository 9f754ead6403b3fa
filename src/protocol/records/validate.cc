#include "protocol/records/validate.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "base/limits.h"
#include "protocol/records/compression.h"
#include "protocol/records/record_batch.h"

namespace sluice::protocol::records {

decompression_budget::lease::~lease() {
  if (owner_) owner_->release(bytes_);
}

decompression_budget::lease decompression_budget::acquire(size_t bytes) {
  bytes = std::min(bytes, total_);
  std::unique_lock g(mu_);
  if (total_ - in_use_ < bytes) {
    ++waits_;
    cv_.wait(g, [&] { return total_ - in_use_ >= bytes; });
  }
  in_use_ += bytes;
  return lease(this, bytes);
}

void decompression_budget::release(size_t bytes) {
  {
    std::lock_guard g(mu_);
    in_use_ -= bytes;
  }
  cv_.notify_all();
}

size_t decompression_budget::in_use_bytes() const {
  std::lock_guard g(mu_);
  return in_use_;
}

uint64_t decompression_budget::waits() const {
  std::lock_guard g(mu_);
  return waits_;
}

decompression_budget& produce_decompression_budget() {
  static decompression_budget budget(limits::max_produce_decompression_bytes);
  return budget;
}

namespace {

error invalid(std::string what) { return error{errc::invalid_record, std::move(what)}; }

// Walks the uncompressed records of a batch whose header is `h`.
result<batch_facts> walk(const model::batch::header& h, std::span<const uint8_t> payload, const validation_options& o) {
  batch_facts facts;
  int64_t max_delta = INT64_MIN;
  auto visit = [&](int32_t i, record& r) -> status {
    if (r.offset_delta != i)
      return invalid("record " + std::to_string(i) + " has offset delta " + std::to_string(r.offset_delta));
    if (o.require_keys && !r.key) return invalid("compacted topic cannot accept a record without a key");
    max_delta = std::max(max_delta, r.timestamp_delta);
    return {};
  };
  auto s = for_each_record(payload, h.records_count, false, visit);
  if (!s.ok()) {
    // The bytes parsed as a batch (its CRC matched) but not as records:
    // Kafka's InvalidRecordException.
    return s.code() == errc::corrupt_data ? invalid(s.err().message) : error(s.err());
  }
  if (h.records_count == 0) return facts;
  int64_t max_ts = 0;
  if (__builtin_add_overflow(h.base_timestamp, max_delta, &max_ts))
    return invalid("record timestamp overflows: base " + std::to_string(h.base_timestamp) + " + delta " +
                   std::to_string(max_delta));
  facts.max_timestamp = max_ts;
  return facts;
}

}  // namespace

result<batch_facts> validate_records(std::span<const uint8_t> batch, const validation_options& o,
                                     decompression_budget* budget) {
  SLUICE_ASSIGN_OR_RETURN(model::batch::header h, model::batch::read_header(batch));
  if (h.size_bytes() != batch.size())
    return invalid("batch_length says " + std::to_string(h.size_bytes()) + " bytes, have " +
                   std::to_string(batch.size()));
  const auto payload = batch.subspan(model::batch::header_bytes);
  const int codec = h.codec_id();
  if (codec > static_cast<int>(compression::zstd))
    return error{errc::unsupported_compression, "unknown compression codec " + std::to_string(codec)};
  if (h.codec() == compression::none) return walk(h, payload, o);
  if (h.records_count == 0 && payload.empty()) return walk(h, payload, o);
  // The lease is sized from the batch first (limits.h); one that
  // decompresses past it tries once more with the whole allowance, after
  // giving the first lease back (never holding one while waiting for
  // another).
  size_t limit = std::min(o.max_decompressed_bytes,
                          std::max(limits::produce_decompression_lease_min_bytes,
                                   payload.size() * limits::produce_decompression_lease_ratio));
  std::optional<decompression_budget::lease> held;
  // Each thread keeps its output buffer while it stays small (limits.h), so
  // the common batch decompresses into memory that is already mapped.
  thread_local std::vector<uint8_t> buffer;
  if (budget) held.emplace(budget->acquire(limit + 1));
  auto plain = decompress_reusing(h.codec(), payload, limit, buffer);
  if (!plain.ok() && plain.code() == errc::message_too_large && limit < o.max_decompressed_bytes) {
    limit = o.max_decompressed_bytes;
    held.reset();
    if (budget) held.emplace(budget->acquire(limit + 1));
    plain = decompress_reusing(h.codec(), payload, limit, buffer);
  }
  auto facts = plain.ok() ? walk(h, *plain, o) : result<batch_facts>(plain.err());
  if (buffer.size() > limits::max_retained_decompression_buffer_bytes) std::vector<uint8_t>().swap(buffer);
  if (!facts.ok() && !plain.ok() && plain.code() != errc::message_too_large)
    return error{errc::corrupt_data, std::string(compression_name(h.codec())) +
                                         " payload does not decompress: " + plain.err().message};
  return facts;
}

}  // namespace sluice::protocol::records
