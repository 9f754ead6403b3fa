#pragma once

// Forwarding of controller requests (as Kafka's KIP-590 forwards): in a
// cluster, CreateTopics, DeleteTopics, CreatePartitions and ElectLeaders
// (forwardable()), and AlterConfigs and IncrementalAlterConfigs of topics,
// groups or the cluster-wide broker default (alter_configs_for_controller,
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
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "kafka/request.h"

namespace sluice::kafka {

class forwarder {
 public:
  // `local` handles a request here when forwarding fails; `create_here`
  // creates a topic automatically on this broker, when it is the
  // controller (with the broker's default partitions and replication);
  // `forget_here` deletes a deleted group's configs on this broker, when it
  // is the controller.
  forwarder(int64_t timeout_ms, std::function<void(request)> local,
            std::function<void(const std::string& topic)> create_here = {},
            std::function<void(const std::string& group)> forget_here = {});
  ~forwarder();

  // Whether every request of `api_key` is the controller's (the
  // AlterConfigs APIs depend on the resources they name: handlers.h).
  static bool forwardable(int16_t api_key);
  // Forwards `req` to the controller at host:port.
  void submit(request req, std::string host, int32_t port);
  // Handles `req` here, on the forwarding thread: the controller's own
  // admin requests wait on etcd, which an I/O thread must not.
  void handle_here(request req) { submit(std::move(req), {}, 0); }
  // Whether the caller runs on a forwarder's thread, where a handler may
  // wait on etcd (an I/O thread hands such a request over with handle_here).
  static bool on_forwarding_thread();
  // Automatic topic creation (auto.create.topics.enable, a Metadata that
  // allows it), as Kafka's brokers do it: asks the controller at host:port
  // (empty host: this broker is the controller) to create `topics` with
  // its default partition count and replication factor, by a CreateTopics
  // request, and returns at once; the Metadata answers LEADER_NOT_AVAILABLE
  // and the client asks again until the topic is there. A topic asked for
  // and not yet answered is not asked again; a failure is logged only (the
  // client's next Metadata asks again).
  void create_topics(std::vector<std::string> topics, std::string host, int32_t port);
  // The configs of groups DeleteGroups deleted go with them (Kafka removes
  // a deleted group's configs): asks the controller at host:port (empty
  // host: this broker is the controller, `forget_here`) to delete every
  // group key of each, by one IncrementalAlterConfigs request, and returns
  // at once. A failure is logged only; the configs stay until an operator
  // deletes them (`sluice config alter --group G --delete-config ...`).
  void delete_group_configs(std::vector<std::string> groups, std::string host, int32_t port);
  void stop();

 private:
  struct job {
    request req;
    std::string host;
    int32_t port;
    // Not empty: an automatic creation of these topics (req is unused).
    std::vector<std::string> auto_create;
    // Not empty: the configs of these deleted groups to delete (req is unused).
    std::vector<std::string> forget_groups;
  };
  void run();
  void run_auto_create(const job& j);
  void run_forget_groups(const job& j);
  // Sends `frame` (without its size) and reads the answer's body; nullopt
  // on any failure.
  std::optional<std::vector<std::byte>> exchange(std::span<const std::byte> frame, const std::string& host,
                                                 int32_t port);
  void disconnect();

  const int64_t timeout_ms_;
  std::function<void(request)> local_;
  std::function<void(const std::string&)> create_here_;
  std::function<void(const std::string&)> forget_here_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<job> queue_;
  bool stopping_ = false;
  std::set<std::string> creating_;  // automatic creations queued or running
  std::thread thread_;
  // The forwarding thread's connection.
  int fd_ = -1;
  std::string peer_host_;
  int32_t peer_port_ = 0;
  int32_t auto_correlation_id_ = 0;  // the forwarding thread's own requests
};

}  // namespace sluice::kafka
