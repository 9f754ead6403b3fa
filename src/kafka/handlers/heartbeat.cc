// Heartbeat: keeps a member's session; REBALANCE_IN_PROGRESS tells it to
// rejoin.

#include "group/coordinator.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

void handle_heartbeat(request req) {
  auto body = decode_body<protocol::heartbeat_request>(req);
  if (!body) return;
  protocol::heartbeat_response resp;
  if (!req.svc->groups) {
    resp.error_code = to_wire(error_code::coordinator_not_available);
  } else {
    resp = req.svc->groups->heartbeat(*body, req.version());
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
