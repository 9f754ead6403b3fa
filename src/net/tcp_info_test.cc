#include "net/tcp_info.h"

#include <cstdint>

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace sluice::net {
namespace {

using namespace std::chrono_literals;

// A connected pair over 127.0.0.1: [0] the client end, [1] the accepted end.
struct tcp_pair {
  int fds[2] = {-1, -1};
  tcp_pair() {
    int lst = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(lst, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(lst, 1), 0);
    EXPECT_EQ(::getsockname(lst, reinterpret_cast<sockaddr*>(&a), &len), 0);
    fds[0] = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(::connect(fds[0], reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    fds[1] = ::accept(lst, nullptr, nullptr);
    EXPECT_GE(fds[1], 0);
    ::close(lst);
  }
  ~tcp_pair() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
};

TEST(TcpInfo, LoopbackConnectionHasASmallMinimumRtt) {
  tcp_pair p;
  // One exchange each way, so both ends have had an acknowledged send.
  char b = 'x';
  ASSERT_EQ(::send(p.fds[0], &b, 1, 0), 1);
  ASSERT_EQ(::recv(p.fds[1], &b, 1, 0), 1);
  ASSERT_EQ(::send(p.fds[1], &b, 1, 0), 1);
  ASSERT_EQ(::recv(p.fds[0], &b, 1, 0), 1);
  for (int fd : p.fds) {
    auto rtt = tcp_min_rtt(fd);
    ASSERT_TRUE(rtt.has_value()) << "fd " << fd;
    EXPECT_GE(rtt->count(), 0);
    // Loopback has no path to cross; only a stalled machine reaches this.
    EXPECT_LT(*rtt, 1s);
  }
}

TEST(TcpInfo, UnknownWhereTheKernelCannotTell) {
  EXPECT_FALSE(tcp_min_rtt(-1).has_value());
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  EXPECT_FALSE(tcp_min_rtt(sv[0]).has_value());
  ::close(sv[0]);
  ::close(sv[1]);
  // A TCP socket that never connected has no sample.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  EXPECT_FALSE(tcp_min_rtt(fd).has_value());
  ::close(fd);
}

}  // namespace
}  // namespace sluice::net
