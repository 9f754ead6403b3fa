#pragma once

// One Kafka request in flight, as the handlers see it: the decoded header,
// the frame that owns every byte the decoded body points into (records
// views), the responder that completes it, and the services handlers use.
//
// Ownership: a handler receives the request by value (moved) and either
// answers it before returning or moves it into whatever completes it later
// (a durability callback, a long-poll). The frame lives as long as the
// request, so record views stay valid until the answer is sent.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/clock.h"
#include "kafka/fetch_sessions.h"
#include "metrics/metrics.h"
#include "net/response.h"
#include "net/server.h"
#include "protocol/codec.h"
#include "protocol/frame.h"
#include "protocol/messages.h"
#include "replication/leadership_gate.h"

namespace sluice::cluster {
class control_plane;
class metadata_cache;
class partition_manager;
}
namespace sluice::group {
class coordinator;
}
namespace sluice::txn {
class service;
}
namespace sluice::share {
class service;
}
namespace sluice::io {
class filesystem;
}

namespace sluice::kafka {

class delayed_ops;
class forwarder;
class txn_verifier;
class share_session_cache;

// The gate of a single node, which leads every partition it holds.
inline const cluster::leadership_gate single_node_gate{};

// What handlers reach. Built once by the broker; every member outlives the
// server.
struct services {
  cluster::partition_manager* partitions = nullptr;
  // Brokers, controller, cluster id and partition leadership, as
  // Metadata-like answers describe them.
  const cluster::metadata_cache* metadata = nullptr;
  sluice::clock* clk = &sluice::clock::system();  // every read of the time
  delayed_ops* delayed = nullptr;
  fetch_session_cache* fetch_sessions = nullptr;
  metrics::request_metrics* requests = nullptr;  // null: not counted
  group::coordinator* groups = nullptr;  // null: group APIs answer COORDINATOR_NOT_AVAILABLE
  txn::service* txn = nullptr;  // null: transactional ids answer COORDINATOR_NOT_AVAILABLE
  // Share groups (share/service.h) and the share sessions of ShareFetch;
  // null: the share APIs answer COORDINATOR_NOT_AVAILABLE / UNSUPPORTED_VERSION.
  share::service* share = nullptr;
  share_session_cache* share_sessions = nullptr;
  // In a cluster: asks other brokers' transaction coordinators to verify a
  // producer's partitions (KIP-890); null on a single broker.
  txn_verifier* verifier = nullptr;
  io::filesystem* fs = nullptr;          // for disk space (DescribeLogDirs); null: not reported
  int32_t node_id = 0;  // this broker (config resources name it)
  // This broker's part in a cluster's control plane; null on a single
  // broker, which is its own controller and leads every partition.
  cluster::control_plane* control = nullptr;
  // Whether this broker may act as a leader its image names: every
  // handler that answers as a partition's leader asks it
  // (replication/leadership_gate.h).
  const cluster::leadership_gate* leadership = &single_node_gate;
  // In a cluster: passes controller requests on to the controller (null on
  // a single broker, which is its own controller).
  forwarder* forward = nullptr;
};

// Per-connection state kept in net::connection_context::state.
struct connection_state {
  std::string client_id;
  // The client's address as Kafka shows it in DescribeGroups ("/127.0.0.1").
  std::string client_host;
  std::shared_ptr<kafka::fetch_cursor> fetch_cursor = std::make_shared<kafka::fetch_cursor>();
};

// "/address" from a connection's "address:port" peer (IPv6 addresses keep
// their colons; only the port after the last one is dropped).
std::string client_host_of(const std::string& peer);

// Converts an encoded response (which starts with its int32 size) into the
// chunks the server sends; the server writes the size itself.
net::response to_net_response(const protocol::response_chunks& rc);

struct request {
  protocol::request_header header;
  std::vector<std::byte> frame;
  net::responder responder;
  services* svc = nullptr;
  // When the frame arrived (svc->clk's monotonic_ns()), for the request
  // latency metric.
  int64_t arrived_ns = 0;
  // The connection's client_host (connection_state), for JoinGroup.
  std::string client_host;
  // The connection's minimum round trip (net::connection_context::min_rtt),
  // read for Fetch requests only, which size their answers by it.
  std::optional<std::chrono::microseconds> min_rtt;
  // The connection's fetch_cursor, for sessionless Fetch requests.
  std::shared_ptr<kafka::fetch_cursor> fetch_cursor;

  int16_t api_key() const { return header.request_api_key; }
  int16_t version() const { return header.request_api_version; }

  // Encodes `body` at this request's version and sends it.
  template <class Body>
  void respond(const Body& body) {
    auto rc = protocol::encode_response(header.correlation_id, version(), body);
    if (svc && svc->requests) {
      const int64_t us = std::max<int64_t>(svc->clk->monotonic_ns() - arrived_ns, 0) / 1000;
      svc->requests->on_response(api_key(), rc.size_bytes(), static_cast<uint64_t>(us));
    }
    responder.respond(to_net_response(rc));
  }
};

}  // namespace sluice::kafka
