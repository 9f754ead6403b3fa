#include "protocol/records/compression.h"

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <cstring>
#include <memory>

#include "base/endian.h"

namespace sluice::protocol::records {

namespace {

error corrupt(std::string_view codec, std::string_view what) {
  return error{errc::corrupt_data, std::string(codec) + ": " + std::string(what)};
}

error too_large(std::string_view codec, size_t max_bytes) {
  return error{errc::message_too_large,
               std::string(codec) + ": decompressed data exceeds " + std::to_string(max_bytes) + " bytes"};
}

// Output grows in steps so a small input never reserves max_bytes up front.
size_t next_capacity(size_t have, size_t in_size, size_t max_bytes) {
  const size_t want = have == 0 ? std::max<size_t>(in_size * 4, 4096) : have * 2;
  return std::min(want, max_bytes + 1);  // +1 so "exactly full" is detectable
}

// ---- gzip -------------------------------------------------------------------

result<std::vector<uint8_t>> gzip_compress(std::span<const uint8_t> in) {
  z_stream zs{};
  // 15 window bits + 16: a gzip wrapper, as Kafka's GZIPOutputStream writes.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return error{errc::io_error, "gzip: deflateInit2 failed"};
  std::vector<uint8_t> out(deflateBound(&zs, in.size()) + 32);
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = out.data();
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  const size_t produced = zs.total_out;
  deflateEnd(&zs);
  if (rc != Z_STREAM_END) return error{errc::io_error, "gzip: deflate did not finish"};
  out.resize(produced);
  return out;
}

result<std::vector<uint8_t>> gzip_decompress(std::span<const uint8_t> in, size_t max_bytes) {
  z_stream zs{};
  // 15 + 32: accept gzip or zlib headers.
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return error{errc::io_error, "gzip: inflateInit2 failed"};
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, inflateEnd);
  std::vector<uint8_t> out;
  size_t used = 0;
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = static_cast<uInt>(in.size());
  while (true) {
    if (used == out.size()) {
      if (out.size() > max_bytes) return too_large("gzip", max_bytes);
      out.resize(next_capacity(out.size(), in.size(), max_bytes));
    }
    zs.next_out = out.data() + used;
    zs.avail_out = static_cast<uInt>(out.size() - used);
    const int rc = inflate(&zs, Z_NO_FLUSH);
    used = out.size() - zs.avail_out;
    if (used > max_bytes) return too_large("gzip", max_bytes);
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      // Another gzip member follows.
      if (inflateReset(&zs) != Z_OK) return corrupt("gzip", "inflateReset failed");
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) return corrupt("gzip", "truncated stream");
    if (rc != Z_OK && rc != Z_BUF_ERROR) return corrupt("gzip", zs.msg ? zs.msg : "inflate failed");
  }
  out.resize(used);
  return out;
}

// ---- snappy -------------------------------------------------------------------

constexpr uint8_t xerial_magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
constexpr size_t xerial_header_bytes = 16;  // magic, int32 version, int32 compatible
constexpr size_t xerial_block_bytes = 32 * 1024;  // what the Java client uses

result<std::vector<uint8_t>> snappy_compress_framed(std::span<const uint8_t> in) {
  std::vector<uint8_t> out(xerial_header_bytes);
  std::memcpy(out.data(), xerial_magic, sizeof xerial_magic);
  store_be<int32_t>(out.data() + 8, 1);
  store_be<int32_t>(out.data() + 12, 1);
  for (size_t off = 0; off < in.size(); off += xerial_block_bytes) {
    const size_t n = std::min(xerial_block_bytes, in.size() - off);
    size_t clen = snappy_max_compressed_length(n);
    const size_t at = out.size();
    out.resize(at + 4 + clen);
    if (snappy_compress(reinterpret_cast<const char*>(in.data() + off), n,
                        reinterpret_cast<char*>(out.data() + at + 4), &clen) != SNAPPY_OK)
      return error{errc::io_error, "snappy: compress failed"};
    store_be<int32_t>(out.data() + at, static_cast<int32_t>(clen));
    out.resize(at + 4 + clen);
  }
  return out;
}

