#pragma once

// Random values for codec tests: the generated fill_random() overloads
// (messages_fill.h, built from the schema) set every field present in a
// version through these helpers, so a round trip covers every field.

#include <cstdint>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "protocol/codec.h"

namespace sluice::protocol::testing {

class fill_context {
 public:
  explicit fill_context(uint64_t seed) : rng_(seed) {}

  // True with probability 1/n.
  bool coin(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_) == 0; }
  size_t count() { return std::uniform_int_distribution<size_t>(0, 3)(rng_); }
  uint64_t bits() { return rng_(); }
  std::string text() {
    const size_t n = std::uniform_int_distribution<size_t>(0, 12)(rng_);
    std::string s;
    for (size_t i = 0; i < n; ++i) s.push_back(static_cast<char>('a' + bits() % 26));
    return s;
  }
  std::vector<uint8_t> blob(size_t max = 40) {
    const size_t n = std::uniform_int_distribution<size_t>(0, max)(rng_);
    std::vector<uint8_t> b(n);
    for (auto& x : b) x = static_cast<uint8_t>(bits());
    return b;
  }
  // A records value whose bytes live as long as this context; sometimes
  // larger than limits::min_referenced_chunk_bytes so it is referenced.
  records_field records() {
    arena_.push_back(blob(coin(3) ? 2000 : 40));
    return records_field::of(arena_.back());
  }

 private:
  std::mt19937_64 rng_;
  std::deque<std::vector<uint8_t>> arena_;
};

inline void fill_value(bool& v, fill_context& c, int16_t) { v = c.coin(2); }
inline void fill_value(int8_t& v, fill_context& c, int16_t) { v = static_cast<int8_t>(c.bits()); }
inline void fill_value(int16_t& v, fill_context& c, int16_t) { v = static_cast<int16_t>(c.bits()); }
inline void fill_value(int32_t& v, fill_context& c, int16_t) { v = static_cast<int32_t>(c.bits()); }
inline void fill_value(int64_t& v, fill_context& c, int16_t) { v = static_cast<int64_t>(c.bits()); }
inline void fill_value(uint16_t& v, fill_context& c, int16_t) { v = static_cast<uint16_t>(c.bits()); }
inline void fill_value(uint32_t& v, fill_context& c, int16_t) { v = static_cast<uint32_t>(c.bits()); }
inline void fill_value(double& v, fill_context& c, int16_t) {
  v = static_cast<double>(static_cast<int64_t>(c.bits() % 1000000)) / 7.0;
}
inline void fill_value(uuid& v, fill_context& c, int16_t) {
  for (auto& b : v) b = static_cast<uint8_t>(c.bits());
}
inline void fill_value(std::string& v, fill_context& c, int16_t) { v = c.text(); }
inline void fill_value(std::vector<uint8_t>& v, fill_context& c, int16_t) { v = c.blob(); }
inline void fill_value(records_field& v, fill_context& c, int16_t) { v = c.records(); }

}  // namespace sluice::protocol::testing
