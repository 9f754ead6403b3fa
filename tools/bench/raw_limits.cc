#include "raw_limits.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "report.h"

namespace sluice::bench {

std::string os_error(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

bool write_all(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;  // no progress: not worth a retry
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

namespace {

// A write buffer touched before any timing starts.
std::vector<char> filled(size_t n) {
  std::vector<char> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<char>('a' + i % 26);
  return b;
}

// Writes up to `total` bytes in `chunk` calls, fdatasync every `sync_every`
// bytes (0: never) and at the end, stopping early after `max_seconds` (0: no
// bound). `first_bytes` > 0 also times the first that many bytes.
// The file is `path`; it is removed at the end unless `keep` (and on error).
std::variant<timed_write, std::string> write_file_timed(const std::string& path, bool keep,
                                                        uint64_t total, size_t chunk,
                                                        uint64_t sync_every, double max_seconds = 0,
                                                        uint64_t first_bytes = 0) {
  fd_guard f(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (f.fd < 0) return os_error("open " + path);
  auto buf = filled(chunk);
  uint64_t written = 0, since_sync = 0;
  const int64_t t0 = now_ns();
  const int64_t stop = max_seconds > 0 ? t0 + static_cast<int64_t>(max_seconds * 1e9) : INT64_MAX;
  int64_t t_first = 0;
  while (written < total && now_ns() < stop) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk, total - written));
    if (!write_all(f.fd, buf.data(), n)) {
      ::unlink(path.c_str());
      return os_error("write " + path);
    }
    written += n;
    since_sync += n;
    if (sync_every && since_sync >= sync_every) {
      if (::fdatasync(f.fd) != 0) {
        ::unlink(path.c_str());
        return os_error("fdatasync " + path);
      }
      since_sync = 0;
    }
    if (first_bytes && !t_first && written >= first_bytes && since_sync == 0) t_first = now_ns();
  }
  if (sync_every && since_sync > 0 && ::fdatasync(f.fd) != 0) {
    ::unlink(path.c_str());
    return os_error("fdatasync " + path);
  }
  const int64_t t1 = now_ns();
  if (!keep) ::unlink(path.c_str());
  timed_write r;
  r.bytes_per_s =
      static_cast<double>(written) * 1e9 / static_cast<double>(std::max<int64_t>(t1 - t0, 1));
  if (t_first)
    r.first_bytes_per_s = static_cast<double>(first_bytes) * 1e9 /
                          static_cast<double>(std::max<int64_t>(t_first - t0, 1));
  return r;
}

rate rate_of(std::variant<timed_write, std::string> w) {
  if (auto e = std::get_if<std::string>(&w)) return *e;
  return std::get<timed_write>(w).bytes_per_s;
}

}  // namespace

rate raw_sync_write(const std::string& dir, uint64_t total_bytes, size_t chunk_bytes,
                    uint64_t sync_every_bytes) {
  return rate_of(
      write_file_timed(dir + "/raw-write.tmp", false, total_bytes, chunk_bytes, sync_every_bytes));
}

std::variant<timed_write, std::string> raw_sync_write_for(const std::string& path, double seconds,
                                                          uint64_t max_bytes, size_t chunk_bytes,
                                                          uint64_t sync_every_bytes,
                                                          uint64_t first_bytes) {
  return write_file_timed(path, true, max_bytes, chunk_bytes, sync_every_bytes, seconds,
                          first_bytes);
}

rate raw_buffered_write(const std::string& dir, uint64_t total_bytes, size_t chunk_bytes) {
  return rate_of(write_file_timed(dir + "/raw-write.tmp", false, total_bytes, chunk_bytes, 0));
}

bool write_file(const std::string& path, uint64_t total_bytes, size_t chunk_bytes) {
  fd_guard f(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (f.fd < 0) return false;
  auto buf = filled(chunk_bytes);
  for (uint64_t w = 0; w < total_bytes;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_bytes, total_bytes - w));
    if (!write_all(f.fd, buf.data(), n)) return false;
    w += n;
  }
  return true;
}

