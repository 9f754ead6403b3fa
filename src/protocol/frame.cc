#include "protocol/frame.h"

#include "base/endian.h"
#include "protocol/error_code.h"

namespace sluice::protocol {

namespace {
constexpr int16_t api_versions_key = api_versions_request::api_key;
}  // namespace

const api_support* find_api(int16_t api_key) {
  for (const api_support& a : supported_api_table) {
    if (a.api_key == api_key) return &a;
  }
  return nullptr;
}

bool is_supported(int16_t api_key, int16_t api_version) {
  const api_support* a = find_api(api_key);
  return a != nullptr && api_version >= a->min_version && api_version <= a->max_version;
}

int16_t request_header_version(int16_t api_key, int16_t api_version) {
  const api_support* a = find_api(api_key);
  if (a == nullptr) return 1;
  return api_version >= a->flexible_from ? 2 : 1;
}

int16_t response_header_version(int16_t api_key, int16_t api_version) {
  if (api_key == api_versions_key) return 0;
  const api_support* a = find_api(api_key);
  if (a == nullptr) return 0;
  return api_version >= a->flexible_from ? 1 : 0;
}

result<request_header_info> decode_request_header(reader& r) {
  // The api key and version come first and decide the header version.
  const auto rest = r.rest();
  if (rest.size() < 4) return error{errc::malformed, "request shorter than its api key and version"};
  const auto api_key = load_be<int16_t>(rest.data());
  const auto api_version = load_be<int16_t>(rest.data() + 2);
  request_header_info info;
  info.header_version = request_header_version(api_key, api_version);
  info.header.read(r, info.header_version);
  if (status s = r.to_status(); !s.ok()) return s.err();
  info.supported = is_supported(api_key, api_version);
  return info;
}

api_versions_response api_versions_from_table(std::span<const api_support> advertised) {
  api_versions_response resp;
  resp.api_keys.reserve(advertised.size());
  for (const api_support& a : advertised) {
    auto& row = resp.api_keys.emplace_back();
    row.api_key = a.api_key;
    row.min_version = a.min_version;
    row.max_version = a.max_version;
  }
  return resp;
}

api_versions_response unsupported_api_versions_response(std::span<const api_support> advertised) {
  api_versions_response resp;
  resp.error_code = kafka::to_wire(kafka::error_code::unsupported_version);
  for (const api_support& a : advertised) {
    if (a.api_key != api_versions_key) continue;
    auto& row = resp.api_keys.emplace_back();
    row.api_key = a.api_key;
    row.min_version = a.min_version;
    row.max_version = a.max_version;
  }
  return resp;
}

}  // namespace sluice::protocol
