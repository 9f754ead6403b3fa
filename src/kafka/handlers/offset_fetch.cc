// OffsetFetch: one group (v0-7; every committed partition when topics is
// null, v2+) or several (v8).

#include "group/coordinator.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

void handle_offset_fetch(request req) {
  auto body = decode_body<protocol::offset_fetch_request>(req);
  if (!body) return;
  protocol::offset_fetch_response resp;
  if (!req.svc->groups) {
    resp.error_code = to_wire(error_code::coordinator_not_available);
  } else {
    resp = req.svc->groups->offset_fetch(*body, req.version());
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
