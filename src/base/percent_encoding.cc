#include "base/percent_encoding.h"

namespace sluice {
namespace {

constexpr char hex_digits[] = "0123456789ABCDEF";

bool unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;  // lower case is not the canonical form
}

}  // namespace

std::string percent_encode(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (char ch : raw) {
    const auto c = static_cast<unsigned char>(ch);
    if (unreserved(c)) {
      out += ch;
    } else {
      out += '%';
      out += hex_digits[c >> 4];
      out += hex_digits[c & 0xF];
    }
  }
  return out;
}

std::optional<std::string> percent_decode(std::string_view encoded) {
  std::string out;
  out.reserve(encoded.size());
  for (size_t i = 0; i < encoded.size(); ++i) {
    const auto c = static_cast<unsigned char>(encoded[i]);
    if (c != '%') {
      if (!unreserved(c)) return std::nullopt;
      out += encoded[i];
      continue;
    }
    if (i + 2 >= encoded.size()) return std::nullopt;  // a '%' without two digits
    const int hi = hex_value(encoded[i + 1]);
    const int lo = hex_value(encoded[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    const auto byte = static_cast<unsigned char>(hi * 16 + lo);
    if (unreserved(byte)) return std::nullopt;  // encoded needlessly: not the one encoding
    out += static_cast<char>(byte);
    i += 2;
  }
  return out;
}

}  // namespace sluice
