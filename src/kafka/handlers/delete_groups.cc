// DeleteGroups: removes empty groups and their offsets (tombstones in
// __consumer_offsets), answered once durable. A share group goes with the
// state of its share partitions (share::service::delete_group). A deleted
// group's configs (GROUP config resources) go with it, as Kafka removes
// them: on a single broker before the answer; in a cluster the controller
// is asked to delete them (kafka/forwarder.h) and the answer does not wait
// for it.

#include <map>
#include <memory>
#include <vector>

#include "base/log.h"
#include "group/coordinator.h"
#include "kafka/dispatcher.h"
#include "kafka/forwarder.h"
#include "kafka/handlers/handlers.h"
#include "metadata/metadata_cache.h"
#include "metadata/partition_manager.h"
#include "share/service.h"

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
  // Share groups are answered here; the classic ones by the coordinator;
  // the answer lists them in the request's order.
  std::map<std::string, error_code> shared;
  protocol::delete_groups_request classic;
  for (const auto& id : body->groups_names) {
    if (req.svc->share && req.svc->share->is_share_group(id) && groups->gate(id) == error_code::none) {
      shared[id] = req.svc->share->delete_group(id);
    } else {
      classic.groups_names.push_back(id);
    }
  }
  auto held = std::make_shared<request>(std::move(req));
  auto order = body->groups_names;
  groups->delete_groups(classic, [held, shared, order](protocol::delete_groups_response r) {
    if (shared.empty()) {
      forget_group_configs(*held->svc, r);
      held->respond(r);
      return;
    }
    protocol::delete_groups_response out;
    out.throttle_time_ms = r.throttle_time_ms;
    std::map<std::string, int16_t> classic_codes;
    for (const auto& x : r.results) classic_codes[x.group_id] = x.error_code;
    for (const auto& id : order) {
      auto& x = out.results.emplace_back();
      x.group_id = id;
      auto it = shared.find(id);
      x.error_code = it != shared.end() ? to_wire(it->second) : classic_codes[id];
    }
    forget_group_configs(*held->svc, out);
    held->respond(out);
  });
}

}  // namespace sluice::kafka
