// LeaveGroup: one member (v0-2) or several, static ones by instance id (v3+).

#include "group/coordinator.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

void handle_leave_group(request req) {
  auto body = decode_body<protocol::leave_group_request>(req);
  if (!body) return;
  protocol::leave_group_response resp;
  if (!req.svc->groups) {
    resp.error_code = to_wire(error_code::coordinator_not_available);
  } else {
    resp = req.svc->groups->leave_group(*body, req.version());
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
