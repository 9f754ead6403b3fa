#include "protocol/codec.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/endian.h"

namespace sluice::protocol {

// ---- records_field ----------------------------------------------------------

std::span<const uint8_t> records_field::view() const {
  if (parts_.empty()) return {};
  SLUICE_ASSERT(parts_.size() == 1 && std::holds_alternative<std::span<const uint8_t>>(parts_[0]),
                "records_field::view() on a value with external parts");
  return std::get<std::span<const uint8_t>>(parts_[0]);
}

bool records_field::operator==(const records_field& o) const {
  if (null_ != o.null_ || size_ != o.size_) return false;
  // Compare byte by byte across part boundaries for memory parts; a file
  // region must meet an identical region at the same place.
  size_t ai = 0, bi = 0;
  uint64_t ao = 0, bo = 0;
  while (ai < parts_.size() || bi < o.parts_.size()) {
    // Skip empty memory parts.
    auto skip_empty = [](const std::vector<part>& ps, size_t& i, uint64_t& off) {
      while (i < ps.size() && std::holds_alternative<std::span<const uint8_t>>(ps[i]) &&
             off == std::get<std::span<const uint8_t>>(ps[i]).size()) {
        ++i;
        off = 0;
      }
    };
    skip_empty(parts_, ai, ao);
    skip_empty(o.parts_, bi, bo);
    if (ai == parts_.size() || bi == o.parts_.size()) return ai == parts_.size() && bi == o.parts_.size();
    const part& a = parts_[ai];
    const part& b = o.parts_[bi];
    if (std::holds_alternative<file_region>(a) || std::holds_alternative<file_region>(b)) {
      if (!std::holds_alternative<file_region>(a) || !std::holds_alternative<file_region>(b)) return false;
      if (ao != 0 || bo != 0 || !(std::get<file_region>(a) == std::get<file_region>(b))) return false;
      ++ai;
      ++bi;
      continue;
    }
    auto sa = std::get<std::span<const uint8_t>>(a).subspan(ao);
    auto sb = std::get<std::span<const uint8_t>>(b).subspan(bo);
    const size_t n = std::min(sa.size(), sb.size());
    if (std::memcmp(sa.data(), sb.data(), n) != 0) return false;
    ao += n;
    bo += n;
  }
  return true;
}

// ---- response_chunks ----------------------------------------------------------

std::span<const uint8_t> response_chunks::bytes_of(const chunk& c) const {
  switch (c.type) {
    case chunk::kind::owned:
      return std::span<const uint8_t>(owned_).subspan(c.offset, c.length);
    case chunk::kind::memory:
      return c.memory;
    case chunk::kind::file:
      break;
  }
  SLUICE_ASSERT(false, "bytes_of() on a file chunk");
  return {};
}

result<std::vector<uint8_t>> response_chunks::flatten() const {
  std::vector<uint8_t> out;
  out.reserve(size_);
  for (const chunk& c : chunks_) {
    if (c.type != chunk::kind::file) {
      auto b = bytes_of(c);
      out.insert(out.end(), b.begin(), b.end());
      continue;
    }
    const size_t start = out.size();
    out.resize(start + c.length);
    uint64_t done = 0;
    while (done < c.length) {
      const ssize_t n = ::pread(c.file.fd, out.data() + start + done, c.length - done,
                                static_cast<off_t>(c.file.pos + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return error{errc::io_error, "pread of a file chunk failed or hit end of file"};
      done += static_cast<uint64_t>(n);
    }
  }
  return out;
}

// ---- writer -----------------------------------------------------------------

void writer::write_int16(int16_t v) {
  const size_t p = buf_.size();
  buf_.resize(p + 2);
  store_be(buf_.data() + p, v);
}

void writer::write_int32(int32_t v) {
  const size_t p = buf_.size();
  buf_.resize(p + 4);
  store_be(buf_.data() + p, v);
}

void writer::write_int64(int64_t v) {
  const size_t p = buf_.size();
  buf_.resize(p + 8);
  store_be(buf_.data() + p, v);
}

void writer::write_float64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  write_int64(static_cast<int64_t>(bits));
}

void writer::write_uvarint(uint32_t v) { write_uvarlong(v); }

void writer::write_uvarlong(uint64_t v) {
  while (v >= 0x80) {
    buf_.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  buf_.push_back(static_cast<uint8_t>(v));
}

void writer::write_string(std::string_view s, bool flex) {
  if (flex) {
    write_uvarlong(uint64_t{s.size()} + 1);
  } else {
    if (s.size() > 0x7fff) s = s.substr(0, 0x7fff);
    write_int16(static_cast<int16_t>(s.size()));
  }
  buf_.insert(buf_.end(), s.begin(), s.end());
}

void writer::write_nullable_string(const std::optional<std::string>& s, bool flex) {
  if (s.has_value()) return write_string(*s, flex);
  if (flex) {
    write_uvarint(0);
  } else {
    write_int16(-1);
  }
}

void writer::write_bytes(std::span<const uint8_t> b, bool flex) {
  SLUICE_ASSERT(b.size() <= 0x7fffffff, "bytes field larger than 2 GiB");
  if (flex) {
    write_uvarlong(uint64_t{b.size()} + 1);
  } else {
    write_int32(static_cast<int32_t>(b.size()));
  }
  write_raw(b);
}

void writer::write_nullable_bytes(const std::optional<std::vector<uint8_t>>& b, bool flex) {
  if (b.has_value()) return write_bytes(*b, flex);
  if (flex) {
    write_uvarint(0);
  } else {
    write_int32(-1);
  }
}

void writer::write_array_length(size_t n, bool flex) {
  SLUICE_ASSERT(n <= 0x7fffffff, "array with more than 2^31 elements");
  if (flex) {
    write_uvarlong(uint64_t{n} + 1);
  } else {
    write_int32(static_cast<int32_t>(n));
  }
}

void writer::write_null_array(bool flex) {
  if (flex) {
    write_uvarint(0);
  } else {
    write_int32(-1);
  }
}

void writer::write_records(const records_field& r, bool flex) {
  if (r.is_null()) {
    if (flex) {
      write_uvarint(0);
    } else {
      write_int32(-1);
    }
    return;
  }
  SLUICE_ASSERT(r.size_bytes() <= 0x7fffffff, "records field larger than 2 GiB");
  if (flex) {
    write_uvarlong(r.size_bytes() + 1);
  } else {
    write_int32(static_cast<int32_t>(r.size_bytes()));
  }
  for (const auto& p : r.parts()) {
    if (const auto* mem = std::get_if<std::span<const uint8_t>>(&p)) {
      if (mem->size() < limits::min_referenced_chunk_bytes) {
        write_raw(*mem);
      } else {
        add_memory(*mem);
      }
    } else {
      add_file(std::get<file_region>(p));
    }
  }
}

void writer::write_tagged_value(const writer& value) {
  SLUICE_ASSERT(value.chunks_.empty(), "tagged field values are owned bytes only");
  write_uvarlong(value.buf_.size());
  write_raw(value.buf_);
}

size_t writer::reserve_int32() {
  const size_t p = buf_.size();
  buf_.resize(p + 4);
  return p;
}

void writer::patch_int32(size_t owned_pos, int32_t v) {
  SLUICE_ASSERT(owned_pos + 4 <= buf_.size(), "patch outside the owned buffer");
  store_be(buf_.data() + owned_pos, v);
}

void writer::close_owned() {
  if (buf_.size() > open_from_) {
    chunk c;
    c.type = chunk::kind::owned;
    c.offset = open_from_;
    c.length = buf_.size() - open_from_;
    chunks_.push_back(std::move(c));
    open_from_ = buf_.size();
  }
}

void writer::add_memory(std::span<const uint8_t> bytes) {
  close_owned();
  chunk c;
  c.type = chunk::kind::memory;
  c.length = bytes.size();
  c.memory = bytes;
  chunks_.push_back(std::move(c));
  external_bytes_ += bytes.size();
}

void writer::add_file(const file_region& region) {
  if (region.length == 0) return;
  close_owned();
  chunk c;
  c.type = chunk::kind::file;
  c.length = region.length;
  c.file = region;
  chunks_.push_back(std::move(c));
  external_bytes_ += region.length;
}

response_chunks writer::finish() && {
  close_owned();
  response_chunks out;
  out.size_ = size_bytes();
  out.owned_ = std::move(buf_);
  out.chunks_ = std::move(chunks_);
  return out;
}

// ---- reader -----------------------------------------------------------------

sluice::status reader::to_status() const {
  if (!failed_) return {};
  return sluice::status(errc::malformed, error_);
}

void reader::fail(std::string_view what) {
  if (failed_) return;
  failed_ = true;
  error_ = std::string(what) + " at byte " + std::to_string(pos_);
  pos_ = buf_.size();
}

void reader::adopt_failure(const reader& sub) {
  if (sub.failed_ && !failed_) {
    failed_ = true;
    error_ = "in a tagged field: " + sub.error_;
    pos_ = buf_.size();
  }
}

bool reader::need(size_t n, std::string_view what) {
  if (failed_) return false;
  if (remaining() < n) {
    fail(std::string("truncated ") + std::string(what));
    return false;
  }
  return true;
}

int8_t reader::read_int8() {
  if (!need(1, "int8")) return 0;
  return static_cast<int8_t>(buf_[pos_++]);
}

int16_t reader::read_int16() {
  if (!need(2, "int16")) return 0;
  const auto v = load_be<int16_t>(buf_.data() + pos_);
  pos_ += 2;
  return v;
}

int32_t reader::read_int32() {
  if (!need(4, "int32")) return 0;
  const auto v = load_be<int32_t>(buf_.data() + pos_);
  pos_ += 4;
  return v;
}

int64_t reader::read_int64() {
  if (!need(8, "int64")) return 0;
  const auto v = load_be<int64_t>(buf_.data() + pos_);
  pos_ += 8;
  return v;
}

double reader::read_float64() {
  const auto bits = static_cast<uint64_t>(read_int64());
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

uuid reader::read_uuid() {
  uuid u{};
  if (!need(16, "uuid")) return u;
  std::memcpy(u.data(), buf_.data() + pos_, 16);
  pos_ += 16;
  return u;
}

uint32_t reader::read_uvarint() {
  uint32_t v = 0;
  for (int i = 0; i < 5; ++i) {
    if (!need(1, "varint")) return 0;
    const uint8_t b = buf_[pos_++];
    if (i == 4 && (b & 0xf0) != 0) {
      fail("unsigned varint overflows 32 bits");
      return 0;
    }
    v |= static_cast<uint32_t>(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) return v;
  }
  fail("unsigned varint longer than 5 bytes");
  return 0;
}

uint64_t reader::read_uvarlong() {
  uint64_t v = 0;
  for (int i = 0; i < 10; ++i) {
    if (!need(1, "varlong")) return 0;
    const uint8_t b = buf_[pos_++];
    if (i == 9 && (b & 0xfe) != 0) {
      fail("unsigned varlong overflows 64 bits");
      return 0;
    }
    v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) return v;
  }
  fail("unsigned varlong longer than 10 bytes");
  return 0;
}

std::span<const uint8_t> reader::read_raw(size_t n) {
  if (!need(n, "bytes")) return {};
  auto s = buf_.subspan(pos_, n);
  pos_ += n;
  return s;
}

int64_t reader::read_length(bool flex, bool is_string) {
  if (flex) {
    const uint32_t n = read_uvarint();
    return static_cast<int64_t>(n) - 1;
  }
  if (is_string) {
    const int16_t n = read_int16();
    if (n < -1) fail("negative string length");
    return n;
  }
  const int32_t n = read_int32();
  if (n < -1) fail("negative bytes length");
  return n;
}

std::optional<std::string> reader::read_nullable_string(bool flex) {
  const int64_t n = read_length(flex, true);
  if (!ok() || n < 0) return std::nullopt;
  auto s = read_raw(static_cast<size_t>(n));
  if (!ok()) return std::nullopt;
  return std::string(reinterpret_cast<const char*>(s.data()), s.size());
}

std::string reader::read_string(bool flex) {
  const int64_t n = read_length(flex, true);
  if (!ok()) return {};
  if (n < 0) {
    fail("null string where the field is not nullable");
    return {};
  }
  auto s = read_raw(static_cast<size_t>(n));
  return std::string(reinterpret_cast<const char*>(s.data()), s.size());
}

std::optional<std::span<const uint8_t>> reader::read_bytes_view(bool flex) {
  const int64_t n = read_length(flex, false);
  if (!ok() || n < 0) return std::nullopt;
  auto s = read_raw(static_cast<size_t>(n));
  if (!ok()) return std::nullopt;
  return s;
}

std::optional<std::vector<uint8_t>> reader::read_nullable_bytes(bool flex) {
  auto v = read_bytes_view(flex);
  if (!v) return std::nullopt;
  return std::vector<uint8_t>(v->begin(), v->end());
}

std::vector<uint8_t> reader::read_bytes(bool flex) {
  auto v = read_bytes_view(flex);
  if (!ok()) return {};
  if (!v) {
    fail("null bytes where the field is not nullable");
    return {};
  }
  return std::vector<uint8_t>(v->begin(), v->end());
}

records_field reader::read_records(bool flex) {
  auto v = read_bytes_view(flex);
  if (!v) return records_field();
  return records_field::of(*v);
}

int64_t reader::read_array_length(bool flex, size_t min_element_bytes) {
  int64_t n;
  if (flex) {
    n = static_cast<int64_t>(read_uvarint()) - 1;
  } else {
    n = read_int32();
    if (n < -1) fail("negative array length");
  }
  if (!ok()) return 0;
  if (n <= 0) return n;
  const uint64_t count = static_cast<uint64_t>(n);
  if (count > remaining() / (min_element_bytes == 0 ? 1 : min_element_bytes)) {
    fail("array of " + std::to_string(count) + " elements cannot fit in " + std::to_string(remaining()) +
         " remaining bytes");
    return 0;
  }
  if (count > *budget_) {
    fail("more array elements than limits::max_decoded_array_elements allows");
    return 0;
  }
  *budget_ -= count;
  return n;
}

reader reader::tagged_value() {
  const uint32_t n = read_uvarint();
  if (!need(n, "tagged field")) return reader(std::span<const uint8_t>(), budget_);
  auto s = buf_.subspan(pos_, n);
  pos_ += n;
  return reader(s, budget_);
}

}  // namespace sluice::protocol
