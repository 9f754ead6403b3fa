#pragma once

// Forwarding of controller requests (as Kafka's KIP-590 forwards): in a
// cluster, CreateTopics, DeleteTopics, CreatePartitions and ElectLeaders
// (forwardable()), and AlterConfigs and IncrementalAlterConfigs of topics
// or the cluster-wide broker default (alter_configs_for_controller,
// kafka/handlers/handlers.h), sent to a broker
// that is not the controller are passed on, byte for byte, to the broker
// Metadata names as the controller, and its answer is passed back to the
// client unchanged (it carries the client's correlation id). Clients that
// send these to any broker (most send them to the controller already) see
// no difference.
//
// One thread forwards, one request at a time, over one connection to the
// controller kept open between requests (admin requests are rare). A
// request the controller does not answer within the timeout, or that
// cannot be sent (no controller known, the connection refused), is handled
// locally instead, which answers NOT_CONTROLLER: the client retries after
// refreshing its metadata. Forwarding never blocks an I/O thread, and the
// controller's own controller requests run on the same thread (they wait
// for etcd).
//
// Thread safety: submit() from any thread; stop() once, before the server
// stops.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "kafka/request.h"

namespace sluice::kafka {

class forwarder {
 public:
  // `local` handles a request here when forwarding fails.
  forwarder(int64_t timeout_ms, std::function<void(request)> local);
  ~forwarder();

  // Whether every request of `api_key` is the controller's (the
  // AlterConfigs APIs depend on the resources they name: handlers.h).
  static bool forwardable(int16_t api_key);
  // Forwards `req` to the controller at host:port.
  void submit(request req, std::string host, int32_t port);
  // Handles `req` here, on the forwarding thread: the controller's own
  // admin requests wait on etcd, which an I/O thread must not.
  void handle_here(request req) { submit(std::move(req), {}, 0); }
  void stop();

 private:
  struct job {
    request req;
    std::string host;
    int32_t port;
  };
  void run();
  // Sends the frame and reads the answer's body; nullopt on any failure.
  std::optional<std::vector<std::byte>> exchange(const job& j);
  void disconnect();

  const int64_t timeout_ms_;
  std::function<void(request)> local_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<job> queue_;
  bool stopping_ = false;
  std::thread thread_;
  // The forwarding thread's connection.
  int fd_ = -1;
  std::string peer_host_;
  int32_t peer_port_ = 0;
};

}  // namespace sluice::kafka
