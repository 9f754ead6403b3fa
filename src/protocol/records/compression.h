#pragma once

// The record-batch codecs Kafka defines (model::compression), through the
// Debian libraries: zlib (gzip), snappy, liblz4 (frame format) and zstd.
// The broker stores batches as sent and never recompresses them; these are
// for reading records (tools, the group coordinator, compaction) and for
// building batches (tests, internal topics, rebuilt compacted batches).
//
// Formats, as Kafka's clients write them:
//   gzip    a gzip stream (RFC 1952); several members are accepted.
//   snappy  Java clients write xerial framing: magic 82 'SNAPPY' 00, int32
//           version, int32 min compatible version, then blocks of int32
//           compressed length + raw snappy block. librdkafka writes raw
//           snappy and reads either (it looks for the magic), as Java's
//           reader does. So decompress() takes both, recognising the framing
//           by its magic, and compress() writes xerial framing, which every
//           client reads.
//   lz4     the standard LZ4 frame format (magic 04 22 4D 18) with
//           independent 64 KiB blocks, as Kafka's KafkaLZ4BlockOutputStream
//           writes it (Java decompresses blocks independently).
//   zstd    one or more zstd frames, content size optional.
//
// Decompression is bounded: output larger than `max_bytes` is refused with
// errc::message_too_large, so a compression bomb cannot exhaust memory. Thread
// safe: no shared state.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "base/limits.h"
#include "base/result.h"
#include "model/record_batch.h"

namespace sluice::protocol::records {

// The codec numbers are the batch model's (attribute bits 0-2).
using compression = model::compression;

std::string_view compression_name(compression c);

// Compresses `in`. Fails only for an unknown codec (errc::invalid_argument).
result<std::vector<uint8_t>> compress(compression c, std::span<const uint8_t> in);

// Decompresses `in`, producing at most max_bytes. Damaged or truncated
// input is errc::corrupt_data, output past max_bytes
// errc::message_too_large; an unknown codec is
// errc::invalid_argument.
result<std::vector<uint8_t>> decompress(compression c, std::span<const uint8_t> in,
                                        size_t max_bytes = limits::max_decompressed_batch_bytes);

// The same, for a caller that decompresses often on one thread (produce
// validation on the broker's I/O threads): the output goes into `buffer`,
// whose capacity is reused (its size() is what was ever touched, not the
// output's), and the codec contexts are kept per thread, so once warm a
// call allocates nothing. The returned view points into `buffer`.
result<std::span<const uint8_t>> decompress_reusing(compression c, std::span<const uint8_t> in, size_t max_bytes,
                                                    std::vector<uint8_t>& buffer);

}  // namespace sluice::protocol::records
