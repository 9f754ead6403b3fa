#pragma once

// A blocking Kafka connection that speaks through the project's own codec
// (protocol/messages.h). The broker's follower fetchers use it to fetch
// from leaders (replication/replica_fetcher.h); the tools use it for what
// Debian's librdkafka (2.0.2) cannot ask:
// ElectLeaders (rd_kafka_ElectLeaders came in 2.4), and the Metadata
// fields its metadata API drops (broker racks, the controller id, leader
// epochs, offline replicas). The tools pick fixed versions every Kafka
// since 2.4 serves (Metadata v9, ElectLeaders v1), so no ApiVersions
// exchange is needed.
//
// Ownership: the connection owns its socket (closed by the destructor) and
// the last response frame, into which byte views of the last response
// point. Not thread-safe: one caller at a time.

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "protocol/frame.h"
#include "protocol/messages.h"

namespace sluice::protocol {

class raw_connection {
 public:
  // Connects to "host:port" (a name or an IPv4/IPv6 address); every later
  // send and receive is bounded by `timeout` (errc::unavailable).
  // `client_id` goes in every request header.
  static result<raw_connection> connect(const std::string& host_port, std::chrono::milliseconds timeout,
                                        std::string client_id = "sluice-cli");
  // Tries each "host:port" of a comma-separated list in turn.
  static result<raw_connection> connect_any(const std::string& list, std::chrono::milliseconds timeout,
                                            std::string client_id = "sluice-cli");

  raw_connection(raw_connection&& o) noexcept;
  raw_connection& operator=(raw_connection&& o) noexcept;
  raw_connection(const raw_connection&) = delete;
  raw_connection& operator=(const raw_connection&) = delete;
  ~raw_connection();

  // Sends `req` at `version` and decodes the answer as Resp.
  template <class Resp, class Req>
  result<Resp> call(const Req& req, int16_t version) {
    auto bytes = protocol::encode_request(++correlation_id_, version, req, client_id_).flatten();
    if (!bytes.ok()) return bytes.err();
    SLUICE_TRY(send_all(*bytes));
    SLUICE_TRY(receive_frame());
    return decode_response<Resp>(std::span<const uint8_t>(frame_.data(), frame_len_), version, correlation_id_);
  }

 private:
  raw_connection(int fd, std::string client_id) : fd_(fd), client_id_(std::move(client_id)) {}
  status send_all(const std::vector<uint8_t>& bytes);
  status receive_frame();

  int fd_ = -1;
  std::string client_id_;
  int32_t correlation_id_ = 0;
  // The last answer: its first frame_len_ bytes. The buffer only grows
  // (zero-filled once, as it grows): a follower's fetcher receives answers
  // of up to replica.fetch.response.max.bytes many times a second.
  std::vector<uint8_t> frame_;
  size_t frame_len_ = 0;
};

// The versions the tools send (see above).
inline constexpr int16_t metadata_version = 9;
inline constexpr int16_t elect_leaders_version = 1;

// Kafka's name of a wire error code ("NOT_CONTROLLER"), or "error N" for
// a code this build does not know.
std::string kafka_error_name(int16_t code);

// A broker's Kafka endpoint as "host:port" (IPv6 hosts in brackets).
std::string endpoint_of(const std::string& host, int32_t port);

}  // namespace sluice::protocol
