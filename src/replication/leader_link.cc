#include "replication/leader_link.h"

#include <chrono>

#include "protocol/raw_client.h"

namespace sluice::cluster {

namespace {

class tcp_link final : public leader_link {
 public:
  explicit tcp_link(protocol::raw_connection conn) : conn_(std::move(conn)) {}
  result<protocol::fetch_response> fetch(const protocol::fetch_request& req, int16_t version) override {
    return conn_.call<protocol::fetch_response>(req, version);
  }
  result<protocol::offset_for_leader_epoch_response> offset_for_leader_epoch(
      const protocol::offset_for_leader_epoch_request& req, int16_t version) override {
    return conn_.call<protocol::offset_for_leader_epoch_response>(req, version);
  }

 private:
  protocol::raw_connection conn_;
};

}  // namespace

link_factory tcp_links(endpoint_lookup endpoints, int32_t node_id, int32_t socket_timeout_ms) {
  return [endpoints = std::move(endpoints), node_id,
          socket_timeout_ms](int32_t source) -> result<std::unique_ptr<leader_link>> {
    auto ep = endpoints(source);
    if (!ep) return error{errc::unavailable, "broker " + std::to_string(source) + " is not registered"};
    SLUICE_ASSIGN_OR_RETURN(auto c, protocol::raw_connection::connect(
                                        protocol::endpoint_of(ep->first, ep->second),
                                        std::chrono::milliseconds(socket_timeout_ms),
                                        "sluice-replica-" + std::to_string(node_id)));
    return std::unique_ptr<leader_link>(std::make_unique<tcp_link>(std::move(c)));
  };
}

}  // namespace sluice::cluster
