#include "kafka/forwarder.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/endian.h"
#include "base/limits.h"
#include "base/log.h"
#include "base/thread_name.h"
#include "config/group_config.h"
#include "protocol/frame.h"
#include "protocol/messages.h"

namespace sluice::kafka {

namespace {

thread_local bool forwarding_thread = false;  // set by the forwarder's own thread

constexpr int16_t create_topics_key = protocol::create_topics_request::api_key;
constexpr int16_t delete_topics_key = protocol::delete_topics_request::api_key;
constexpr int16_t create_partitions_key = protocol::create_partitions_request::api_key;
constexpr int16_t elect_leaders_key = protocol::elect_leaders_request::api_key;

// Waits until `fd` is ready for `events` or `deadline_ms` (monotonic) passes.
bool wait_fd(int fd, short events, const sluice::deadline& until) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int ms = static_cast<int>(std::min<int64_t>(until.left_ms(), limits::forward_poll_ms));
    if (until.passed()) return false;
    const int r = ::poll(&p, 1, ms);
    if (r > 0) return (p.revents & (events | POLLHUP | POLLERR)) != 0 && !(p.revents & POLLERR);
    if (r < 0 && errno != EINTR) return false;
  }
}

bool send_all(int fd, const std::byte* data, size_t n, const sluice::deadline& until) {
  while (n > 0) {
    if (!wait_fd(fd, POLLOUT, until)) return false;
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool recv_all(int fd, std::byte* data, size_t n, const sluice::deadline& until) {
  while (n > 0) {
    if (!wait_fd(fd, POLLIN, until)) return false;
    const ssize_t r = ::recv(fd, data, n, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return false;
    data += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// A non-blocking TCP connection to host:port, or -1.
int connect_to(const std::string& host, int32_t port, const sluice::deadline& until) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) return -1;
  int fd = -1;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
      ::close(fd);
      fd = -1;
      continue;
    }
    int err = 0;
    socklen_t len = sizeof err;
    if (!wait_fd(fd, POLLOUT, until) || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd >= 0) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return fd;
}

}  // namespace

bool forwarder::on_forwarding_thread() { return forwarding_thread; }

bool forwarder::forwardable(int16_t api_key) {
  return api_key == create_topics_key || api_key == delete_topics_key || api_key == create_partitions_key ||
         api_key == elect_leaders_key;
}

forwarder::forwarder(int64_t timeout_ms, std::function<void(request)> local,
                     std::function<void(const std::string&)> create_here,
                     std::function<void(const std::string&)> forget_here)
    : timeout_ms_(timeout_ms),
      local_(std::move(local)),
      create_here_(std::move(create_here)),
      forget_here_(std::move(forget_here)) {
  thread_ = std::thread([this] {
    set_thread_name("forwarder");
    forwarding_thread = true;
    run();
  });
}

forwarder::~forwarder() { stop(); }

void forwarder::submit(request req, std::string host, int32_t port) {
  {
    std::lock_guard g(mu_);
    if (!stopping_) {
      queue_.push_back(job{std::move(req), std::move(host), port});
      cv_.notify_one();
      return;
    }
  }
  local_(std::move(req));
}

void forwarder::create_topics(std::vector<std::string> topics, std::string host, int32_t port) {
  std::lock_guard g(mu_);
  if (stopping_) return;
  std::vector<std::string> fresh;
  for (auto& t : topics)
    if (creating_.insert(t).second) fresh.push_back(std::move(t));
  if (fresh.empty()) return;
  job j;
  j.host = std::move(host);
  j.port = port;
  j.auto_create = std::move(fresh);
  queue_.push_back(std::move(j));
  cv_.notify_one();
}

void forwarder::delete_group_configs(std::vector<std::string> groups, std::string host, int32_t port) {
  if (groups.empty()) return;
  std::lock_guard g(mu_);
  if (stopping_) return;
  job j;
  j.host = std::move(host);
  j.port = port;
  j.forget_groups = std::move(groups);
  queue_.push_back(std::move(j));
  cv_.notify_one();
}

void forwarder::stop() {
  {
    std::lock_guard g(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  disconnect();
  // What was not forwarded is answered here.
  std::deque<job> left;
  {
    std::lock_guard g(mu_);
    left.swap(queue_);
  }
  for (auto& j : left)
    if (j.auto_create.empty() && j.forget_groups.empty()) local_(std::move(j.req));
}

void forwarder::disconnect() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::optional<std::vector<std::byte>> forwarder::exchange(std::span<const std::byte> frame,
                                                          const std::string& host, int32_t port) {
  const sluice::deadline until(timeout_ms_, sluice::clock::system());
  if (fd_ >= 0 && (peer_host_ != host || peer_port_ != port)) disconnect();
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (fd_ < 0) {
      fd_ = connect_to(host, port, until);
      if (fd_ < 0) return std::nullopt;
      peer_host_ = host;
      peer_port_ = port;
    }
    std::byte size[4];
    store_be<uint32_t>(size, static_cast<uint32_t>(frame.size()));
    std::byte got[4];
    if (send_all(fd_, size, 4, until) && send_all(fd_, frame.data(), frame.size(), until) &&
        recv_all(fd_, got, 4, until)) {
      const uint32_t n = load_be<uint32_t>(got);
      if (n < 4 || n > static_cast<uint32_t>(limits::max_socket_request_max_bytes)) {
        disconnect();
        return std::nullopt;
      }
      std::vector<std::byte> body(n);
      if (recv_all(fd_, body.data(), n, until)) return body;
    }
    // A connection the controller closed while idle: once more on a new one.
    disconnect();
    if (until.passed()) break;
  }
  return std::nullopt;
}

void forwarder::run_auto_create(const job& j) {
  if (j.host.empty()) {
    for (const auto& t : j.auto_create)
      if (create_here_) create_here_(t);
    return;
  }
  // Version 4: the first that lets the controller pick the partition count
  // and replication factor (-1, KIP-464), and the last before the flexible
  // encoding, which is all an automatic creation needs.
  constexpr int16_t version = 4;
  protocol::create_topics_request req;
  for (const auto& name : j.auto_create) {
    auto& t = req.topics.emplace_back();
    t.name = name;
    t.num_partitions = -1;
    t.replication_factor = -1;
  }
  req.timeout_ms = static_cast<int32_t>(timeout_ms_);
  const int32_t correlation_id = ++auto_correlation_id_;
  auto bytes = protocol::encode_request(correlation_id, version, req, std::string("sluice-auto-create")).flatten();
  SLUICE_ASSERT(bytes.ok(), "a CreateTopics request encodes");
  const auto* p = reinterpret_cast<const std::byte*>(bytes->data());
  auto answer = exchange(std::span<const std::byte>(p + 4, bytes->size() - 4), j.host, j.port);
  if (!answer) {
    SLUICE_LOG_INFO("automatic creation of {} topic(s) ({}...): the controller at {}:{} did not answer",
                    j.auto_create.size(), j.auto_create.front(), j.host, j.port);
    return;
  }
  auto body = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(answer->data()), answer->size());
  protocol::reader rd(body);
  protocol::response_header h;
  h.read(rd, protocol::response_header_version(protocol::create_topics_response::api_key, version));
  protocol::create_topics_response resp;
  resp.read(rd, version);
  if (!rd.to_status().ok() || h.correlation_id != correlation_id) {
    SLUICE_LOG_WARN("automatic topic creation: the controller at {}:{} answered what does not decode", j.host,
                    j.port);
    disconnect();
    return;
  }
  constexpr int16_t topic_already_exists = to_wire(error_code::topic_already_exists);
  for (const auto& t : resp.topics) {
    if (t.error_code == 0) {
      SLUICE_LOG_INFO("asked the controller to create topic {} (automatic creation)", t.name);
    } else if (t.error_code != topic_already_exists) {
      SLUICE_LOG_WARN("automatic creation of topic {}: error {} {}", t.name, t.error_code,
                      t.error_message.value_or(""));
    }
  }
}

void forwarder::run_forget_groups(const job& j) {
  if (j.host.empty()) {
    for (const auto& group : j.forget_groups)
      if (forget_here_) forget_here_(group);
    return;
  }
  // Every group key deleted: a key the group has no value for is no error.
  constexpr int16_t version = 0;
  protocol::incremental_alter_configs_request req;
  for (const auto& group : j.forget_groups) {
    auto& r = req.resources.emplace_back();
    r.resource_type = 32;  // GROUP
    r.resource_name = group;
    for (const auto& g : config::all_group_settings()) {
      auto& c = r.configs.emplace_back();
      c.name = std::string(g.row.name);
      c.config_operation = static_cast<int8_t>(config::alter_op::remove);
    }
  }
  const int32_t correlation_id = ++auto_correlation_id_;
  auto bytes = protocol::encode_request(correlation_id, version, req, std::string("sluice-delete-groups")).flatten();
  SLUICE_ASSERT(bytes.ok(), "an IncrementalAlterConfigs request encodes");
  const auto* p = reinterpret_cast<const std::byte*>(bytes->data());
  auto answer = exchange(std::span<const std::byte>(p + 4, bytes->size() - 4), j.host, j.port);
  if (!answer) {
    SLUICE_LOG_WARN("the configs of {} deleted group(s) ({}...) stay: the controller at {}:{} did not answer",
                    j.forget_groups.size(), j.forget_groups.front(), j.host, j.port);
    return;
  }
  auto body = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(answer->data()), answer->size());
  protocol::reader rd(body);
  protocol::response_header h;
  h.read(rd, protocol::response_header_version(protocol::incremental_alter_configs_response::api_key, version));
  protocol::incremental_alter_configs_response resp;
  resp.read(rd, version);
  if (!rd.to_status().ok() || h.correlation_id != correlation_id) {
    SLUICE_LOG_WARN("deleting group configs: the controller at {}:{} answered what does not decode", j.host,
                    j.port);
    disconnect();
    return;
  }
  for (const auto& r : resp.responses) {
    if (r.error_code != 0) {
      SLUICE_LOG_WARN("the configs of deleted group {} stay: error {} {}", r.resource_name, r.error_code,
                      r.error_message.value_or(""));
    }
  }
}

void forwarder::run() {
  for (;;) {
    job j;
    {
      std::unique_lock g(mu_);
      cv_.wait(g, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      j = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!j.forget_groups.empty()) {
      run_forget_groups(j);
      continue;
    }
    if (!j.auto_create.empty()) {
      run_auto_create(j);
      std::lock_guard g(mu_);
      for (const auto& t : j.auto_create) creating_.erase(t);
      continue;
    }
    if (j.host.empty()) {
      local_(std::move(j.req));
      continue;
    }
    auto answer = exchange(j.req.frame, j.host, j.port);
    if (!answer) {
      SLUICE_LOG_INFO("forwarding API {} to the controller at {}:{} failed; answering here", j.req.api_key(),
                      j.host, j.port);
      local_(std::move(j.req));
      continue;
    }
    net::response r;
    r.append(std::move(*answer));
    j.req.responder.respond(std::move(r));
  }
}

}  // namespace sluice::kafka
