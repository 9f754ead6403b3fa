#pragma once

// `sluice-bench txn`: transactional produce against the idempotent
// producer's rate on the same topic layout, EndTxn latency, and
// read_committed against read_uncommitted catch-up reads of the same
// transactional data; on the three-broker cluster of `cluster` (etcd of
// three) or on one broker (see README.md in this folder, issue 33).

#include <string>
#include <vector>

namespace sluice::bench {

struct txn_options {
  bool single_node = false;  // one `sluice serve` without etcd instead of the cluster
  std::string sluice_path;   // default: the sluice beside sluice-bench
  std::string etcd_path = "/usr/bin/etcd";
  std::string dir = "/tmp";              // parent of the temp directory of every server's data
  std::vector<std::string> broker_args;  // KEY=VALUE, passed as --KEY VALUE to every broker
  int session_timeout_ms = 4000;         // sluice.etcd.session.timeout.ms of the brokers
  int partitions = 16;
  // Of the topics; 0: 3 on the cluster, 1 on one broker. min.insync.replicas
  // likewise: 0 is 2 on the cluster, 1 on one broker.
  int replication_factor = 0;
  int min_insync_replicas = 0;
  size_t message_bytes = 1024;
  int messages_per_txn = 100;
  int producers = 0;    // producers of each phase; 0: one per core
  double seconds = 10;  // per produce phase
  int read_pairs = 5;   // read_uncommitted/read_committed catch-up read pairs per run
  int repeats = 1;
  bool json = false;
};

int run_txn(const txn_options& o);

}  // namespace sluice::bench
