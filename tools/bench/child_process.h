#pragma once

// A process a benchmark starts (etcd, sluice, nats-server; the share mode's
// consumers): spawned with its output in a log file (or its stdout in a
// pipe to the bench), tied to this process (it gets SIGKILL if the bench
// dies first), and stopped by its pid only.

#include <string>
#include <vector>

#include <sys/types.h>

namespace sluice::bench {

class child_process {
 public:
  // Does not start it; start() does.
  child_process(std::vector<std::string> argv, std::string log_path)
      : argv_(std::move(argv)), log_(std::move(log_path)) {}
  // stop() with SIGTERM.
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  // Forks and execs; the log file is appended to, so a restart keeps the
  // first run's lines. Throws bench_error when it cannot fork.
  void start();
  // As start(), but the child's stdout goes to a pipe (its stderr to the
  // log): returns the pipe's read end, non-blocking and close-on-exec, which
  // the caller owns and closes. Throws bench_error when it cannot fork.
  int start_piped();
  // Waits (at most `seconds`) until 127.0.0.1:port accepts connections;
  // throws bench_error with the log's tail if the process exits or the time
  // runs out.
  void wait_listening(uint16_t port, double seconds) const;
  // Sends `sig` and waits for the exit, SIGKILL after `grace_seconds`.
  // Nothing when not running.
  void stop(int sig, double grace_seconds = 15);
  // True while started and not exited (reaps it when it has).
  bool running();
  pid_t pid() const { return pid_; }
  // The wait status (waitpid's) of the last run, once running() or stop()
  // has reaped it; -1 before.
  int wait_status() const { return status_; }
  const std::string& log_path() const { return log_; }
  // The last `bytes` of the log.
  std::string log_tail(size_t bytes = 2000) const;

 private:
  void spawn(int stdout_fd);

  std::vector<std::string> argv_;
  std::string log_;
  pid_t pid_ = 0;
  int status_ = -1;
};

}  // namespace sluice::bench
