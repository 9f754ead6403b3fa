#include "cluster/partition_manager.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

void handle_delete_topics(request req) {
  auto body = decode_body<protocol::delete_topics_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  const bool enabled = pm.broker_config()->delete_topic_enable;
  protocol::delete_topics_response resp;
  for (const auto& name : body->topic_names) {
    auto& out = resp.responses.emplace_back();
    out.name = name;
    if (!enabled) {
      out.error_code = to_wire(error_code::topic_deletion_disabled);
      out.error_message = "delete.topic.enable is false";
      continue;
    }
    if (auto e = pm.delete_topic(name)) {
      out.error_code = to_wire(e->code);
      out.error_message = e->message;
    }
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