status snappy_raw_append(std::span<const uint8_t> block, std::vector<uint8_t>& out, size_t max_bytes) {
  size_t n = 0;
  if (snappy_uncompressed_length(reinterpret_cast<const char*>(block.data()), block.size(), &n) != SNAPPY_OK)
    return corrupt("snappy", "bad block header");
  if (n > max_bytes || out.size() + n > max_bytes) return too_large("snappy", max_bytes);
  const size_t at = out.size();
  out.resize(at + n);
  size_t got = n;
  if (snappy_uncompress(reinterpret_cast<const char*>(block.data()), block.size(),
                        reinterpret_cast<char*>(out.data() + at), &got) != SNAPPY_OK ||
      got != n)
    return corrupt("snappy", "damaged block");
  return {};
}

result<std::vector<uint8_t>> snappy_decompress(std::span<const uint8_t> in, size_t max_bytes) {
  std::vector<uint8_t> out;
  if (in.size() >= sizeof xerial_magic && std::memcmp(in.data(), xerial_magic, sizeof xerial_magic) == 0) {
    if (in.size() < xerial_header_bytes) return corrupt("snappy", "truncated xerial header");
    size_t pos = xerial_header_bytes;
    while (pos < in.size()) {
      if (in.size() - pos < 4) return corrupt("snappy", "truncated xerial block length");
      const int32_t len = load_be<int32_t>(in.data() + pos);
      pos += 4;
      if (len < 0 || static_cast<size_t>(len) > in.size() - pos) return corrupt("snappy", "bad xerial block length");
      SLUICE_TRY(snappy_raw_append(in.subspan(pos, static_cast<size_t>(len)), out, max_bytes));
      pos += static_cast<size_t>(len);
    }
    return out;
  }
  SLUICE_TRY(snappy_raw_append(in, out, max_bytes));
  return out;
}

// ---- lz4 --------------------------------------------------------------------

result<std::vector<uint8_t>> lz4_compress(std::span<const uint8_t> in) {
  LZ4F_preferences_t prefs;
  std::memset(&prefs, 0, sizeof prefs);
  prefs.frameInfo.blockSizeID = LZ4F_max64KB;
  prefs.frameInfo.blockMode = LZ4F_blockIndependent;
  std::vector<uint8_t> out(LZ4F_compressFrameBound(in.size(), &prefs));
  const size_t n = LZ4F_compressFrame(out.data(), out.size(), in.data(), in.size(), &prefs);
  if (LZ4F_isError(n)) return error{errc::io_error, std::string("lz4: ") + LZ4F_getErrorName(n)};
  out.resize(n);
  return out;
}

result<std::vector<uint8_t>> lz4_decompress(std::span<const uint8_t> in, size_t max_bytes) {
  LZ4F_dctx* dctx = nullptr;
  if (LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION)))
    return error{errc::io_error, "lz4: cannot create a context"};
  std::unique_ptr<LZ4F_dctx, LZ4F_errorCode_t (*)(LZ4F_dctx*)> guard(dctx, LZ4F_freeDecompressionContext);
  std::vector<uint8_t> out;
  size_t used = 0;
  size_t pos = 0;
  size_t hint = 1;
  while (pos < in.size()) {
    if (used == out.size()) {
      if (out.size() > max_bytes) return too_large("lz4", max_bytes);
      out.resize(next_capacity(out.size(), in.size(), max_bytes));
    }
    size_t dst = out.size() - used;
    size_t src = in.size() - pos;
    hint = LZ4F_decompress(dctx, out.data() + used, &dst, in.data() + pos, &src, nullptr);
    if (LZ4F_isError(hint)) return corrupt("lz4", LZ4F_getErrorName(hint));
    used += dst;
    pos += src;
    if (used > max_bytes) return too_large("lz4", max_bytes);
    if (hint == 0 && pos < in.size()) {
      // A frame ended and another one follows; the context resets itself.
      continue;
    }
    if (src == 0 && dst == 0) return corrupt("lz4", "no progress");
  }
  // Drain output still buffered inside the context.
  while (hint != 0) {
    if (used == out.size()) {
      if (out.size() > max_bytes) return too_large("lz4", max_bytes);
      out.resize(next_capacity(out.size(), in.size(), max_bytes));
    }
    size_t dst = out.size() - used;
    size_t src = 0;
    hint = LZ4F_decompress(dctx, out.data() + used, &dst, nullptr, &src, nullptr);
    if (LZ4F_isError(hint)) return corrupt("lz4", LZ4F_getErrorName(hint));
    used += dst;
    if (used > max_bytes) return too_large("lz4", max_bytes);
    if (dst == 0 && hint != 0) return corrupt("lz4", "truncated frame");
  }
  out.resize(used);
  return out;
}

