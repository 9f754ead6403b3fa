// DescribeCluster: the cluster id and its brokers, as Metadata tells them
// (this broker alone, at its advertised listener, and the controller).
// v1's endpoint type (KIP-919): this is a broker, so asking for controller
// endpoints is MISMATCHED_ENDPOINT_TYPE and an unknown type
// UNSUPPORTED_ENDPOINT_TYPE. Sluice has no ACLs: the authorized-operations
// field keeps its "not asked for" value whatever the request says, as
// DescribeGroups does.

#include "kafka/dispatcher.h"
#include "kafka/handlers/handlers.h"

namespace sluice::kafka {

namespace {
constexpr int8_t broker_endpoint = 1;
constexpr int8_t controller_endpoint = 2;
}  // namespace

void handle_describe_cluster(request req) {
  auto body = decode_body<protocol::describe_cluster_request>(req);
  if (!body) return;
  const services& svc = *req.svc;
  protocol::describe_cluster_response resp;
  resp.endpoint_type = body->endpoint_type;
  if (body->endpoint_type == controller_endpoint) {
    resp.error_code = to_wire(error_code::mismatched_endpoint_type);
    resp.error_message = "the controller endpoints are not served by a broker's listener";
  } else if (body->endpoint_type != broker_endpoint) {
    resp.error_code = to_wire(error_code::unsupported_endpoint_type);
    resp.error_message = "unknown endpoint type " + std::to_string(body->endpoint_type);
  } else {
    const cluster::metadata_cache& md = *svc.metadata;
    resp.cluster_id = md.cluster_id();
    resp.controller_id = md.controller_id();
    for (const auto& e : md.brokers()) {
      auto& b = resp.brokers.emplace_back();
      b.broker_id = e.node_id;
      b.host = e.host;
      b.port = e.port;
      b.rack = e.rack;
    }
  }
  req.respond(resp);
}

}  // namespace sluice::kafka
