// DescribeGroups: state, protocol and members (with metadata and
// assignment when Stable) of each group.

#include "group/coordinator.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

void handle_describe_groups(request req) {
  auto body = decode_body<protocol::describe_groups_request>(req);
  if (!body) return;
  protocol::describe_groups_response resp;
  if (!req.svc->groups) {
    for (const auto& id : body->groups) {
      auto& g = resp.groups.emplace_back();
      g.group_id = id;
      g.error_code = to_wire(error_code::coordinator_not_available);
    }
  } else {
    resp = req.svc->groups->describe_groups(*body);
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
