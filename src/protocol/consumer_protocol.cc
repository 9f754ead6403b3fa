#include "protocol/consumer_protocol.h"

#include <algorithm>

namespace sluice::protocol {

namespace {

template <class T>
result<T> decode_versioned(std::span<const uint8_t> bytes, int16_t* version_out, const char* what) {
  reader r(bytes);
  const int16_t version = r.read_int16();
  if (!r.ok()) return error{errc::malformed, std::string(what) + ": missing version"};
  if (version < 0) return error{errc::malformed, std::string(what) + ": negative version"};
  if (version_out) *version_out = version;
  T value;
  SLUICE_TRY(value.decode(r, std::min<int16_t>(version, T::max_version)));
  return value;
}

template <class T>
std::vector<uint8_t> encode_versioned(const T& value, int16_t version) {
  SLUICE_ASSERT(version >= T::min_version && version <= T::max_version, "consumer protocol version out of range");
  writer w;
  w.write_int16(version);
  value.encode(w, version);
  auto b = w.owned_bytes();
  return std::vector<uint8_t>(b.begin(), b.end());
}

}  // namespace

result<consumer_protocol_subscription> decode_subscription(std::span<const uint8_t> bytes, int16_t* version) {
  return decode_versioned<consumer_protocol_subscription>(bytes, version, "consumer subscription");
}

std::vector<uint8_t> encode_subscription(const consumer_protocol_subscription& s, int16_t version) {
  return encode_versioned(s, version);
}

result<consumer_protocol_assignment> decode_assignment(std::span<const uint8_t> bytes, int16_t* version) {
  if (bytes.empty()) {
    if (version) *version = 0;
    return consumer_protocol_assignment{};
  }
  return decode_versioned<consumer_protocol_assignment>(bytes, version, "consumer assignment");
}

std::vector<uint8_t> encode_assignment(const consumer_protocol_assignment& a, int16_t version) {
  return encode_versioned(a, version);
}

}  // namespace sluice::protocol