rate raw_cached_read(const std::string& path, size_t chunk_bytes) {
  fd_guard f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (f.fd < 0) return os_error("open " + path);
  std::vector<char> buf = filled(chunk_bytes);
  uint64_t pos = 0;
  const int64_t t0 = now_ns();
  for (;;) {
    ssize_t r = ::pread(f.fd, buf.data(), chunk_bytes, static_cast<off_t>(pos));
    if (r < 0) {
      if (errno == EINTR) continue;
      return os_error("pread " + path);
    }
    if (r == 0) break;
    pos += static_cast<uint64_t>(r);
  }
  const int64_t t1 = now_ns();
  return static_cast<double>(pos) * 1e9 / static_cast<double>(std::max<int64_t>(t1 - t0, 1));
}

std::vector<fsync_round> raw_fsync_rounds(const std::string& dir, int files, int threads, int count,
                                          double max_seconds, std::string& error) {
  std::vector<fsync_round> out;
  std::vector<std::unique_ptr<fd_guard>> fds;
  std::vector<std::string> paths;
  for (int i = 0; i < files; ++i) {
    paths.push_back(dir + "/raw-fsync-round-" + std::to_string(i) + ".tmp");
    fds.push_back(std::make_unique<fd_guard>(
        ::open(paths.back().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)));
    if (fds.back()->fd < 0) {
      error = os_error("open " + paths.back());
      break;
    }
  }
  const auto buf = filled(4096);
  std::atomic<int> next{0};
  std::atomic<bool> quit{false};
  std::atomic<int> failed_errno{0};  // errno is per thread: the first worker's failure
  const int workers = std::max(1, std::min(threads, files));
  std::barrier start(workers + 1), done(workers + 1);
  std::vector<std::thread> pool;
  if (error.empty()) {
    for (int w = 0; w < workers; ++w)
      pool.emplace_back([&] {
        for (;;) {
          start.arrive_and_wait();
          if (quit.load()) return;
          for (int i; (i = next++) < files;)
            if (!write_all(fds[static_cast<size_t>(i)]->fd, buf.data(), buf.size()) ||
                ::fdatasync(fds[static_cast<size_t>(i)]->fd) != 0) {
              int none = 0;
              failed_errno.compare_exchange_strong(none, errno != 0 ? errno : EIO);
            }
          done.arrive_and_wait();
        }
      });
    const int64_t stop = now_ns() + static_cast<int64_t>(max_seconds * 1e9);
    for (int r = 0; r < count && now_ns() < stop; ++r) {
      next = 0;
      const int64_t t0 = now_ns();
      start.arrive_and_wait();
      done.arrive_and_wait();
      if (const int e = failed_errno.load()) {
        error = "write+fdatasync " + dir + "/raw-fsync-round-*.tmp: " + std::strerror(e);
        break;
      }
      out.push_back({t0, now_ns()});
    }
    quit = true;
    start.arrive_and_wait();
    for (auto& t : pool) t.join();
  }
  fds.clear();
  for (const auto& p : paths) ::unlink(p.c_str());
  return out;
}

std::vector<double> raw_fsync_latencies_ms(const std::string& dir, int count, double max_seconds,
                                           std::string& error) {
  return round_latencies_ms(raw_fsync_rounds(dir, 1, 1, count, max_seconds, error));
}

