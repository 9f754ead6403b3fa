#include "protocol/records/compression.h"

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
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

// Where decompressed bytes go: buf[0, used). buf.size() is the capacity
// already touched: std::vector zero-fills only growth, so a buffer reused
// across calls costs no fill and no page faults once it has grown.
struct sink {
  std::vector<uint8_t>& buf;
  size_t max_bytes;
  size_t in_size;
  size_t used = 0;

  // Output may reach max_bytes + 1, so "more than max_bytes" is detectable.
  size_t limit() const { return std::min(buf.size(), max_bytes + 1); }
  uint8_t* tail() { return buf.data() + used; }
  size_t room() const { return limit() - used; }
  // Makes room for more output; false once max_bytes + 1 is reached.
  bool grow() {
    if (limit() == max_bytes + 1) return false;
    buf.resize(next_capacity(buf.size(), in_size, max_bytes));
    return true;
  }
};

// Codec state that decompress_reusing keeps per thread. Creating a zstd
// stream allocates its window (up to 8 MiB for the levels clients use) and
// a gzip one 40 KiB, every time; reset, they are reused.
struct codec_contexts {
  ZSTD_DCtx* zstd = nullptr;
  LZ4F_dctx* lz4 = nullptr;
  z_stream zs{};
  bool zs_ready = false;
  codec_contexts() = default;
  codec_contexts(const codec_contexts&) = delete;
  codec_contexts& operator=(const codec_contexts&) = delete;
  ~codec_contexts() {
    if (zstd) ZSTD_freeDCtx(zstd);
    if (lz4) LZ4F_freeDecompressionContext(lz4);
    if (zs_ready) inflateEnd(&zs);
  }
};

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

status gzip_decompress(std::span<const uint8_t> in, sink& out, codec_contexts& ctx) {
  z_stream& zs = ctx.zs;
  // 15 + 32: accept gzip or zlib headers.
  if (!ctx.zs_ready) {
    zs = z_stream{};
    if (inflateInit2(&zs, 15 + 32) != Z_OK) return status(errc::io_error, "gzip: inflateInit2 failed");
    ctx.zs_ready = true;
  } else if (inflateReset(&zs) != Z_OK) {
    return status(errc::io_error, "gzip: inflateReset failed");
  }
  zs.next_in = const_cast<Bytef*>(in.data());
  zs.avail_in = static_cast<uInt>(in.size());
  while (true) {
    if (out.room() == 0 && !out.grow()) return too_large("gzip", out.max_bytes);
    zs.next_out = out.tail();
    zs.avail_out = static_cast<uInt>(out.room());
    const int rc = inflate(&zs, Z_NO_FLUSH);
    out.used = out.limit() - zs.avail_out;
    if (out.used > out.max_bytes) return too_large("gzip", out.max_bytes);
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      // Another gzip member follows.
      if (inflateReset(&zs) != Z_OK) return corrupt("gzip", "inflateReset failed");
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) return corrupt("gzip", "truncated stream");
    if (rc != Z_OK && rc != Z_BUF_ERROR) return corrupt("gzip", zs.msg ? zs.msg : "inflate failed");
  }
  return {};
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

status snappy_raw_append(std::span<const uint8_t> block, sink& out) {
  size_t n = 0;
  if (snappy_uncompressed_length(reinterpret_cast<const char*>(block.data()), block.size(), &n) != SNAPPY_OK)
    return corrupt("snappy", "bad block header");
  if (n > out.max_bytes || out.used + n > out.max_bytes) return too_large("snappy", out.max_bytes);
  while (out.room() < n) out.grow();
  size_t got = n;
  if (snappy_uncompress(reinterpret_cast<const char*>(block.data()), block.size(),
                        reinterpret_cast<char*>(out.tail()), &got) != SNAPPY_OK ||
      got != n)
    return corrupt("snappy", "damaged block");
  out.used += n;
  return {};
}

