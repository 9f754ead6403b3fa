#pragma once

// `sluice-bench broker`: drives a broker with librdkafka the way the
// OpenMessaging Benchmark's Kafka driver does (see README.md in this folder).

#include <string>
#include <vector>

#include "kafka_util.h"

namespace sluice::bench {

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
  uint64_t raw_sync_mib = 16384;  // cap of a raw fdatasync measurement (it runs `seconds`)
  double tcp_seconds = 1.5;       // per raw loopback TCP measurement
  bool json = false;
};

int run_broker(const broker_options& o);

}  // namespace sluice::bench
