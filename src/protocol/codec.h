#pragma once

// The primitive layer of Sluice's Kafka codec: a bounds-checked `reader` over
// a request buffer, a `writer` that produces a response as a list of chunks,
// and the `records_field` type that lets record data pass through without
// being copied. The generated message structs (protocol/messages.h) are
// written entirely in terms of these.
//
// Wire encodings (Kafka's, summarised in docs/protocol.md):
//   classic  string  int16 length, -1 = null     flexible  uvarint length+1, 0 = null
//            bytes   int32 length, -1 = null               uvarint length+1, 0 = null
//            array   int32 count,  -1 = null               uvarint count+1,  0 = null
//   flexible structs end with a tagged-field section: uvarint count, then
//   per field uvarint tag, uvarint size, value.
//
// Threading: readers and writers are plain values owned by one thread.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/limits.h"
#include "base/result.h"

namespace sluice::protocol {

// Kafka's uuid (topic ids): 16 raw bytes, all zero = "no id".
using uuid = std::array<uint8_t, 16>;

// A region of an open file that the network layer sends with sendfile(2)
// instead of copying it through user space. `owner` keeps whatever owns the
// descriptor (a segment handle) alive until the response has been sent; the
// codec never reads or closes `fd` itself.
struct file_region {
  std::shared_ptr<const void> owner;
  int fd = -1;
  uint64_t pos = 0;     // byte position in the file
  uint64_t length = 0;  // bytes to send from pos
  bool operator==(const file_region& o) const {
    return fd == o.fd && pos == o.pos && length == o.length;
  }
};

// The value of a `records` field: null, or a sequence of parts that together
// form the record batches.
//
// - Decoding gives exactly one in-memory part: a view into the reader's
//   buffer (zero-copy). It is valid only while that buffer lives.
// - For encoding, a caller appends in-memory views (referenced, not copied,
//   unless small: see limits::min_referenced_chunk_bytes) and file regions;
//   the writer emits the length prefix and then the parts as chunks.
class records_field {
 public:
  using part = std::variant<std::span<const uint8_t>, file_region>;

  records_field() = default;  // null
  // A non-null view of `bytes` (which may be empty).
  static records_field of(std::span<const uint8_t> bytes) {
    records_field r;
    r.null_ = false;
    if (!bytes.empty()) r.append(bytes);
    return r;
  }
  // A non-null, empty value (zero bytes, which is not the same as null).
  static records_field empty() { return of({}); }

  void append(std::span<const uint8_t> bytes) {
    null_ = false;
    size_ += bytes.size();
    parts_.emplace_back(bytes);
  }
  void append(file_region region) {
    null_ = false;
    size_ += region.length;
    parts_.emplace_back(std::move(region));
  }

  bool is_null() const { return null_; }
  uint64_t size_bytes() const { return size_; }
  const std::vector<part>& parts() const { return parts_; }
  // The bytes when the value is one in-memory part (every decoded value),
  // empty if null or empty. Asserts if the value holds file regions or
  // several parts: such values exist only on the encode side.
  std::span<const uint8_t> view() const;

  // Equal when both are null, or both hold the same bytes in memory; file
  // regions compare by identity (fd, pos, length).
  bool operator==(const records_field& o) const;

 private:
  bool null_ = true;
  uint64_t size_ = 0;
  std::vector<part> parts_;
};

// One piece of an encoded response.
struct chunk {
  enum class kind : uint8_t {
    owned,   // bytes in response_chunks::owned(), at [offset, offset+length)
    memory,  // bytes the caller keeps alive until sent (a records view)
    file,    // a file region to send with sendfile(2)
  };
  kind type = kind::owned;
  uint64_t offset = 0;
  uint64_t length = 0;
  std::span<const uint8_t> memory;
  file_region file;
};

// An encoded message ready to send: the concatenation of chunks() in order.
// Owned bytes are held here; memory and file chunks borrow from the caller,
// who must keep them alive (file_region::owner helps) until the last byte
// is written to the socket. The network layer sends consecutive owned and
// memory chunks with writev and file chunks with sendfile.
class response_chunks {
 public:
  const std::vector<uint8_t>& owned() const { return owned_; }
  const std::vector<chunk>& chunks() const { return chunks_; }
  uint64_t size_bytes() const { return size_; }
  // The bytes of one owned or memory chunk.
  std::span<const uint8_t> bytes_of(const chunk& c) const;
  // Copies everything into one buffer; file regions are read with pread(2).
  // For tests and tools, not the data path.
  result<std::vector<uint8_t>> flatten() const;

 private:
  friend class writer;
  std::vector<uint8_t> owned_;
  std::vector<chunk> chunks_;
  uint64_t size_ = 0;
};

// Appends encoded values. Writing cannot fail: the values come from Sluice's
// own code. Where a value does not fit its encoding (a classic string longer
// than 32767 bytes) it is truncated, and a null value in a version where the
// field is not nullable is written as empty; both are documented fallbacks,
// not silent corruption of well-formed data.
class writer {
 public:
  writer() = default;

