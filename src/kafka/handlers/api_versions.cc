#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

namespace {

constexpr int16_t produce_api_key = 0;

// The lowest version advertised for `h`. Produce is advertised from v0 although
// only v3+ is served (v0-v2 still close the connection in the dispatcher):
// librdkafka up to 2.11 (Debian's is 2.0.2) checks gzip, snappy and lz4 support
// by asking whether the broker's Produce range reaches down to v0, and silently
// sends those codecs uncompressed otherwise. Kafka 4.0 advertises Produce v0 for
// the same reason (KAFKA-18659); clients pick the highest common version, so
// none ever sends v0-v2 to us.
int16_t advertised_min_version(const api_handler& h) {
  return h.api_key == produce_api_key ? int16_t{0} : h.min_version;
}

}  // namespace

void handle_api_versions(request req) {
  auto body = decode_body<protocol::api_versions_request>(req);
  if (!body) return;
  protocol::api_versions_response resp;
  for (const api_handler& h : api_handlers()) {
    auto& row = resp.api_keys.emplace_back();
    row.api_key = h.api_key;
    row.min_version = advertised_min_version(h);
    row.max_version = h.max_version;
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
