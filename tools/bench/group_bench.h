#pragma once

// `sluice-bench group`: consumer groups of librdkafka members in this
// process against a broker (see README.md in this folder): how long a group
// takes to form and to rebalance when a member joins or leaves, eager and
// cooperative, how long consumption pauses meanwhile, and the consume
// throughput and commit latency of a group against one consumer.

#include <string>
#include <vector>

#include "kafka_util.h"

namespace sluice::bench {

struct group_options {
  broker_target broker;
  int members = 10;  // members of the rebalance phases (one more joins)
  int partitions = 100;
  std::vector<std::string> protocols = {"eager", "cooperative"};
  double rate = 20'000;         // msgs/s produced while the rebalance phases run
  int throughput_members = 3;   // against one consumer
  uint64_t messages = 300'000;  // read by each throughput run
  size_t message_bytes = 100;
  int commit_every = 1000;  // messages a member consumes between synchronous commits
  int session_timeout_ms = 10'000;
  int repeats = 3;
  double tcp_seconds = 1.5;  // per raw loopback TCP measurement
  bool json = false;
};

int run_group(const group_options& o);

}  // namespace sluice::bench
