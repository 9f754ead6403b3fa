// Server processes of the cluster benchmark (see child_process.h).

#include "child_process.h"

#include <cerrno>
#include <fstream>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kafka_util.h"
#include "raw_limits.h"
#include "report.h"

namespace sluice::bench {

child_process::~child_process() {
  stop(SIGTERM);
}

void child_process::start() {
  if (running()) return;
  spawn(-1);
}

int child_process::start_piped() {
  if (running()) throw bench_error{argv_.front() + " is already running"};
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw bench_error{os_error("pipe for " + argv_.front())};
  try {
    spawn(fds[1]);
  } catch (...) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw;
  }
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  return fds[0];
}

// Forks and execs argv_: stdout to `stdout_fd` (-1: to the log, as stderr).
void child_process::spawn(int stdout_fd) {
  status_ = -1;
  std::vector<char*> cargv;
  for (auto& a : argv_) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw bench_error{os_error("fork " + argv_.front())};
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec: this process has
    // librdkafka's and libnats's threads.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);  // the bench already died
    int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (stdout_fd >= 0) ::dup2(stdout_fd, 1);
    int nul = ::open("/dev/null", O_RDONLY);
    if (nul >= 0) ::dup2(nul, 0);
    // A new process group: a Ctrl-C at the terminal reaches the bench only,
    // which then stops everything in order.
    ::setpgid(0, 0);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  pid_ = pid;
}

bool child_process::running() {
  if (pid_ <= 0) return false;
  int st = 0;
  if (::waitpid(pid_, &st, WNOHANG) == pid_) {
    pid_ = 0;
    status_ = st;
    return false;
  }
  return true;
}

void child_process::wait_listening(uint16_t port, double seconds) const {
  const int64_t deadline = now_ns() + static_cast<int64_t>(seconds * 1e9);
  while (!port_open(port)) {
    int st = 0;
    if (pid_ <= 0 || ::waitpid(pid_, &st, WNOHANG) == pid_)
      throw bench_error{argv_.front() + " exited at start; its log (" + log_ + ") ends:\n" +
                        log_tail()};
    if (now_ns() > deadline)
      throw bench_error{argv_.front() + " did not listen on 127.0.0.1:" + std::to_string(port) +
                        " within " + fixed(seconds, 0) + " s; its log (" + log_ + ") ends:\n" +
                        log_tail()};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void child_process::stop(int sig, double grace_seconds) {
  if (pid_ <= 0) return;
  ::kill(pid_, sig);
  const int64_t deadline = now_ns() + static_cast<int64_t>(grace_seconds * 1e9);
  int st = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = st;
      break;
    }
    if (r < 0 && errno == ECHILD) break;
    if (now_ns() > deadline) {
      ::kill(pid_, SIGKILL);
      if (::waitpid(pid_, &st, 0) == pid_) status_ = st;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pid_ = 0;
}

std::string child_process::log_tail(size_t bytes) const {
  std::ifstream f(log_, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

}  // namespace sluice::bench
