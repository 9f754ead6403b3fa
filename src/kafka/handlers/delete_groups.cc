// DeleteGroups: removes empty groups and their offsets (tombstones in
// __consumer_offsets), answered once durable.

#include <memory>

#include "group/coordinator.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

void handle_delete_groups(request req) {
  auto body = decode_body<protocol::delete_groups_request>(req);
  if (!body) return;
  auto* groups = req.svc->groups;
  if (!groups) {
    protocol::delete_groups_response resp;
    for (const auto& id : body->groups_names) resp.results.push_back({id, to_wire(error_code::coordinator_not_available)});
    req.respond(resp);
    return;
  }
  auto held = std::make_shared<request>(std::move(req));
  groups->delete_groups(*body, [held](protocol::delete_groups_response r) { held->respond(r); });
}

}  // namespace sluice::kafka