  void write_bool(bool v) { write_int8(v ? 1 : 0); }
  void write_int8(int8_t v) { buf_.push_back(static_cast<uint8_t>(v)); }
  void write_int16(int16_t v);
  void write_int32(int32_t v);
  void write_int64(int64_t v);
  void write_uint16(uint16_t v) { write_int16(static_cast<int16_t>(v)); }
  void write_uint32(uint32_t v) { write_int32(static_cast<int32_t>(v)); }
  void write_float64(double v);
  void write_uuid(const uuid& v) { write_raw(v); }
  void write_uvarint(uint32_t v);
  void write_uvarlong(uint64_t v);
  // Zig-zag signed varints (inside records): 0, -1, 1, -2 -> 0, 1, 2, 3.
  void write_varint(int32_t v) { write_uvarint((static_cast<uint32_t>(v) << 1) ^ static_cast<uint32_t>(v >> 31)); }
  void write_varlong(int64_t v) { write_uvarlong((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63)); }
  void write_raw(std::span<const uint8_t> bytes) { buf_.insert(buf_.end(), bytes.begin(), bytes.end()); }

  void write_string(std::string_view s, bool flex);
  void write_nullable_string(const std::optional<std::string>& s, bool flex);
  void write_bytes(std::span<const uint8_t> b, bool flex);
  void write_nullable_bytes(const std::optional<std::vector<uint8_t>>& b, bool flex);
  void write_array_length(size_t n, bool flex);
  void write_null_array(bool flex);
  void write_records(const records_field& r, bool flex);
  // A tagged field's size and value, taken from a side writer that holds
  // only owned bytes.
  void write_tagged_value(const writer& value);

  // Total bytes written so far, external chunks included.
  uint64_t size_bytes() const { return external_bytes_ + buf_.size(); }
  // Reserves 4 owned bytes (for a frame length) and returns their position
  // in the owned buffer, to be filled in with patch_int32.
  size_t reserve_int32();
  void patch_int32(size_t owned_pos, int32_t v);
  // The owned bytes; the whole output when no external chunk was added.
  std::span<const uint8_t> owned_bytes() const { return buf_; }
  bool has_external_chunks() const { return !chunks_.empty(); }

  response_chunks finish() &&;

 private:
  void close_owned();
  void add_memory(std::span<const uint8_t> bytes);
  void add_file(const file_region& region);

  std::vector<uint8_t> buf_;
  std::vector<chunk> chunks_;
  size_t open_from_ = 0;  // start of the owned bytes not yet in chunks_
  uint64_t external_bytes_ = 0;
};

// Reads encoded values from a buffer it does not own. Every read is bounds
// checked. The first failure is sticky: later reads return zero values, the
// position jumps to the end, and to_status() reports the first error as
// errc::malformed. Array counts are checked against the remaining bytes and
// against an element budget shared by all arrays of one message
// (limits::max_decoded_array_elements) before anything is reserved.
class reader {
 public:
  explicit reader(std::span<const uint8_t> buf,
                  size_t element_budget = limits::max_decoded_array_elements)
      : buf_(buf), own_budget_(element_budget), budget_(&own_budget_) {}
  reader(const reader&) = delete;
  reader& operator=(const reader&) = delete;

  bool ok() const { return !failed_; }
  size_t remaining() const { return buf_.size() - pos_; }
  size_t position() const { return pos_; }
  // The bytes not read yet.
  std::span<const uint8_t> rest() const { return buf_.subspan(pos_); }
  sluice::status to_status() const;
  // Records a failure (the first one wins).
  void fail(std::string_view what);
  // Takes over a sub-reader's failure.
  void adopt_failure(const reader& sub);

  bool read_bool() { return read_int8() != 0; }
  int8_t read_int8();
  int16_t read_int16();
  int32_t read_int32();
  int64_t read_int64();
  uint16_t read_uint16() { return static_cast<uint16_t>(read_int16()); }
  uint32_t read_uint32() { return static_cast<uint32_t>(read_int32()); }
  double read_float64();
  uuid read_uuid();
  uint32_t read_uvarint();
  uint64_t read_uvarlong();
  int32_t read_varint() {
    const uint32_t u = read_uvarint();
    return static_cast<int32_t>((u >> 1) ^ (0u - (u & 1)));
  }
  int64_t read_varlong() {
    const uint64_t u = read_uvarlong();
    return static_cast<int64_t>((u >> 1) ^ (0ull - (u & 1)));
  }
  std::span<const uint8_t> read_raw(size_t n);

  std::string read_string(bool flex);
  std::optional<std::string> read_nullable_string(bool flex);
  std::vector<uint8_t> read_bytes(bool flex);
  std::optional<std::vector<uint8_t>> read_nullable_bytes(bool flex);
  // A view into the buffer; null is reported as nullopt.
  std::optional<std::span<const uint8_t>> read_bytes_view(bool flex);
  records_field read_records(bool flex);
  // -1 for null, else the element count, after checking that count
  // elements of at least min_element_bytes each fit in what remains and in
  // the element budget.
  int64_t read_array_length(bool flex, size_t min_element_bytes);
  // Reads a tagged field's size and returns a reader over its value; this
  // reader moves past it. The sub-reader shares the element budget.
  reader tagged_value();

 private:
  reader(std::span<const uint8_t> buf, size_t* budget) : buf_(buf), own_budget_(0), budget_(budget) {}
  bool need(size_t n, std::string_view what);
  // Length prefix of a string or bytes: -1 for null.
  int64_t read_length(bool flex, bool is_string);

  std::span<const uint8_t> buf_;
  size_t pos_ = 0;
  bool failed_ = false;
  std::string error_;
  size_t own_budget_;
  size_t* budget_;
};

}  // namespace sluice::protocol