std::vector<double> round_latencies_ms(const std::vector<fsync_round>& rounds) {
  std::vector<double> out;
  out.reserve(rounds.size());
  for (const auto& r : rounds) out.push_back(static_cast<double>(r.end_ns - r.start_ns) / 1e6);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<double> group_commit_floor_ms(const std::vector<fsync_round>& rounds,
                                          int64_t interval_ns) {
  std::vector<double> out;
  if (rounds.size() < 2 || interval_ns <= 0) return out;
  // A message's latency depends only on when it arrives, so a denser stream
  // samples the same curve more finely: arrivals are spaced so that there
  // are at most max_floor_arrivals (--rate goes up to 1e8 msgs/s).
  const int64_t span = rounds.back().start_ns - rounds.front().start_ns;
  interval_ns = std::max(interval_ns, span / max_floor_arrivals + 1);
  out.reserve(static_cast<size_t>(span / interval_ns + 1));
  // A message goes into the first round that starts after it arrives and is
  // answered when that round ends; arrivals stop with the last round's start.
  size_t j = 0;
  for (int64_t t = rounds.front().start_ns; t <= rounds.back().start_ns; t += interval_ns) {
    while (rounds[j].start_ns < t) ++j;  // the last start is >= t: stays in range
    out.push_back(static_cast<double>(rounds[j].end_ns - t) / 1e6);
  }
  std::sort(out.begin(), out.end());
  return out;
}

namespace {

// One TCP stream over 127.0.0.1: a writer thread calls `send_some(fd)` until
// it fails (false, errno set; EINTR is retried) or the reader is done; the
// reader receives into a buffer of `chunk_bytes` and counts for about
// `seconds` after a short warm-up. The writer's socket uses the congestion
// control `congestion`, or the system's default when it is empty.
rate loopback_stream(double seconds, size_t chunk_bytes,
                     const std::function<bool(int fd)>& send_some,
                     const std::string& congestion = {}) {
  fd_guard lst(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (lst.fd < 0) return os_error("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(lst.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return os_error("bind");
  if (::listen(lst.fd, 1) != 0) return os_error("listen");
  if (::getsockname(lst.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return os_error("getsockname");
  fd_guard cli(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (cli.fd < 0) return os_error("socket");
  // Before the handshake, so the whole connection runs under it.
  if (!congestion.empty() && ::setsockopt(cli.fd, IPPROTO_TCP, TCP_CONGESTION, congestion.data(),
                                          static_cast<socklen_t>(congestion.size())) != 0)
    return os_error("congestion control " + congestion);
  if (::connect(cli.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    return os_error("connect");
  fd_guard srv(::accept4(lst.fd, nullptr, nullptr, SOCK_CLOEXEC));
  if (srv.fd < 0) return os_error("accept");

  std::atomic<bool> stop{false};
  std::thread writer([&] {
    // The reader shuts its end when done, which fails the next send (EPIPE).
    while (!stop.load(std::memory_order_relaxed))
      if (!send_some(cli.fd) && errno != EINTR) break;
    ::shutdown(cli.fd, SHUT_WR);
  });
  std::vector<char> buf = filled(chunk_bytes);
  // Warm-up: let the windows open and the buffers settle before counting.
  const int64_t warm_until = now_ns() + 200'000'000;
  uint64_t got = 0;
  int64_t t0 = 0;
  const int64_t span = static_cast<int64_t>(seconds * 1e9);
  bool failed = false;
  for (;;) {
    ssize_t r = ::read(srv.fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      failed = r < 0;
      break;
    }
    const int64_t t = now_ns();
    if (t0 == 0) {
      if (t >= warm_until) t0 = t;
      continue;
    }
    got += static_cast<uint64_t>(r);
    if (t - t0 >= span) break;
  }
  const int64_t t1 = now_ns();
  stop = true;
  ::shutdown(srv.fd, SHUT_RDWR);  // unblocks the writer
  writer.join();
  if (failed) return os_error("read");
  if (t0 == 0) return std::string("loopback stream ended during its warm-up");
  return static_cast<double>(got) * 1e9 / static_cast<double>(std::max<int64_t>(t1 - t0, 1));
}

}  // namespace

rate loopback_tcp(double seconds, size_t chunk_bytes, const std::string& congestion) {
  const auto buf = filled(chunk_bytes);
  return loopback_stream(
      seconds, chunk_bytes,
      [&](int fd) { return ::send(fd, buf.data(), buf.size(), MSG_NOSIGNAL) >= 0; }, congestion);
}

std::string default_congestion_control() {
  fd_guard s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  char name[32] = {};  // TCP_CA_NAME_MAX is 16
  socklen_t len = sizeof name - 1;
  if (s.fd < 0 || ::getsockopt(s.fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0)
    return "unknown";
  return std::string(name, ::strnlen(name, len));
}

rate loopback_sendfile(const std::string& dir, double seconds, size_t chunk_bytes,
                       uint64_t file_bytes) {
  const std::string path = dir + "/raw-sendfile.tmp";
  if (!write_file(path, file_bytes, chunk_bytes)) {
    auto e = os_error("write " + path);
    ::unlink(path.c_str());
    return e;
  }
  fd_guard f(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  ::unlink(path.c_str());  // the open descriptor keeps the pages
  if (f.fd < 0) return os_error("open " + path);
  off_t pos = 0;
  return loopback_stream(seconds, chunk_bytes, [&](int fd) {
    if (static_cast<uint64_t>(pos) >= file_bytes) pos = 0;
    const size_t n = static_cast<size_t>(
        std::min<uint64_t>(chunk_bytes, file_bytes - static_cast<uint64_t>(pos)));
    const ssize_t sent = ::sendfile(fd, f.fd, &pos, n);
    if (sent == 0) errno = EIO;  // the file ended early: not worth a retry
    return sent > 0;
  });
}

}  // namespace sluice::bench
