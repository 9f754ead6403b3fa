// JoinGroup: answered when the group's rebalance completes (or at once for
// errors and the MEMBER_ID_REQUIRED round); the coordinator holds the
// request until then.

#include <memory>

#include "group/coordinator.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "share/service.h"

namespace sluice::kafka {

void handle_join_group(request req) {
  auto body = decode_body<protocol::join_group_request>(req);
  if (!body) return;
  auto* groups = req.svc->groups;
  if (!groups) {
    protocol::join_group_response resp;
    resp.error_code = to_wire(error_code::coordinator_not_available);
    req.respond(resp);
    return;
  }
  if (req.svc->share && req.svc->share->is_share_group(body->group_id)) {
    // One id names one kind of group, as in Kafka.
    protocol::join_group_response resp;
    resp.error_code = to_wire(error_code::inconsistent_group_protocol);
    req.respond(resp);
    return;
  }
  const int16_t version = req.version();
  const std::string client_id = req.header.client_id.value_or("");
  const std::string client_host = req.client_host;
  auto held = std::make_shared<request>(std::move(req));
  groups->join_group(*body, version, client_id, client_host,
                     [held](protocol::join_group_response r) { held->respond(r); });
}

}  // namespace sluice::kafka