status snappy_decompress(std::span<const uint8_t> in, sink& out) {
  if (in.size() >= sizeof xerial_magic && std::memcmp(in.data(), xerial_magic, sizeof xerial_magic) == 0) {
    if (in.size() < xerial_header_bytes) return corrupt("snappy", "truncated xerial header");
    size_t pos = xerial_header_bytes;
    while (pos < in.size()) {
      if (in.size() - pos < 4) return corrupt("snappy", "truncated xerial block length");
      const int32_t len = load_be<int32_t>(in.data() + pos);
      pos += 4;
      if (len < 0 || static_cast<size_t>(len) > in.size() - pos) return corrupt("snappy", "bad xerial block length");
      SLUICE_TRY(snappy_raw_append(in.subspan(pos, static_cast<size_t>(len)), out));
      pos += static_cast<size_t>(len);
    }
    return {};
  }
  return snappy_raw_append(in, out);
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

status lz4_decompress(std::span<const uint8_t> in, sink& out, codec_contexts& ctx) {
  if (!ctx.lz4) {
    if (LZ4F_isError(LZ4F_createDecompressionContext(&ctx.lz4, LZ4F_VERSION))) {
      ctx.lz4 = nullptr;
      return status(errc::io_error, "lz4: cannot create a context");
    }
  } else {
    LZ4F_resetDecompressionContext(ctx.lz4);
  }
  LZ4F_dctx* dctx = ctx.lz4;
  size_t pos = 0;
  size_t hint = 1;
  while (pos < in.size()) {
    if (out.room() == 0 && !out.grow()) return too_large("lz4", out.max_bytes);
    size_t dst = out.room();
    size_t src = in.size() - pos;
    hint = LZ4F_decompress(dctx, out.tail(), &dst, in.data() + pos, &src, nullptr);
    if (LZ4F_isError(hint)) return corrupt("lz4", LZ4F_getErrorName(hint));
    out.used += dst;
    pos += src;
    if (out.used > out.max_bytes) return too_large("lz4", out.max_bytes);
    if (hint == 0 && pos < in.size()) {
      // A frame ended and another one follows; the context resets itself.
      continue;
    }
    if (src == 0 && dst == 0) return corrupt("lz4", "no progress");
  }
  // Drain output still buffered inside the context.
  while (hint != 0) {
    if (out.room() == 0 && !out.grow()) return too_large("lz4", out.max_bytes);
    size_t dst = out.room();
    size_t src = 0;
    hint = LZ4F_decompress(dctx, out.tail(), &dst, nullptr, &src, nullptr);
    if (LZ4F_isError(hint)) return corrupt("lz4", LZ4F_getErrorName(hint));
    out.used += dst;
    if (out.used > out.max_bytes) return too_large("lz4", out.max_bytes);
    if (dst == 0 && hint != 0) return corrupt("lz4", "truncated frame");
  }
  return {};
}

// ---- zstd -------------------------------------------------------------------

result<std::vector<uint8_t>> zstd_compress(std::span<const uint8_t> in) {
  std::vector<uint8_t> out(ZSTD_compressBound(in.size()));
  const size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), ZSTD_CLEVEL_DEFAULT);
  if (ZSTD_isError(n)) return error{errc::io_error, std::string("zstd: ") + ZSTD_getErrorName(n)};
  out.resize(n);
  return out;
}

status zstd_decompress(std::span<const uint8_t> in, sink& out, codec_contexts& ctx) {
  if (!ctx.zstd) {
    ctx.zstd = ZSTD_createDCtx();
    if (!ctx.zstd) return status(errc::io_error, "zstd: cannot create a context");
  } else {
    ZSTD_DCtx_reset(ctx.zstd, ZSTD_reset_session_only);
  }
  ZSTD_inBuffer ib{in.data(), in.size(), 0};
  size_t last = 1;
  while (true) {
    if (ib.pos == ib.size && last == 0) break;
    if (out.room() == 0 && !out.grow()) return too_large("zstd", out.max_bytes);
    ZSTD_outBuffer ob{out.buf.data(), out.limit(), out.used};
    const size_t before_in = ib.pos, before_out = out.used;
    last = ZSTD_decompressStream(ctx.zstd, &ob, &ib);
    if (ZSTD_isError(last)) return corrupt("zstd", ZSTD_getErrorName(last));
    out.used = ob.pos;
    if (out.used > out.max_bytes) return too_large("zstd", out.max_bytes);
    if (ib.pos == ib.size && last != 0 && out.used == before_out && before_in == ib.pos)
      return corrupt("zstd", "truncated frame");
  }
  return {};
}

status decompress_to(compression c, std::span<const uint8_t> in, sink& out, codec_contexts& ctx) {
  switch (c) {
    case compression::none:
      if (in.size() > out.max_bytes) return too_large("none", out.max_bytes);
      while (out.room() < in.size()) out.grow();
      if (!in.empty()) std::memcpy(out.tail(), in.data(), in.size());
      out.used = in.size();
      return {};
    case compression::gzip: return gzip_decompress(in, out, ctx);
    case compression::snappy: return snappy_decompress(in, out);
    case compression::lz4: return lz4_decompress(in, out, ctx);
    case compression::zstd: return zstd_decompress(in, out, ctx);
  }
  return status(errc::invalid_argument, "unknown compression codec " + std::to_string(static_cast<int>(c)));
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
  std::vector<uint8_t> buf;
  sink out{buf, max_bytes, in.size()};
  codec_contexts ctx;
  SLUICE_TRY(decompress_to(c, in, out, ctx));
  buf.resize(out.used);
  return buf;
}

result<std::span<const uint8_t>> decompress_reusing(compression c, std::span<const uint8_t> in, size_t max_bytes,
                                                    std::vector<uint8_t>& buffer) {
  thread_local codec_contexts ctx;
  sink out{buffer, max_bytes, in.size()};
  SLUICE_TRY(decompress_to(c, in, out, ctx));
  return std::span<const uint8_t>(buffer.data(), out.used);
}

}  // namespace sluice::protocol::records
