#pragma once

// `sluice-bench broker`: drives a broker with librdkafka the way the
// OpenMessaging Benchmark's Kafka driver does (see README.md in this folder).

#include <string>
#include <vector>

#include "kafka_util.h"

namespace sluice::bench {

inline constexpr int max_catch_up_consumers = 64;

struct broker_options {
  broker_target broker;
  int partitions = 16;
  bool keys = false;
  double rate = 0;      // messages per second; 0 = as fast as possible
  double seconds = 10;  // produce phase length per run
  int repeats = 3;      // measured runs, each alternated with the raw limits
  size_t message_bytes = 1024;
  std::string acks = "all";
  std::vector<std::string> producer_props;  // KEY=VALUE librdkafka overrides
  std::vector<std::string> consumer_props;
  // Catch-up consumers sharing the topic's partitions, each its own client
  // (OMB's consumers per subscription); 0: one per core, at most one per
  // partition. librdkafka fetches for all of a client's partitions on one
  // broker from one thread, one fetch at a time, so one consumer cannot use
  // more than that thread. With more than one, the read is done once more
  // by one consumer alone, and both figures are reported.
  int consumers = 0;
  uint64_t raw_sync_mib = 16384;  // cap of a raw fdatasync measurement (it runs `seconds`)
  double tcp_seconds = 1.5;     // per raw loopback TCP measurement
  bool json = false;
};

int run_broker(const broker_options& o);

}  // namespace sluice::bench
