#pragma once

// How a replica fetcher reaches the leader it follows: one request, then
// its answer, one at a time. A broker's link is a TCP connection speaking
// Kafka (tcp_links, over protocol::raw_connection); a test or a simulation
// gives the fetcher links that deliver the requests in-process, with the
// delays, losses and cuts it chooses.
//
// Contract: an answer (its record views included) stays valid until the
// next call on the same link. An error means the link is broken: the
// fetcher drops it and asks the factory for a new one after
// replica.fetch.backoff.ms. Used by the fetcher's thread only.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "base/result.h"
#include "protocol/messages.h"

namespace sluice::cluster {

class leader_link {
 public:
  virtual ~leader_link() = default;
  virtual result<protocol::fetch_response> fetch(const protocol::fetch_request& req, int16_t version) = 0;
  virtual result<protocol::offset_for_leader_epoch_response> offset_for_leader_epoch(
      const protocol::offset_for_leader_epoch_request& req, int16_t version) = 0;
};

// Opens a link to broker `source`; an error when it cannot now (not
// registered, not reachable).
using link_factory = std::function<result<std::unique_ptr<leader_link>>(int32_t source)>;

// Where a broker listens ("host", port), or nullopt when it is not known
// (not registered).
using endpoint_lookup = std::function<std::optional<std::pair<std::string, int32_t>>(int32_t node_id)>;

// A broker's links: Kafka over TCP to the endpoint `endpoints` names, each
// send and receive bounded by `socket_timeout_ms` (replica.socket.timeout.ms),
// requests sent as client id "sluice-replica-<node_id>".
link_factory tcp_links(endpoint_lookup endpoints, int32_t node_id, int32_t socket_timeout_ms);

}  // namespace sluice::cluster
