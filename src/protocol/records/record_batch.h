#pragma once

// Kafka's RecordBatch v2 (magic 2) beyond its header: splitting a records
// blob into batches, decoding the records (after decompression), and
// building batches. The header itself (layout, attribute bits, parsing,
// checks, CRC) is model/record_batch.h.
//
// Records (docs/protocol.md has the grammar):
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
#include "model/record_batch.h"
#include "protocol/records/compression.h"

namespace sluice::protocol::records {

// Splits a records blob into whole batches. A partial batch at the end is
// left out and reported through *trailing_bytes (a Fetch response may end
// in one); anything else malformed is errc::corrupt_data (or
// errc::unsupported_format for magic 0/1), as model::batch::read_header
// says.
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
  model::batch::header header;
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
  model::timestamp_type ts_type = model::timestamp_type::create_time;
  bool transactional = false;
  bool control = false;
  int64_t producer_id = -1;
  int16_t producer_epoch = -1;
  int32_t base_sequence = -1;
  // For log-append-time batches: the time the broker stamps as max_timestamp.
  std::optional<int64_t> log_append_time_ms;
  // Compaction's rebuilt batches (docs/log_format.md, "Replacing segments"):
  // keep the original last offset delta (at least the largest record delta),
  // and with delete_horizon set, the delete-horizon attribute and
  // base_timestamp_ms (the horizon) as the base timestamp that record
  // deltas count from.
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
