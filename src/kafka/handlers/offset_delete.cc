// OffsetDelete: removes committed offsets of topics the group no longer
// reads.

#include <memory>

#include "group/coordinator.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

void handle_offset_delete(request req) {
  auto body = decode_body<protocol::offset_delete_request>(req);
  if (!body) return;
  auto* groups = req.svc->groups;
  if (!groups) {
    protocol::offset_delete_response resp;
    resp.error_code = to_wire(error_code::coordinator_not_available);
    req.respond(resp);
    return;
  }
  auto held = std::make_shared<request>(std::move(req));
  groups->offset_delete(*body, [held](protocol::offset_delete_response r) { held->respond(r); });
}

}  // namespace sluice::kafka
