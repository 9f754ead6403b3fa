#include "protocol/raw_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/endian.h"
#include "base/limits.h"
#include "protocol/error_code.h"

namespace sluice::protocol {

namespace {

// Splits "host:port", "[v6]:port".
result<std::pair<std::string, std::string>> split_host_port(const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon + 1 == s.size()) {
    return error{errc::invalid_argument, "'" + s + "' is not host:port"};
  }
  std::string host = s.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return std::pair{host, s.substr(colon + 1)};
}

}  // namespace

std::string kafka_error_name(int16_t code) {
  const std::string_view name = kafka::error_name(static_cast<kafka::error_code>(code));
  return name == "UNKNOWN" ? "error " + std::to_string(code) : std::string(name);
}

std::string endpoint_of(const std::string& host, int32_t port) {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

result<raw_connection> raw_connection::connect(const std::string& host_port, std::chrono::milliseconds timeout,
                                               std::string client_id) {
  SLUICE_ASSIGN_OR_RETURN(auto hp, split_host_port(host_port));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(hp.first.c_str(), hp.second.c_str(), &hints, &res); rc != 0) {
    return error{errc::unavailable, host_port + ": " + ::gai_strerror(rc)};
  }
  std::string last = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    timeval tv{static_cast<time_t>(timeout.count() / 1000), static_cast<suseconds_t>(timeout.count() % 1000 * 1000)};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      ::freeaddrinfo(res);
      return raw_connection(fd, std::move(client_id));
    }
    last = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return error{errc::unavailable, host_port + ": " + last};
}

result<raw_connection> raw_connection::connect_any(const std::string& list, std::chrono::milliseconds timeout,
                                                   std::string client_id) {
  std::string errors;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string one = list.substr(start, comma - start);
    start = comma + 1;
    if (one.empty()) continue;
    auto c = connect(one, timeout, client_id);
    if (c.ok()) return c;
    errors += (errors.empty() ? "" : "; ") + c.err().message;
  }
  return error{errc::unavailable, errors.empty() ? "no bootstrap address" : errors};
}

raw_connection::raw_connection(raw_connection&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)),
      client_id_(std::move(o.client_id_)),
      correlation_id_(o.correlation_id_),
      frame_(std::move(o.frame_)), frame_len_(o.frame_len_) {}

raw_connection& raw_connection::operator=(raw_connection&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    client_id_ = std::move(o.client_id_);
    correlation_id_ = o.correlation_id_;
    frame_ = std::move(o.frame_);
    frame_len_ = o.frame_len_;
  }
  return *this;
}

raw_connection::~raw_connection() {
  if (fd_ >= 0) ::close(fd_);
}

status raw_connection::send_all(const std::vector<uint8_t>& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return status(errc::unavailable, std::string("send: ") + std::strerror(errno));
    sent += static_cast<size_t>(n);
  }
  return {};
}

status raw_connection::receive_frame() {
  auto read_exact = [&](uint8_t* p, size_t n) -> status {
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::recv(fd_, p + got, n - got, 0);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) return status(errc::unavailable, "the broker closed the connection");
      if (r < 0) return status(errc::unavailable, std::string("receive: ") + std::strerror(errno));
      got += static_cast<size_t>(r);
    }
    return {};
  };
  uint8_t len[4];
  SLUICE_TRY(read_exact(len, 4));
  const int32_t size = load_be<int32_t>(len);
  if (size < 4 || size > limits::default_socket_request_max_bytes) {
    return status(errc::malformed, "response frame of " + std::to_string(size) + " bytes");
  }
  frame_len_ = static_cast<size_t>(size);
  if (frame_.size() < frame_len_) frame_.resize(frame_len_);
  return read_exact(frame_.data(), frame_len_);
}

}  // namespace sluice::protocol
