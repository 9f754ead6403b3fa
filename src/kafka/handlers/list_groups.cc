// ListGroups: every group this broker coordinates (v4 filters by state, v5
// by type): the classic groups, then the share groups (type "share",
// protocol type "share", state Empty or Stable).

#include <algorithm>
#include <cctype>

#include "group/coordinator.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "share/service.h"

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
  if (req.svc->share && req.svc->groups) {
    auto wanted = [](const std::vector<std::string>& filter, const std::string& v) {
      return filter.empty() || std::any_of(filter.begin(), filter.end(), [&](const std::string& f) {
               return std::equal(f.begin(), f.end(), v.begin(), v.end(),
                                 [](char a, char b) { return std::tolower(a) == std::tolower(b); });
             });
    };
    if (wanted(body->types_filter, "share")) {
      for (const auto& id : req.svc->share->list_groups()) {
        if (req.svc->groups->gate(id) != error_code::none) continue;
        auto d = req.svc->share->describe(id);
        if (!d || !wanted(body->states_filter, d->state)) continue;
        auto& g = resp.groups.emplace_back();
        g.group_id = id;
        g.protocol_type = "share";
        g.group_state = d->state;
        g.group_type = "share";
      }
    }
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
