#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {


void handle_api_versions(request req) {
  auto body = decode_body<protocol::api_versions_request>(req);
  if (!body) return;
  protocol::api_versions_response resp;
  for (const api_handler& h : api_handlers()) {
    auto& row = resp.api_keys.emplace_back();
    row.api_key = h.api_key;
    row.min_version = advertised_min_version(h);
    row.max_version = advertised_max_version(h);
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
