#include "base/java_hash.h"

#include <cstddef>

namespace sluice {

namespace {

// Appends the UTF-16 code units of one UTF-8 sequence starting at s[i] to
// the hash; returns the bytes consumed. Invalid sequences count as one unit
// per byte (documented in docs/group_records.md).
size_t hash_one(std::string_view s, size_t i, uint32_t& h) {
  auto unit = [&](uint32_t u) { h = h * 31u + u; };
  const auto c = static_cast<uint8_t>(s[i]);
  auto cont = [&](size_t k) { return i + k < s.size() && (static_cast<uint8_t>(s[i + k]) & 0xC0) == 0x80; };
  auto cb = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[i + k]) & 0x3F); };
  if (c < 0x80) {
    unit(c);
    return 1;
  }
  if ((c & 0xE0) == 0xC0 && c >= 0xC2 && cont(1)) {
    unit(((c & 0x1Fu) << 6) | cb(1));
    return 2;
  }
  if ((c & 0xF0) == 0xE0 && cont(1) && cont(2)) {
    uint32_t cp = ((c & 0x0Fu) << 12) | (cb(1) << 6) | cb(2);
    if (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) {
      unit(cp);
      return 3;
    }
  }
  if ((c & 0xF8) == 0xF0 && cont(1) && cont(2) && cont(3)) {
    uint32_t cp = ((c & 0x07u) << 18) | (cb(1) << 12) | (cb(2) << 6) | cb(3);
    if (cp >= 0x10000 && cp <= 0x10FFFF) {
      cp -= 0x10000;
      unit(0xD800 + (cp >> 10));
      unit(0xDC00 + (cp & 0x3FF));
      return 4;
    }
  }
  unit(c);
  return 1;
}

}  // namespace

int32_t java_string_hash(std::string_view s) {
  uint32_t h = 0;
  for (size_t i = 0; i < s.size();) i += hash_one(s, i, h);
  return static_cast<int32_t>(h);
}

int32_t java_hash_partition(std::string_view key, int32_t partitions) {
  const int32_t h = java_string_hash(key);
  const int32_t a = h == INT32_MIN ? 0 : (h < 0 ? -h : h);
  return a % partitions;
}

}  // namespace sluice
