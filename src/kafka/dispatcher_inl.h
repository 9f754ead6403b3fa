#pragma once

#include "base/log.h"

namespace sluice::kafka {

template <class Body>
std::optional<Body> decode_body(request& req) {
  auto bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(req.frame.data()), req.frame.size());
  protocol::reader r(bytes);
  // Skip the header: decode it again, it is cheap and keeps the offset honest.
  auto hdr = protocol::decode_request_header(r);
  if (!hdr.ok()) {
    req.responder.close_connection();
    return std::nullopt;
  }
  Body body;
  body.read(r, req.version());
  if (auto s = r.to_status(); !s.ok()) {
    SLUICE_LOG_DEBUG("closing connection: {} v{} request cannot be decoded: {}", Body::message_name, req.version(),
                     s.err().message);
    req.responder.close_connection();
    return std::nullopt;
  }
  return body;
}

}  // namespace sluice::kafka
