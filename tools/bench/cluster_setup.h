#pragma once

// The servers the `cluster`, `restart` and `txn` modes start on this
// machine: a three-member etcd and three `sluice serve` brokers in cluster
// mode over it, on free loopback ports, with their data and logs in one temp
// directory; and the Ctrl-C handling that stops them all.
//
// Every server is a child_process: stopped by its pid when its owner is
// destroyed (also while an error or "interrupted" unwinds), and killed if
// the bench dies first. Destroy in reverse order of construction: brokers,
// then etcd, then the temp directory. Nothing here is thread-safe except
// interrupted() and check_interrupted().

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

#include "child_process.h"

namespace sluice::bench {

// Brokers and etcd members of the cluster these modes start.
inline constexpr int kClusterServers = 3;

// From now on SIGINT and SIGTERM set interrupted(): phases end early and the
// run unwinds (stopping every server) with bench_error "interrupted".
void catch_interrupts();
// True once SIGINT or SIGTERM came; for produce_spec::stop and the like.
const std::atomic<bool>& interrupted();
// Throws bench_error{"interrupted"} once interrupted() is true.
void check_interrupted();

// The temp directory all servers keep their data and logs in
// (PARENT/sluice-bench-cluster-PID); created empty, removed when destroyed.
struct temp_root {
  std::string path;
  explicit temp_root(const std::string& parent);
  ~temp_root();
  temp_root(const temp_root&) = delete;
  temp_root& operator=(const temp_root&) = delete;
};

// Three etcd members, as tests/integration/etcd_harness.py starts them. The
// constructor returns once every member reports itself healthy (30 s at
// most), and throws bench_error otherwise.
class etcd_cluster {
 public:
  etcd_cluster(const std::string& binary, const std::string& root);
  ~etcd_cluster();
  etcd_cluster(const etcd_cluster&) = delete;
  etcd_cluster& operator=(const etcd_cluster&) = delete;
  // The client URLs, comma-separated, for --sluice.etcd.endpoints.
  const std::string& endpoints() const { return endpoints_; }

 private:
  std::vector<std::unique_ptr<child_process>> members_;
  std::string endpoints_;
};

// How sluice_cluster starts its brokers.
struct sluice_cluster_options {
  std::string sluice_path;               // empty: the sluice beside sluice-bench
  std::vector<std::string> broker_args;  // KEY=VALUE, passed as --KEY VALUE to every broker
  int session_timeout_ms = 4000;         // sluice.etcd.session.timeout.ms
};

// Brokers with node ids 1..3 over `etcd`, as scripts/cluster.sh and
// tests/integration/cluster_harness.py start them. The constructor returns
// once Metadata lists all three (60 s at most), and throws bench_error
// otherwise.
class sluice_cluster {
 public:
  sluice_cluster(const sluice_cluster_options& o, const std::string& root, const std::string& etcd);
  ~sluice_cluster();
  sluice_cluster(const sluice_cluster&) = delete;
  sluice_cluster& operator=(const sluice_cluster&) = delete;

  // HOST:PORT of every broker, comma-separated.
  std::string bootstrap() const;
  std::vector<pid_t> pids() const;
  child_process& broker(int id) { return *brokers_[static_cast<size_t>(id - 1)]; }
  // Until broker `id` accepts connections (90 s at most; throws otherwise).
  void wait_listening(int id) const;
  // Until Metadata lists every broker; throws after `seconds`.
  void wait_all_registered(double seconds) const;
  // The node id leading `partition` of `topic` in a fresh Metadata answer;
  // -1 when none.
  int leader_of(const std::string& topic, int partition) const;
  // Bytes of `topic`'s segment files (*.log) in each broker's partition
  // directories (DATA/logs/TOPIC-N), by node id - 1: what each broker
  // stored of it, as leader or follower.
  std::vector<uint64_t> topic_log_bytes(const std::string& topic) const;

 private:
  std::vector<std::unique_ptr<child_process>> brokers_;
  std::vector<uint16_t> ports_;
  std::vector<std::string> data_dirs_;
};

}  // namespace sluice::bench
