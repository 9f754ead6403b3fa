#pragma once

// The fixed header of a Kafka RecordBatch v2 (docs/log_format.md, "Segment
// file"): parsing, validation and the in-place stamping of the two fields the
// broker assigns. Records are never decoded here.

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/limits.h"
#include "base/result.h"
#include "base/types.h"

namespace sluice::storage::batch {

// Byte positions of the header fields within a batch.
inline constexpr size_t base_offset_pos = 0;
inline constexpr size_t length_pos = 8;
inline constexpr size_t epoch_pos = 12;
inline constexpr size_t magic_pos = 16;
inline constexpr size_t crc_pos = 17;
inline constexpr size_t attributes_pos = 21;  // the CRC covers from here to the end
inline constexpr size_t last_delta_pos = 23;
inline constexpr size_t base_timestamp_pos = 27;
inline constexpr size_t max_timestamp_pos = 35;
inline constexpr size_t producer_id_pos = 43;
inline constexpr size_t producer_epoch_pos = 51;
inline constexpr size_t base_sequence_pos = 53;
inline constexpr size_t records_count_pos = 57;
inline constexpr size_t header_bytes = limits::batch_header_bytes;
// batch_length counts the bytes after itself.
inline constexpr size_t length_field_end = 12;

struct header {
  offset base;
  int32_t batch_length = 0;
  int32_t epoch = 0;
  int8_t magic = 0;
  uint32_t crc = 0;
  int16_t attributes = 0;
  int32_t last_offset_delta = 0;
  int64_t base_timestamp = 0;
  int64_t max_timestamp = 0;
  int32_t records_count = 0;

  // The whole batch in bytes. Only meaningful once check() passed.
  size_t size_bytes() const { return length_field_end + static_cast<size_t>(batch_length); }
  offset last_offset() const { return base + last_offset_delta; }
};

// How strictly the offset fields are checked: a leader append requires
// records_count == last_offset_delta + 1; stored (recovered, replicated or
// compacted) batches may have gaps.
enum class strictness { leader, stored };

// Reads the header from `p`, which must hold header_bytes bytes.
header parse(const std::byte* p);

// Checks magic, lengths (against `available`, the bytes present from the
// start of the batch) and the offset fields. Does not read the CRC'd bytes.
// errc::unsupported_format for magic 0/1, errc::invalid_record otherwise;
// errc::corrupt_data when the batch claims more bytes than `available`.
status check(const header& h, size_t available, strictness s);

// Checks the CRC-32C of a whole batch (`bytes` starts at the batch and holds
// at least h.size_bytes()). errc::corrupt_data on mismatch.
status check_crc(const header& h, std::span<const std::byte> bytes);

// Writes the broker-assigned base offset and leader epoch into a batch in
// place. Both fields precede the CRC'd range, so the CRC stays valid.
void stamp(std::byte* p, offset base, leader_epoch epoch);

// Whether check_all verifies each batch's CRC-32C, or trusts a caller that
// verified it already (the produce path checks it once, before it reads
// anything else of the batch).
enum class crc_check { verify, already_verified };

// Parses and fully validates every batch of `bytes` (which must consist of
// whole batches only). Appends the headers to `out`.
status check_all(std::span<const std::byte> bytes, strictness s, std::vector<header>& out,
                 crc_check crc = crc_check::verify);

}  // namespace sluice::storage::batch
