#pragma once

// Consumers that read a topic with librdkafka, each its own client (so its
// own fetch thread), as the OpenMessaging Benchmark's Kafka driver does: the
// tailing consumer of `broker` and the catch-up readers of `broker` and
// `cluster`.

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include <sys/types.h>

namespace sluice::bench {

struct consume_result {
  uint64_t messages = 0;
  uint64_t first_batch = 0;  // messages in the first non-empty poll
  int64_t started_ns = 0;    // partitions assigned
  int64_t first_ns = 0, last_ns = 0;
  std::vector<double> e2e_ms;  // only for the tailing consumer
  std::string error;
};

// Messages per second: from the first poll that returned messages (so
// connecting and the first fetch's round trip, which a steady consumer does
// not pay, are left out), or from the assignment when everything came in one
// poll.
double consume_rate(const consume_result& c);

// The partitions one consumer reads: `count` of them from `first`.
struct partition_range {
  int first = 0, count = 0;
};

// Reads the partitions `parts` of `topic` from the beginning until
// `expected` messages arrived (checked after `producing` turns false) or
// `deadline_ns`. Consumers that share the topic's partitions share
// `together`, the messages all of them got, and each stops once it reaches
// `expected`; a lone consumer passes null. Sets `ready` once it has assigned
// the partitions and polled once. `props` (KEY=VALUE) override the
// consumer's librdkafka settings, e.g. isolation.level (librdkafka's
// default is read_committed).
void consume(const std::string& bootstrap, const std::string& topic, partition_range parts_to_read,
             bool record_e2e, const std::atomic<bool>& producing,
             const std::atomic<uint64_t>& expected, int64_t deadline_ns, consume_result& out,
             std::atomic<uint64_t>* together = nullptr, std::atomic<bool>* ready = nullptr,
             const std::vector<std::string>& props = {});

// Consumer `i` of `n` sharing `partitions`: a range, the first ones one
// partition longer when they do not divide evenly.
partition_range share_of(int partitions, int n, int i);

// Consumers that read one topic together, as one: their messages summed, from the earliest first
// poll (with its batch, which consume_rate leaves out) to the latest last message.
consume_result merged(const std::vector<consume_result>& all);

struct catch_up_result {
  double msgs = 0;  // per second
  // Cores busy (-1: not measured): the brokers together, the whole client
  // process, and its busiest thread.
  double broker_cpu = -1, client_cpu = -1, client_thread_max = -1;
};

// Reads the whole topic, `expected_msgs` messages, from the beginning with
// `consumers` consumers sharing its partitions in ranges, each its own
// client, so its own fetch thread. `broker_pids`: the brokers whose CPU is
// summed (none measured when one of them is 0 or gone). `props`: as consume's.
catch_up_result catch_up(const std::string& bootstrap, const std::string& topic, int partitions,
                         int consumers, uint64_t expected_msgs,
                         const std::vector<pid_t>& broker_pids,
                         const std::vector<std::string>& props = {});

}  // namespace sluice::bench
