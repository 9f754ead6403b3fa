#pragma once
// What the kernel measures of a TCP connection, for sizing what is sent on
// it. Linux only (TCP_INFO); elsewhere, or on a socket that is not TCP, the
// answer is "unknown".

#include <chrono>
#include <optional>

namespace sluice::net {

// The smallest round-trip time the kernel has seen on connected TCP socket
// `fd` (tcpi_min_rtt, over the last few minutes): the path's own delay,
// without the queueing that inflates the smoothed RTT under load (on
// loopback here, 1–20 µs minimum against up to 12 ms smoothed while a
// consumer caught up). nullopt when the kernel cannot tell: not a TCP
// socket, a kernel without the field, or no sample yet.
std::optional<std::chrono::microseconds> tcp_min_rtt(int fd);

}  // namespace sluice::net
