// SyncGroup: members wait until the leader's assignment is durable; then
// each gets its own part.

#include <memory>

#include "group/coordinator.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

void handle_sync_group(request req) {
  auto body = decode_body<protocol::sync_group_request>(req);
  if (!body) return;
  auto* groups = req.svc->groups;
  if (!groups) {
    protocol::sync_group_response resp;
    resp.error_code = to_wire(error_code::coordinator_not_available);
    req.respond(resp);
    return;
  }
  const int16_t version = req.version();
  auto held = std::make_shared<request>(std::move(req));
  groups->sync_group(*body, version, [held](protocol::sync_group_response r) { held->respond(r); });
}

}  // namespace sluice::kafka
