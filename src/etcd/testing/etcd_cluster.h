#pragma once

// Real etcd members for integration tests: starts 1 or 3 (or n) `etcd`
// processes on free 127.0.0.1 ports, each with a data directory inside one
// fresh temporary directory, and waits until the cluster is healthy.
//
// Every process it starts is tracked by pid and stopped by pid (never by
// name); the destructor kills whatever still runs and removes the temporary
// directory. Members also get SIGKILL from the kernel if the test process
// dies without cleaning up (PR_SET_PDEATHSIG). Members run with short raft timings (heartbeat 50 ms, election
// 500 ms) so failover in tests takes well under a second or two.
//
// Not thread-safe: one test thread drives it.

#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

#include "base/result.h"

namespace sluice::etcd::testing {

class etcd_cluster {
 public:
  // Starts `members` members and waits (up to timeout_ms) until every one
  // reports healthy. `etcd_bin` defaults to $ETCD_BIN or /usr/bin/etcd.
  static result<std::unique_ptr<etcd_cluster>> start(int members, int64_t timeout_ms = 30'000,
                                                     std::string etcd_bin = {});
  ~etcd_cluster();
  etcd_cluster(const etcd_cluster&) = delete;
  etcd_cluster& operator=(const etcd_cluster&) = delete;

  int size() const { return static_cast<int>(members_.size()); }
  // "http://127.0.0.1:p1,http://127.0.0.1:p2,..." in member order.
  std::string endpoints() const;
  std::string endpoint(int i) const;
  pid_t pid(int i) const { return members_.at(i).pid; }
  bool running(int i) const { return members_.at(i).pid > 0; }
  // The member's log (its stdout and stderr), for failure messages.
  std::string log_tail(int i, size_t bytes = 4000) const;

  // SIGKILL, then reaps it.
  status kill(int i);
  // SIGTERM, waits up to timeout_ms for it to exit, then SIGKILL.
  status stop(int i, int64_t timeout_ms = 10'000);
  // Starts a stopped member again on its ports and data directory.
  status restart(int i);
  // Waits until member i answers /health with "true".
  status wait_healthy(int i, int64_t timeout_ms);
  // Waits until every running member is healthy.
  status wait_all_healthy(int64_t timeout_ms);

 private:
  struct member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    std::string data_dir;
    std::string log_path;
    pid_t pid = -1;
  };
  etcd_cluster() = default;
  status spawn(int i);

  std::string etcd_bin_;
  std::string root_dir_;
  std::string initial_cluster_;
  std::vector<member> members_;
};

}  // namespace sluice::etcd::testing
