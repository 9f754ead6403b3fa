#pragma once

// `sluice-bench share`: share groups (KIP-932) against a classic consumer
// group on the same broker (see README.md in this folder). Per run a fresh
// topic is filled, then read whole by a classic group and by a share group
// of the same size, each member a process of the librdkafka 2.15.1 test
// programs (tests/integration/group_consumer.cc and share_consumer.cc; this
// binary links Debian's librdkafka, which has no share consumer); then a
// share consumer holds records without acknowledging them and a second one
// times their redelivery after the lock runs out.

#include <cstdint>
#include <string>
#include <vector>

#include "kafka_util.h"

namespace sluice::bench {

struct share_options {
  broker_target broker;
  int partitions = 16;
  uint64_t records = 1'000'000;  // read by each group in each run
  size_t record_bytes = 1024;
  int consumers = 3;  // processes in each group
  // The programs; empty: the ones beside this binary.
  std::string share_consumer_path, group_consumer_path;
  // librdkafka properties (KEY=VALUE) of the classic and the share
  // consumers. librdkafka's fetch.queue.backoff.ms (1 s) stops a partition's
  // fetches whenever the consumer's queue is over its thresholds, which a
  // consumer reading a full topic is at once: the classic figure would be
  // those pauses, not the broker.
  std::vector<std::string> classic_config = {"fetch.queue.backoff.ms=10"};
  std::vector<std::string> share_config;
  // The held records' share.record.lock.duration.ms, a group config (15,000
  // to 60,000, Kafka's bounds); 0: no group config, the broker's
  // group.share.record.lock.duration.ms applies.
  int lock_ms = 15'000;
  int held_records = 100;  // records held, then redelivered, per run
  double timeout_seconds = 300;  // for each read of the whole topic
  int repeats = 3;
  bool json = false;
};

int run_share(const share_options& o);

}  // namespace sluice::bench
