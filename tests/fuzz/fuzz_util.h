#pragma once

// Shared by the fuzz targets.

#include <cstddef>
#include <cstdio>
#include <cstdlib>

namespace sluice::fuzz {

// Decompressed output is capped low so the fuzzers spend their time on
// parsing rather than on inflating.
inline constexpr size_t decompress_cap = 1 << 20;

// A property the target checks: a violation aborts, which libFuzzer
// reports as a crash with the input that caused it.
inline void check(bool cond, const char* what) {
  if (!cond) {
    std::fprintf(stderr, "fuzz property violated: %s\n", what);
    std::abort();
  }
}

}  // namespace sluice::fuzz
