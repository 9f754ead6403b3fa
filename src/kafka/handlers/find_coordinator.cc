// FindCoordinator (v0-5): a group's coordinator is the broker leading its
// partition of __consumer_offsets (one broker leads them all on a single
// node; in a cluster the controller spreads them). v0-3
// ask for one key; v4+ for several (KIP-699), each answered on its own.
// A transactional id's coordinator (key_type 1) is the broker leading its
// partition of __transaction_state. v5 only adds TRANSACTION_ABORTABLE,
// which is never answered; v6 (share groups, key_type 2) is not served.

#include "group/coordinator.h"
#include "group/records.h"
#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"
#include "metadata/control_plane.h"
#include "metadata/metadata_cache.h"
#include "txn/records.h"

namespace sluice::kafka {

namespace {

struct lookup {
  error_code error = error_code::none;
  std::string message;
  int32_t node_id = -1;
};

// The answer for one key: this broker, or why not.
lookup find(const request& req, int8_t key_type, const std::string& key) {
  if (key_type != 0 && key_type != 1) return {error_code::invalid_request, "unknown key type"};
  if (key_type == 1) {
    // A transactional id's coordinator: the leader of its partition of
    // __transaction_state.
    if (key.empty()) return {error_code::invalid_request, "empty transactional id"};
    if (!req.svc->txn) return {error_code::coordinator_not_available, "no transaction coordinator"};
    if (req.svc->control && !req.svc->control->view_trusted())
      return {error_code::coordinator_not_available, "this broker's view of the cluster is not current"};
    const cluster::metadata_cache& md = *req.svc->metadata;
    auto state = md.topic(std::string(txn::transaction_state_topic));
    if (!state) return {error_code::coordinator_not_available, "__transaction_state does not exist yet"};
    const int32_t p = txn::partition_for(key, state->partitions);
    const auto l = md.leadership(*state, p);
    if (!l.has_leader)
      return {error_code::coordinator_not_available, "__transaction_state-" + std::to_string(p) + " has no leader"};
    return {error_code::none, {}, l.leader_id};
  }
  if (key.empty()) return {error_code::invalid_group_id, "empty group id"};
  if (!req.svc->groups) return {error_code::coordinator_not_available, "no group coordinator"};
  // A broker back from a pause or a cut that outlasted its session would
  // name the leaders it knew, itself among them, whose groups another
  // broker may serve now: retriable until its view can be trusted again
  // (control_plane::view_trusted, which an etcd quorum loss does not fail:
  // groups need no etcd).
  if (req.svc->control && !req.svc->control->view_trusted())
    return {error_code::coordinator_not_available, "this broker's view of the cluster is not current"};
  const cluster::metadata_cache& md = *req.svc->metadata;
  auto offsets = md.topic(std::string(group::offsets_topic));
  if (!offsets) return {error_code::coordinator_not_available, "__consumer_offsets does not exist yet"};
  const int32_t p = group::partition_for(key, offsets->partitions);
  const auto l = md.leadership(*offsets, p);
  if (!l.has_leader) return {error_code::coordinator_not_available, "__consumer_offsets-" + std::to_string(p) + " has no leader"};
  return {error_code::none, {}, l.leader_id};
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
  auto b = svc.metadata->broker(l.node_id);
  if (!b) {
    a.error_code = to_wire(error_code::coordinator_not_available);
    a.node_id = -1;
    a.port = -1;
    a.error_message = "the coordinator's broker is not live";
    return;
  }
  a.node_id = l.node_id;
  a.host = b->host;
  a.port = b->port;
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
