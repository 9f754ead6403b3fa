// Kept apart from server.cc: <linux/tcp.h> has the tcp_info fields that
// glibc's <netinet/tcp.h> lacks (tcpi_min_rtt), and the two headers cannot
// be included together, while asio includes the glibc one.
#include "net/tcp_info.h"

#include <cstddef>

#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace sluice::net {

std::optional<std::chrono::microseconds> tcp_min_rtt(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return std::nullopt;
  // An older kernel fills a shorter struct; the field must be in what it gave.
  if (len < offsetof(tcp_info, tcpi_min_rtt) + sizeof info.tcpi_min_rtt) return std::nullopt;
  // The kernel starts the minimum at ~0U until the first sample.
  if (info.tcpi_min_rtt == ~0U) return std::nullopt;
  return std::chrono::microseconds(info.tcpi_min_rtt);
}

}  // namespace sluice::net
