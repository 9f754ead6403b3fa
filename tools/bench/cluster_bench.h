#pragma once

// `sluice-bench cluster`: three Sluice brokers and a three-member etcd on
// this machine beside a three-server NATS JetStream cluster, one topic (one
// stream) replicated three ways (see README.md in this folder, issue 20).

#include <string>
#include <vector>

namespace sluice::bench {

struct cluster_options {
  std::string sluice_path;  // default: the sluice beside sluice-bench
  std::string etcd_path = "/usr/bin/etcd";
  std::string nats_path = "/usr/sbin/nats-server";
  std::string dir = "/tmp";              // parent of the temp directory of every server's data
  std::vector<std::string> broker_args;  // KEY=VALUE, passed as --KEY VALUE to every broker
  int partitions = 16;
  int replication_factor = 3;
  int min_insync_replicas = 2;
  size_t message_bytes = 1024;
  double seconds = 10;            // per throughput and latency phase
  double rate = 20'000;           // msgs/s of the latency phases and of the leader kill
  int consumers = 0;              // catch-up consumers; 0: one per core, at most one per partition
  int session_timeout_ms = 4000;  // sluice.etcd.session.timeout.ms of the brokers
  double failover_timeout = 60;   // seconds the leader kill waits for acks to resume
  bool leader_kill = true;
  bool jetstream = true;  // false: Sluice only (--no-jetstream), for quicker before/after runs
  int js_max_pending = 4096;  // asynchronous JetStream publishes in flight
  int repeats = 1;
  bool json = false;
};

int run_cluster(const cluster_options& o);

// `sluice-bench restart`: the same three brokers over etcd, many empty
// partitions, and how long the cluster takes to create them, to take a
// restarted broker back into every ISR, and to move leaders off a killed one
// (issue 31, item 9).
struct restart_options {
  std::string sluice_path;
  std::string etcd_path = "/usr/bin/etcd";
  std::string dir = "/tmp";
  std::vector<std::string> broker_args;
  int partitions = 5000;            // over all topics
  int partitions_per_topic = 5000;  // topics: ceil(partitions / this)
  int session_timeout_ms = 6000;    // sluice.etcd.session.timeout.ms
  double timeout = 300;             // seconds any one phase may take
  bool json = false;
  std::string keep_logs;  // a directory the brokers' logs are copied to at the end
};

int run_restart(const restart_options& o);

}  // namespace sluice::bench