// ---- zstd -------------------------------------------------------------------

result<std::vector<uint8_t>> zstd_compress(std::span<const uint8_t> in) {
  std::vector<uint8_t> out(ZSTD_compressBound(in.size()));
  const size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), ZSTD_CLEVEL_DEFAULT);
  if (ZSTD_isError(n)) return error{errc::io_error, std::string("zstd: ") + ZSTD_getErrorName(n)};
  out.resize(n);
  return out;
}

result<std::vector<uint8_t>> zstd_decompress(std::span<const uint8_t> in, size_t max_bytes) {
  std::unique_ptr<ZSTD_DStream, size_t (*)(ZSTD_DStream*)> ds(ZSTD_createDStream(), ZSTD_freeDStream);
  if (!ds) return error{errc::io_error, "zstd: cannot create a stream"};
  ZSTD_initDStream(ds.get());
  std::vector<uint8_t> out;
  ZSTD_inBuffer ib{in.data(), in.size(), 0};
  size_t last = 1;
  while (true) {
    if (ib.pos == ib.size && last == 0) break;
    if (out.size() > max_bytes) return too_large("zstd", max_bytes);
    const size_t used = out.size();
    out.resize(next_capacity(used, in.size(), max_bytes));
    ZSTD_outBuffer ob{out.data(), out.size(), used};
    const size_t before_in = ib.pos;
    last = ZSTD_decompressStream(ds.get(), &ob, &ib);
    if (ZSTD_isError(last)) return corrupt("zstd", ZSTD_getErrorName(last));
    out.resize(ob.pos);
    if (ob.pos > max_bytes) return too_large("zstd", max_bytes);
    if (ib.pos == ib.size && last != 0 && ob.pos == used && before_in == ib.pos)
      return corrupt("zstd", "truncated frame");
  }
  return out;
}

}  // namespace

std::string_view compression_name(compression c) {
  switch (c) {
    case compression::none: return "none";
    case compression::gzip: return "gzip";
    case compression::snappy: return "snappy";
    case compression::lz4: return "lz4";
    case compression::zstd: return "zstd";
  }
  return "unknown";
}

result<std::vector<uint8_t>> compress(compression c, std::span<const uint8_t> in) {
  switch (c) {
    case compression::none: return std::vector<uint8_t>(in.begin(), in.end());
    case compression::gzip: return gzip_compress(in);
    case compression::snappy: return snappy_compress_framed(in);
    case compression::lz4: return lz4_compress(in);
    case compression::zstd: return zstd_compress(in);
  }
  return error{errc::invalid_argument, "unknown compression codec " + std::to_string(static_cast<int>(c))};
}

result<std::vector<uint8_t>> decompress(compression c, std::span<const uint8_t> in, size_t max_bytes) {
  switch (c) {
    case compression::none:
      if (in.size() > max_bytes) return too_large("none", max_bytes);
      return std::vector<uint8_t>(in.begin(), in.end());
    case compression::gzip: return gzip_decompress(in, max_bytes);
    case compression::snappy: return snappy_decompress(in, max_bytes);
    case compression::lz4: return lz4_decompress(in, max_bytes);
    case compression::zstd: return zstd_decompress(in, max_bytes);
  }
  return error{errc::invalid_argument, "unknown compression codec " + std::to_string(static_cast<int>(c))};
}

}  // namespace sluice::protocol::records
