// DeleteGroups: removes empty groups and their offsets (tombstones in
// __consumer_offsets), answered once durable. A deleted group's configs
// (GROUP config resources) go with it, as Kafka removes them: on a single
// broker before the answer; in a cluster the controller is asked to delete
// them (kafka/forwarder.h) and the answer does not wait for it.

#include <memory>
#include <vector>

#include "base/log.h"
#include "group/coordinator.h"
#include "kafka/dispatcher.h"
#include "kafka/forwarder.h"
#include "kafka/handlers/handlers.h"
#include "metadata/metadata_cache.h"
#include "metadata/partition_manager.h"

namespace sluice::kafka {

namespace {

void forget_group_configs(const services& svc, const protocol::delete_groups_response& r) {
  if (!svc.partitions) return;
  std::vector<std::string> deleted;
  for (const auto& g : r.results)
    if (g.error_code == 0 && !svc.partitions->group_config(g.group_id).empty()) deleted.push_back(g.group_id);
  if (deleted.empty()) return;
  if (!svc.forward) {
    for (const auto& group : deleted) {
      if (auto s = svc.partitions->delete_group_configs(group); !s.ok())
        SLUICE_LOG_WARN("the configs of deleted group {} stay: {}", group, s.err().message);
    }
    return;
  }
  const int32_t controller = svc.metadata ? svc.metadata->controller_id() : -1;
  if (controller == svc.node_id) {
    svc.forward->delete_group_configs(std::move(deleted), {}, 0);
  } else if (auto b = controller >= 0 ? svc.metadata->broker(controller) : std::nullopt) {
    svc.forward->delete_group_configs(std::move(deleted), b->host, b->port);
  } else {
    SLUICE_LOG_WARN("the configs of {} deleted group(s) ({}...) stay: no controller is known", deleted.size(),
                    deleted.front());
  }
}

}  // namespace

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
  groups->delete_groups(*body, [held](protocol::delete_groups_response r) {
    forget_group_configs(*held->svc, r);
    held->respond(r);
  });
}

}  // namespace sluice::kafka
