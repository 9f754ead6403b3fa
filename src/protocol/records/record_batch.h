#pragma once

// Kafka's RecordBatch v2 (magic 2): reading the fixed header, checking the
// CRC, decoding the records (after decompression), and building batches.
//
// Layout (docs/protocol.md has the grammar):
//   base_offset int64 | batch_length int32 | partition_leader_epoch int32 |
//   magic int8 (2) | crc uint32 | attributes int16 | last_offset_delta int32 |
//   base_timestamp int64 | max_timestamp int64 | producer_id int64 |
//   producer_epoch int16 | base_sequence int32 | records_count int32 | records
// batch_length counts the bytes after itself; the CRC-32C covers attributes
// to the end. Attributes: bits 0-2 codec, 3 timestamp type (1 = log append
// time), 4 transactional, 5 control, 6 has delete horizon.
//   Record: length varint | attributes int8 | timestamp_delta varlong |
//   offset_delta varint | key_length varint (-1 null) | key |
//   value_length varint (-1 null) | value | header_count varint |
//   headers (key_length varint, key, value_length varint, value)
// All record varints are zig-zag signed.
//
// Views returned here point into the caller's buffer (or into the
// decoded_batch that owns the decompressed bytes); keep it alive.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/limits.h"
#include "base/result.h"
#include "protocol/records/compression.h"

namespace sluice::protocol::records {

inline constexpr size_t batch_header_bytes = 61;
inline constexpr size_t batch_length_offset = 8;   // where batch_length sits
inline constexpr size_t crc_offset = 17;           // where the crc sits
inline constexpr size_t attributes_offset = 21;    // first byte the crc covers
inline constexpr int8_t current_magic = 2;

enum class timestamp_type : int8_t { create_time = 0, log_append_time = 1 };

namespace attr {
inline constexpr int16_t compression_mask = 0x07;
inline constexpr int16_t log_append_time = 0x08;
inline constexpr int16_t transactional = 0x10;
inline constexpr int16_t control = 0x20;
inline constexpr int16_t delete_horizon = 0x40;
}  // namespace attr

struct batch_header {
  int64_t base_offset = 0;
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

  compression codec() const { return static_cast<compression>(attributes & attr::compression_mask); }
  timestamp_type ts_type() const {
    return (attributes & attr::log_append_time) ? timestamp_type::log_append_time : timestamp_type::create_time;
  }
  bool is_transactional() const { return (attributes & attr::transactional) != 0; }
  bool is_control() const { return (attributes & attr::control) != 0; }
  int64_t last_offset() const { return base_offset + last_offset_delta; }
  // Bytes of the whole batch, base_offset included.
  size_t size_bytes() const { return 12 + static_cast<size_t>(batch_length); }
};

// Reads the fixed header at the front of `bytes`. Checks the magic (older
// formats are errc::unsupported_format) and that batch_length is at least
// the header, at most limits::max_batch_bytes; it does not need the whole
// batch to be present (see split_batches) and does not check the CRC.
result<batch_header> read_batch_header(std::span<const uint8_t> bytes);

// CRC-32C of a whole batch as it should be stored in its crc field.
uint32_t compute_crc(std::span<const uint8_t> batch);
// True when the stored CRC matches the bytes.
bool crc_matches(std::span<const uint8_t> batch);

// Splits a records blob into whole batches. A partial batch at the end is
// left out and reported through *trailing_bytes (a Fetch response may end
// in one); anything else malformed is errc::corrupt_data.
result<std::vector<std::span<const uint8_t>>> split_batches(std::span<const uint8_t> records,
                                                             size_t* trailing_bytes = nullptr);

struct record_header {
  std::span<const uint8_t> key;
  std::optional<std::span<const uint8_t>> value;
  bool operator==(const record_header& o) const;
};

struct record {
  int8_t attributes = 0;
  int64_t timestamp_delta = 0;
  int32_t offset_delta = 0;
  std::optional<std::span<const uint8_t>> key;
  std::optional<std::span<const uint8_t>> value;
  std::vector<record_header> headers;
};

// A batch with its records decoded. Owns the decompressed bytes the record
// views point into (for an uncompressed batch they point into the input).
struct decoded_batch {
  batch_header header;
  std::vector<record> records;
  std::vector<uint8_t> decompressed;
};

// Validates (magic, lengths, CRC, record count) and decodes one whole batch,
// decompressing if needed, within max_decompressed_bytes. Errors are
// errc::corrupt_data (or unsupported_format for old magic).
result<decoded_batch> decode_batch(std::span<const uint8_t> batch,
                                   size_t max_decompressed_bytes = limits::max_decompressed_batch_bytes);

// Walks `count` records of uncompressed record bytes, calling fn(index,
// record) for each; the record's views point into `bytes`, and its headers
// are decoded only `with_headers` (else only checked). Stops at fn's first
// error and returns it. Malformed bytes are errc::corrupt_data, naming the
// record.
status for_each_record(std::span<const uint8_t> bytes, int32_t count, bool with_headers,
                       const std::function<status(int32_t, record&)>& fn);

// Decodes `count` records from uncompressed record bytes.
result<std::vector<record>> decode_records(std::span<const uint8_t> bytes, int32_t count);

// ---- building ---------------------------------------------------------------

struct record_input {
  std::optional<std::vector<uint8_t>> key;
  std::optional<std::vector<uint8_t>> value;
  std::vector<std::pair<std::string, std::optional<std::vector<uint8_t>>>> headers;
  int64_t timestamp_ms = 0;
  // Offset relative to the batch's base offset; by default the index in the
  // input (compaction keeps original offsets, so gaps are allowed).
  std::optional<int32_t> offset_delta;
};

struct batch_options {
  int64_t base_offset = 0;
  int32_t partition_leader_epoch = -1;
  compression codec = compression::none;
  timestamp_type ts_type = timestamp_type::create_time;
  bool transactional = false;
  bool control = false;
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  int32_t base_sequence = -1;
  // For log-append-time batches: the time the broker stamps as max_timestamp.
  std::optional<int64_t> log_append_time_ms;
  // Compaction's rebuilt batches (docs/log_format.md, "Replacing segments"):
  // keep the original last offset delta (at least the largest record delta),
  // and with delete_horizon set, attribute bit 6 and base_timestamp_ms (the
  // horizon) as the base timestamp that record deltas count from.
  std::optional<int32_t> last_offset_delta;
  bool delete_horizon = false;
  std::optional<int64_t> base_timestamp_ms;
  // max_timestamp of a batch left with no records (else taken from them).
  int64_t empty_max_timestamp_ms = -1;
};

// Builds a complete v2 batch with a correct CRC. At least one record, unless
// last_offset_delta is given (an emptied batch, which compaction keeps for
// an idempotent producer's last sequence number).
result<std::vector<uint8_t>> build_batch(const batch_options& options, std::span<const record_input> records);

}  // namespace sluice::protocol::records
