#include "etcd/testing/etcd_cluster.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"

namespace sluice::etcd::testing {

namespace {

void sleep_ms(int64_t ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// A port nothing listens on right now: bind port 0 and let the kernel pick.
result<int> free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return make_error(errc::io_error, std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return make_error(errc::io_error, std::string("bind: ") + std::strerror(errno));
  }
  ::close(fd);
  return static_cast<int>(ntohs(a.sin_port));
}

// GET /health on 127.0.0.1:port; true if etcd says {"health":"true"}.
bool healthy(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  timeval tv{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  std::string answer;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    const std::string req = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[1024];
      ssize_t n;
      while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0 && answer.size() < 8192)
        answer.append(buf, n);
    }
  }
  ::close(fd);
  return answer.find("\"health\":\"true\"") != std::string::npos;
}

}  // namespace

result<std::unique_ptr<etcd_cluster>> etcd_cluster::start(int n, int64_t timeout_ms,
                                                          std::string etcd_bin) {
  if (n < 1 || n > 7) return make_error(errc::invalid_argument, "etcd_cluster: 1 to 7 members");
  std::unique_ptr<etcd_cluster> c(new etcd_cluster());
  if (etcd_bin.empty()) {
    const char* env = std::getenv("ETCD_BIN");
    etcd_bin = env != nullptr && *env != '\0' ? env : "/usr/bin/etcd";
  }
  c->etcd_bin_ = etcd_bin;
  std::string tmpl = (std::filesystem::temp_directory_path() / "sluice-etcd-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return make_error(errc::io_error, std::string("mkdtemp: ") + std::strerror(errno));
  }
  c->root_dir_ = tmpl;
  for (int i = 0; i < n; ++i) {
    member m;
    m.name = "m" + std::to_string(i);
    SLUICE_ASSIGN_OR_RETURN(m.client_port, free_port());
    SLUICE_ASSIGN_OR_RETURN(m.peer_port, free_port());
    m.data_dir = c->root_dir_ + "/" + m.name + ".etcd";
    m.log_path = c->root_dir_ + "/" + m.name + ".log";
    if (!c->initial_cluster_.empty()) c->initial_cluster_ += ",";
    c->initial_cluster_ += m.name + "=http://127.0.0.1:" + std::to_string(m.peer_port);
    c->members_.push_back(std::move(m));
  }
  for (int i = 0; i < n; ++i) SLUICE_TRY(c->spawn(i));
  SLUICE_TRY(c->wait_all_healthy(timeout_ms));
  return c;
}

etcd_cluster::~etcd_cluster() {
  for (int i = 0; i < size(); ++i) {
    if (running(i)) kill(i).ignore();
  }
  if (!root_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(root_dir_, ec);
  }
}

std::string etcd_cluster::endpoint(int i) const {
  return "http://127.0.0.1:" + std::to_string(members_.at(i).client_port);
}

std::string etcd_cluster::endpoints() const {
  std::string s;
  for (int i = 0; i < size(); ++i) s += (i ? "," : "") + endpoint(i);
  return s;
}

std::string etcd_cluster::log_tail(int i, size_t bytes) const {
  std::ifstream f(members_.at(i).log_path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

status etcd_cluster::spawn(int i) {
  member& m = members_.at(i);
  if (m.pid > 0) return status(errc::invalid_argument, m.name + " is already running");
  const std::string client_url = "http://127.0.0.1:" + std::to_string(m.client_port);
  const std::string peer_url = "http://127.0.0.1:" + std::to_string(m.peer_port);
  // Flag and value pairs, one pair a line.
  // clang-format off
  std::vector<std::string> args = {
      etcd_bin_,
      "--name", m.name,
      "--data-dir", m.data_dir,
      "--listen-client-urls", client_url,
      "--advertise-client-urls", client_url,
      "--listen-peer-urls", peer_url,
      "--initial-advertise-peer-urls", peer_url,
      "--initial-cluster", initial_cluster_,
      "--initial-cluster-state", "new",
      "--initial-cluster-token", "sluice-test-" + std::to_string(::getpid()),
      "--heartbeat-interval", "50",
      "--election-timeout", "500",
      "--log-level", "warn",
  };
  // clang-format on

  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls (open, dup2, execv, _exit).
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log_path = m.log_path;
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return status(errc::io_error, std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // If the test process dies without running its destructors (a crash,
    // an assertion), the kernel kills the member too: no stray etcd is left
    // holding ports. (The signal follows the forking thread, which is the
    // test's main thread.)
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  m.pid = pid;
  return {};
}

status etcd_cluster::kill(int i) {
  member& m = members_.at(i);
  if (m.pid <= 0) return status(errc::invalid_argument, m.name + " is not running");
  ::kill(m.pid, SIGKILL);
  int st = 0;
  ::waitpid(m.pid, &st, 0);
  m.pid = -1;
  return {};
}

status etcd_cluster::stop(int i, int64_t timeout_ms) {
  member& m = members_.at(i);
  if (m.pid <= 0) return status(errc::invalid_argument, m.name + " is not running");
  ::kill(m.pid, SIGTERM);
  deadline d(timeout_ms, sluice::clock::system());
  while (!d.passed()) {
    int st = 0;
    if (::waitpid(m.pid, &st, WNOHANG) == m.pid) {
      m.pid = -1;
      return {};
    }
    sleep_ms(20);
  }
  kill(i).ignore();
  return status(errc::io_error, m.name + " did not stop on SIGTERM; killed");
}

status etcd_cluster::restart(int i) {
  if (running(i)) SLUICE_TRY(stop(i));
  return spawn(i);
}

status etcd_cluster::wait_healthy(int i, int64_t timeout_ms) {
  member& m = members_.at(i);
  deadline d(timeout_ms, sluice::clock::system());
  while (!d.passed()) {
    if (m.pid > 0) {
      int st = 0;
      if (::waitpid(m.pid, &st, WNOHANG) == m.pid) {
        m.pid = -1;
        return status(errc::io_error,
                      m.name + " exited (status " + std::to_string(st) + "):\n" + log_tail(i));
      }
    } else {
      return status(errc::invalid_argument, m.name + " is not running");
    }
    if (healthy(m.client_port)) return {};
    sleep_ms(50);
  }
  return status(errc::unavailable, m.name + " not healthy within " + std::to_string(timeout_ms) +
                                       " ms:\n" + log_tail(i));
}

status etcd_cluster::wait_all_healthy(int64_t timeout_ms) {
  deadline d(timeout_ms, sluice::clock::system());
  for (int i = 0; i < size(); ++i) {
    if (running(i)) SLUICE_TRY(wait_healthy(i, std::max<int64_t>(d.left_ms(), 1)));
  }
  return {};
}

}  // namespace sluice::etcd::testing
