// FindCoordinator (v0-5): this single broker coordinates every group. v0-3
// ask for one key; v4+ for several (KIP-699), each answered on its own.
// Transaction coordinators (key_type 1) come with transactions; v5 only
// adds TRANSACTION_ABORTABLE, which is never answered; v6 (share groups,
// key_type 2) is not served.

#include "group/coordinator.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

namespace {

struct lookup {
  error_code error = error_code::none;
  std::string message;
};

// The answer for one key: this broker, or why not.
lookup find(const request& req, int8_t key_type, const std::string& key) {
  if (key_type == 1) {
    // Fatal for the client, as InitProducerId answers transactional ids,
    // rather than a retriable code it would retry until it times out.
    return {error_code::transactional_id_authorization_failed, "transactions are not supported yet"};
  }
  if (key_type != 0) return {error_code::invalid_request, "unknown key type"};
  if (key.empty()) return {error_code::invalid_group_id, "empty group id"};
  if (!req.svc->groups) return {error_code::coordinator_not_available, "no group coordinator"};
  return {};
}

// Fills a coordinator answer (v4+'s per-key one or v0-3's whole response,
// which have the same fields): this broker, or the error and -1s.
template <class Answer>
void answer(Answer& a, const lookup& l, const services& svc) {
  a.error_code = to_wire(l.error);
  if (l.error != error_code::none) {
    a.node_id = -1;
    a.port = -1;
    a.error_message = l.message;
    return;
  }
  // The coordinator of every group is this broker (one broker leads every
  // partition of __consumer_offsets).
  auto self = svc.metadata->broker(svc.node_id);
  a.node_id = svc.node_id;
  a.host = self ? self->host : std::string();
  a.port = self ? self->port : -1;
}

constexpr int16_t batched_version = 4;

}  // namespace

void handle_find_coordinator(request req) {
  auto body = decode_body<protocol::find_coordinator_request>(req);
  if (!body) return;
  protocol::find_coordinator_response resp;
  const services& svc = *req.svc;
  if (req.version() >= batched_version) {
    resp.coordinators.reserve(body->coordinator_keys.size());
    for (const std::string& key : body->coordinator_keys) {
      auto& c = resp.coordinators.emplace_back();
      c.key = key;
      answer(c, find(req, body->key_type, key), svc);
    }
  } else {
    answer(resp, find(req, body->key_type, body->key), svc);
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
