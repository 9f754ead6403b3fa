// ListGroups: every group this broker coordinates (v4 filters by state).

#include "group/coordinator.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

void handle_list_groups(request req) {
  auto body = decode_body<protocol::list_groups_request>(req);
  if (!body) return;
  protocol::list_groups_response resp;
  if (!req.svc->groups) {
    resp.error_code = to_wire(error_code::coordinator_not_available);
  } else {
    resp = req.svc->groups->list_groups(*body);
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
