#pragma once

// The Kafka side of the network server: decodes each frame's request
// header, answers versions it does not implement the way Kafka does, and
// hands the request to the API's handler (kafka/handlers/).
//
// Bad input never crashes the broker. A frame whose header or body cannot
// be decoded closes that connection (as Kafka does); an ApiVersions request
// of a version above the supported range gets a v0-layout answer with
// UNSUPPORTED_VERSION and the supported ApiVersions range (KIP-511); any
// other API at an unsupported version, or an unknown API key, closes the
// connection, as Kafka does, with a debug log line.
//
// Thread safety: the server calls on_request on the connection's I/O
// thread; handlers may complete from any thread.

#include <span>

#include "kafka/request.h"
#include "net/server.h"

namespace sluice::kafka {

// One row of what the broker implements: the versions it advertises in
// ApiVersions and the function that handles them.
struct api_handler {
  int16_t api_key;
  int16_t min_version;
  int16_t max_version;
  void (*handle)(request req);
};

// Every API the broker implements (kafka/handlers/handlers.cc).
std::span<const api_handler> api_handlers();

// The lowest version ApiVersions advertises for `h`: its min_version, except
// Produce, which is advertised from v0 although only v3+ is served (see
// handlers.cc). A request between the two reaches the handler, which
// answers UNSUPPORTED_VERSION in its response; the dispatcher counts and
// logs it as unsupported.
int16_t advertised_min_version(const api_handler& h);
// The highest version ApiVersions advertises for `h`: its max_version,
// except AddPartitionsToTxn, whose v4+ is broker to broker only (KIP-890:
// a client that saw it advertised would send the batched form); served up
// to max_version all the same, to the brokers that send it.
int16_t advertised_max_version(const api_handler& h);

class dispatcher final : public net::request_handler {
 public:
  explicit dispatcher(services& svc) : svc_(svc) {}

  void on_connection_open(net::connection_context& ctx) override;
  void on_request(net::connection_context& ctx, std::vector<std::byte> frame, net::responder r) override;
  // Handles a decoded request of a known API on this broker (what the
  // forwarder falls back to).
  static void handle_here(request req);

 private:
  services& svc_;
};

// Decodes the body of `req` as `Body`. A failure closes the connection and
// returns nullopt; the handler then just returns.
template <class Body>
std::optional<Body> decode_body(request& req);

}  // namespace sluice::kafka

#include "kafka/dispatcher_inl.h"
