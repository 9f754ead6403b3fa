#include "base/types.h"

#include <random>

namespace sluice {

std::string to_hex(const topic_id& id) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s;
  s.reserve(2 * id.size());
  for (uint8_t b : id) {
    s += digits[b >> 4];
    s += digits[b & 0xf];
  }
  return s;
}

std::optional<topic_id> topic_id_from_hex(std::string_view hex) {
  topic_id id{};
  if (hex.size() != 2 * id.size()) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < id.size(); ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    id[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return id;
}

topic_id new_topic_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  topic_id id{};
  for (size_t i = 0; i < id.size(); i += 8) {
    const uint64_t v = rng();
    for (size_t j = 0; j < 8; ++j) id[i + j] = static_cast<uint8_t>(v >> (8 * j));
  }
  id[0] |= 1;
  return id;
}

}  // namespace sluice
