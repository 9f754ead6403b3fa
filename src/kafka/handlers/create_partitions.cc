#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "metadata/partition_manager.h"

namespace sluice::kafka {

void handle_create_partitions(request req) {
  auto body = decode_body<protocol::create_partitions_request>(req);
  if (!body) return;
  auto& pm = *req.svc->partitions;
  protocol::create_partitions_response resp;
  std::vector<std::string> grown;  // whose new logs are being made
  for (const auto& t : body->topics) {
    auto& out = resp.results.emplace_back();
    out.name = t.name;
    std::vector<cluster::replica_list> assignment;
    if (t.assignments) {
      // One entry per new partition, in order; the store checks the brokers.
      for (const auto& a : *t.assignments) assignment.push_back(a.broker_ids);
    }
    // As CreateTopics: recorded now, the logs made in the background.
    if (auto e = pm.add_partitions(t.name, t.count, body->validate_only,
                                   cluster::partition_manager::create_mode::background, std::move(assignment))) {
      out.error_code = to_wire(e->code);
      out.error_message = e->message;
    } else if (!body->validate_only) {
      grown.push_back(t.name);
    }
  }
  const int32_t timeout_ms = body->timeout_ms;
  answer_when_created(*req.svc, std::move(grown), timeout_ms,
                      [r = std::make_shared<request>(std::move(req)),
                       a = std::make_shared<protocol::create_partitions_response>(
                           std::move(resp))] { r->respond(*a); });
}

}  // namespace sluice::kafka
