// OffsetCommit: answered once the offsets are durable in __consumer_offsets.

#include <memory>

#include "group/coordinator.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

void handle_offset_commit(request req) {
  auto body = decode_body<protocol::offset_commit_request>(req);
  if (!body) return;
  auto* groups = req.svc->groups;
  if (!groups) {
    protocol::offset_commit_response resp;
    for (const auto& t : body->topics) {
      auto& rt = resp.topics.emplace_back();
      rt.name = t.name;
      for (const auto& p : t.partitions)
        rt.partitions.push_back({p.partition_index, to_wire(error_code::coordinator_not_available)});
    }
    req.respond(resp);
    return;
  }
  const int16_t version = req.version();
  auto held = std::make_shared<request>(std::move(req));
  groups->offset_commit(*body, version, [held](protocol::offset_commit_response r) { held->respond(r); });
}

}  // namespace sluice::kafka
