#pragma once

// Whole requests and responses: headers, the rule that picks the header
// version, and encoding a response body into chunks behind its size prefix.
//
// Decoding a request frame (the bytes after the int32 size):
//
//   protocol::reader r(frame);
//   auto hdr = protocol::decode_request_header(r);      // result<request_header_info>
//   if (!hdr) -> malformed: close the connection
//   if (!hdr->supported) -> answer UNSUPPORTED_VERSION (ApiVersions: v0 layout)
//   auto body = protocol::decode_request_body(hdr->header.request_api_key,
//                                             hdr->header.request_api_version, r);
//   // body is result<any_request>; std::get<produce_request>(*body) etc.
//
// Encoding a response:
//
//   protocol::response_chunks out =
//       protocol::encode_response(correlation_id, version, produce_response_value);
//
// The frame must outlive the decoded body: records fields are views into it.

#include <cstdint>
#include <span>

#include "protocol/codec.h"
#include "protocol/messages.h"

namespace sluice::protocol {

// The codec's row for an API key, or nullptr if Sluice does not know it.
const api_support* find_api(int16_t api_key);

// True when the codec implements this API at this version.
bool is_supported(int16_t api_key, int16_t api_version);

// Request header version: 2 for a flexible request version, else 1. For an
// API the codec does not know the answer is 1 (only the client id is read).
int16_t request_header_version(int16_t api_key, int16_t api_version);

// Response header version: 1 for a flexible response version, else 0;
// ApiVersions always answers with header v0 (KIP-511) so that a client can
// read the error of a version it sent too high.
int16_t response_header_version(int16_t api_key, int16_t api_version);

struct request_header_info {
  request_header header;
  int16_t header_version = 1;
  // The codec implements header.request_api_key at this version.
  bool supported = false;
};

// Reads the request header at the front of a frame. The header version
// follows from the API key and version, which come first. Known APIs at
// versions above the codec's range are still read with the right header
// version (the API's first flexible version decides it) so the broker can
// answer UNSUPPORTED_VERSION with the correlation id.
result<request_header_info> decode_request_header(reader& r);

// Encodes a response: int32 size, header in the version the rules pick,
// body in `version`. Body is any *_response type from messages.h.
template <class Body>
response_chunks encode_response(int32_t correlation_id, int16_t version, const Body& body) {
  writer w;
  const size_t size_pos = w.reserve_int32();
  response_header h;
  h.correlation_id = correlation_id;
  h.write(w, response_header_version(Body::api_key, version));
  body.write(w, version);
  w.patch_int32(size_pos, static_cast<int32_t>(w.size_bytes() - 4));
  return std::move(w).finish();
}

// Decodes a response frame (after its int32 size: header, then body) as
// Body at `version`; errc::malformed when it answers another correlation
// id than `correlation_id`. The body's byte views point into `frame`.
template <class Body>
result<Body> decode_response(std::span<const uint8_t> frame, int16_t version, int32_t correlation_id) {
  reader r(frame);
  response_header h;
  h.read(r, response_header_version(Body::api_key, version));
  if (r.ok() && h.correlation_id != correlation_id)
    return error{errc::malformed, "answer to another request (correlation id " + std::to_string(h.correlation_id) + ")"};
  Body body;
  body.read(r, version);
  SLUICE_TRY(r.to_status());
  return body;
}

// Encodes a request frame (int32 size, header, body): for tests, the fuzz
// corpus and tools that speak to a broker without librdkafka.
template <class Body>
response_chunks encode_request(int32_t correlation_id, int16_t version, const Body& body,
                               std::optional<std::string> client_id = std::string("sluice")) {
  writer w;
  const size_t size_pos = w.reserve_int32();
  request_header h;
  h.request_api_key = Body::api_key;
  h.request_api_version = version;
  h.correlation_id = correlation_id;
  h.client_id = std::move(client_id);
  h.write(w, request_header_version(Body::api_key, version));
  body.write(w, version);
  w.patch_int32(size_pos, static_cast<int32_t>(w.size_bytes() - 4));
  return std::move(w).finish();
}

// An ApiVersions answer (error 0) listing `advertised`, normally
// supported_api_table or the subset the broker's handlers serve.
api_versions_response api_versions_from_table(std::span<const api_support> advertised);

// The ApiVersions answer to a request whose version the codec does not
// support: v0 layout, UNSUPPORTED_VERSION, and the supported ApiVersions
// range (KIP-511); the caller encodes it with version 0.
api_versions_response unsupported_api_versions_response(std::span<const api_support> advertised);

}  // namespace sluice::protocol
