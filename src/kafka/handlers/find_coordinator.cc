// FindCoordinator (v0-3, one key): this single broker coordinates every
// group. Transaction coordinators (key_type 1) come with transactions.

#include "group/coordinator.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

void handle_find_coordinator(request req) {
  auto body = decode_body<protocol::find_coordinator_request>(req);
  if (!body) return;
  protocol::find_coordinator_response resp;
  resp.node_id = -1;
  resp.port = -1;
  auto fail = [&](error_code e, std::string message) {
    resp.error_code = to_wire(e);
    resp.error_message = std::move(message);
    req.respond(resp);
  };
  if (body->key_type == 1) {
    // Fatal for the client, as InitProducerId answers transactional ids,
    // rather than a retriable code it would retry until it times out.
    return fail(error_code::transactional_id_authorization_failed, "transactions are not supported yet");
  }
  if (body->key_type != 0) return fail(error_code::invalid_request, "unknown key type");
  if (body->key.empty()) return fail(error_code::invalid_group_id, "empty group id");
  if (!req.svc->groups) return fail(error_code::coordinator_not_available, "no group coordinator");
  resp.node_id = req.svc->node_id;
  resp.host = req.svc->advertised_host;
  resp.port = req.svc->advertised_port;
  req.respond(resp);
}

}  // namespace sluice::kafka
