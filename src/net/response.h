#pragma once

// What the server writes back for one request: a sequence of chunks, each
// either bytes the response owns or a region of a file sent with sendfile(2)
// straight from the page cache (Fetch answers record data this way).
//
// The chunks are the frame body (response header and response body). The
// server writes the 4-byte big-endian length prefix itself, computed from
// size_bytes(); a response whose size does not fit in an int32 is a bug in
// the caller and closes the connection with an error log line.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <variant>
#include <vector>

namespace sluice::net {

// A byte range of an open file. `fd` must stay open and the range [pos,
// pos + len) must stay readable until the server has sent it: `keepalive`
// is held by the server until then (pass the shared_ptr that owns the file,
// for example the segment or its io::file). If the file turns out shorter
// than the region when it is sent, the frame cannot be completed and the
// connection is closed with a log line.
struct file_region {
  std::shared_ptr<const void> keepalive;
  int fd = -1;
  uint64_t pos = 0;
  uint64_t len = 0;
};

using chunk = std::variant<std::vector<std::byte>, file_region>;

inline uint64_t chunk_bytes(const chunk& c) {
  if (const auto* b = std::get_if<std::vector<std::byte>>(&c)) return b->size();
  return std::get<file_region>(c).len;
}

struct response {
  std::vector<chunk> chunks;

  void append(std::vector<std::byte> bytes) { chunks.emplace_back(std::move(bytes)); }
  void append(file_region region) { chunks.emplace_back(std::move(region)); }

  // Length of the frame body, the value of the length prefix.
  uint64_t size_bytes() const {
    uint64_t n = 0;
    for (const auto& c : chunks) n += chunk_bytes(c);
    return n;
  }
  // Bytes held in memory (owned buffers only; file regions cost no memory).
  // This is what the per-connection queued-response bound counts.
  uint64_t memory_bytes() const {
    uint64_t n = 0;
    for (const auto& c : chunks)
      if (const auto* b = std::get_if<std::vector<std::byte>>(&c)) n += b->size();
    return n;
  }
};

}  // namespace sluice::net
