#pragma once

// Kafka's RecordBatch v2 header: the one model of it in Sluice. Storage
// (append, recovery, scrubbing, fetch scans), the produce path, compaction
// and the record codec in protocol/records all read and write batch headers
// through this file, so the layout and the attribute bits are written down
// once. Records themselves (varints, compression) are protocol/records'.
//
// Layout (docs/protocol.md has the grammar, docs/log_format.md the segment):
//   base_offset int64 | batch_length int32 | partition_leader_epoch int32 |
//   magic int8 (2) | crc uint32 | attributes int16 | last_offset_delta int32 |
//   base_timestamp int64 | max_timestamp int64 | producer_id int64 |
//   producer_epoch int16 | base_sequence int32 | records_count int32 | records
// batch_length counts the bytes after itself; the CRC-32C covers attributes
// to the end, so the two fields the broker stamps (base offset and leader
// epoch) lie outside it.
//
// Everything here is a pure function of its arguments: thread safe.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/limits.h"
#include "base/result.h"
#include "base/types.h"

namespace sluice::model {

// The codecs Kafka defines, as numbered in attribute bits 0-2.
enum class compression : int8_t { none = 0, gzip = 1, snappy = 2, lz4 = 3, zstd = 4 };

// Attribute bit 3: what max_timestamp (and each record's time) means.
enum class timestamp_type : int8_t { create_time = 0, log_append_time = 1 };

// The batch attribute bits. Nothing outside this file spells them.
namespace attr {
inline constexpr int16_t compression_mask = 0x07;  // bits 0-2: compression
inline constexpr int16_t log_append_time = 0x08;   // bit 3: timestamp_type::log_append_time
inline constexpr int16_t transactional = 0x10;     // bit 4
inline constexpr int16_t control = 0x20;           // bit 5: a control batch (transaction markers)
inline constexpr int16_t delete_horizon = 0x40;    // bit 6: base_timestamp is the delete horizon (KIP-534)

// The attributes of a batch with these properties.
constexpr int16_t make(compression c, timestamp_type t, bool is_transactional, bool is_control,
                       bool has_delete_horizon) {
  int16_t a = static_cast<int16_t>(static_cast<int16_t>(c) & compression_mask);
  if (t == timestamp_type::log_append_time) a |= log_append_time;
  if (is_transactional) a |= transactional;
  if (is_control) a |= control;
  if (has_delete_horizon) a |= delete_horizon;
  return a;
}
}  // namespace attr

namespace batch {

inline constexpr int8_t current_magic = 2;

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
static_assert(records_count_pos + 4 == header_bytes);
// batch_length counts the bytes after itself.
inline constexpr size_t length_field_end = 12;

struct header {
  offset base_offset{0};
  int32_t batch_length = 0;
  int32_t partition_leader_epoch = -1;
  int8_t magic = current_magic;
  uint32_t crc = 0;
  int16_t attributes = 0;
  int32_t last_offset_delta = 0;
  int64_t base_timestamp = 0;
  int64_t max_timestamp = 0;
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  int32_t base_sequence = -1;
  int32_t records_count = 0;

  // The codec number as stored (0-7; Kafka defines 0-4, see codec()).
  int codec_id() const { return attributes & attr::compression_mask; }
  // Only meaningful for a known codec (codec_id() <= 4).
  compression codec() const { return static_cast<compression>(codec_id()); }
  timestamp_type ts_type() const {
    return (attributes & attr::log_append_time) ? timestamp_type::log_append_time : timestamp_type::create_time;
  }
  bool is_transactional() const { return (attributes & attr::transactional) != 0; }
  bool is_control() const { return (attributes & attr::control) != 0; }
  bool has_delete_horizon() const { return (attributes & attr::delete_horizon) != 0; }

  // The whole batch in bytes, base_offset included. Only meaningful once
  // check() passed.
  size_t size_bytes() const { return length_field_end + static_cast<size_t>(batch_length); }
  offset last_offset() const { return base_offset + last_offset_delta; }
};

// How strictly the offset fields are checked: a leader append requires
// records_count == last_offset_delta + 1; stored (recovered, replicated,
// compacted or fetched) batches may have gaps.
enum class strictness { leader, stored };

// Reads the header from `p`, which must hold header_bytes bytes. Checks
// nothing.
header parse(const std::byte* p);
inline header parse(const uint8_t* p) { return parse(reinterpret_cast<const std::byte*>(p)); }

// Writes every field of `h` to `p` (header_bytes bytes), the crc field as
// h.crc: follow with update_crc once the records are in place.
void write(std::byte* p, const header& h);
inline void write(uint8_t* p, const header& h) { write(reinterpret_cast<std::byte*>(p), h); }

// Checks magic, lengths (against `available`, the bytes present from the
// start of the batch) and the offset fields. Does not read the CRC'd bytes.
// errc::unsupported_format for magic 0/1, errc::invalid_record otherwise;
// errc::corrupt_data when the batch claims more bytes than `available`.
status check(const header& h, size_t available, strictness s);

// parse() and check(stored) of the header at the front of `bytes`, for
// readers of batches from the wire or a file that may end in a partial
// batch (a Fetch response may): the rest of the batch need not be present.
// errc::unsupported_format for magic 0/1, errc::corrupt_data for anything
// else wrong (shorter than a header included).
result<header> read_header(std::span<const std::byte> bytes);
inline result<header> read_header(std::span<const uint8_t> bytes) { return read_header(std::as_bytes(bytes)); }

// CRC-32C of the whole batch `batch` (its crc field's value when intact).
uint32_t compute_crc(std::span<const std::byte> batch);
inline uint32_t compute_crc(std::span<const uint8_t> batch) { return compute_crc(std::as_bytes(batch)); }

// Whether the crc field of the whole batch `batch` matches its bytes. False
// for less than a header.
bool crc_matches(std::span<const std::byte> batch);
inline bool crc_matches(std::span<const uint8_t> batch) { return crc_matches(std::as_bytes(batch)); }

// Recomputes and stores the CRC of the whole batch `batch`, after a field
// inside the CRC'd range changed.
void update_crc(std::span<std::byte> batch);
inline void update_crc(std::span<uint8_t> batch) { update_crc(std::as_writable_bytes(batch)); }

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

// check_all (CRCs included) for bytes that may end in part of a batch, as a
// Fetch answer at its size limit does: checks the whole batches at the
// front, appends their headers to `out`, and returns the bytes they span
// (0: not one whole batch). A whole batch that fails a check is an error.
result<size_t> check_whole_prefix(std::span<const std::byte> bytes, strictness s, std::vector<header>& out);

}  // namespace batch
}  // namespace sluice::model
