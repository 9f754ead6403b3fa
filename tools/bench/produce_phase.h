#pragma once

// One timed produce phase with librdkafka, as the OpenMessaging Benchmark's
// Kafka driver runs it: one producer, fixed or unlimited rate, publish latency
// from the produce() call to its delivery report. Every mode's producers are
// this one: the measured ones of `broker` and `maintenance`, and the data
// sources of `group` and `maintenance`.
//
// Each message carries its send time (steady clock, nanoseconds) in its first
// 8 bytes, so a consumer can measure end-to-end latency.

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sys/types.h>

namespace sluice::bench {

struct produce_spec {
  std::string bootstrap;
  std::string topic;
  std::string acks = "all";
  std::vector<std::string> props;  // KEY=VALUE librdkafka overrides
  double rate = 0;                 // messages per second; 0 = as fast as possible
  double seconds = 10;
  uint64_t max_messages = 0;    // stop after this many (0 = no limit; `seconds` still applies)
  size_t message_bytes = 1024;  // at least 8 (the send time)
  int key_count = 0;            // 0: no keys; else keys "key-0".."key-(n-1)" in turn
  // 0: librdkafka's partitioner; else message i goes to partition i % n, so
  // every partition gets messages at an even pace.
  int round_robin_partitions = 0;
  const std::atomic<bool>* stop = nullptr;  // ends the phase early when it turns true
  pid_t broker_pid = 0;                     // for the broker's CPU; 0 = not measured
  // More brokers (a cluster's) whose CPU is summed with broker_pid's into
  // broker_cores; broker_pid 0 with these alone is fine.
  std::vector<pid_t> more_broker_pids;
  // Called for each delivery report on librdkafka's poller thread, under the
  // phase's lock: the partition, when the message was sent and acknowledged
  // (steady clock, ns), and whether it was stored. Keep it short.
  std::function<void(int32_t partition, int64_t sent_ns, int64_t ack_ns, bool ok)> on_ack;
};

struct produce_stats {
  uint64_t acked = 0, failed = 0;
  std::string first_error;
  double msgs_per_s = 0, bytes_per_s = 0;  // acknowledged, to the last acknowledgement
  std::vector<double> publish_ms;          // sorted
  double broker_cores = -1, client_cores = -1;
  // The brokers' CPU seconds (utime + stime) from the start of the phase to
  // the end of its flush; -1 when not measured.
  double broker_cpu_seconds = -1;
  double schedule_lag_max_ms = 0;  // fixed rate: how far the sender fell behind its schedule
};

// Produces to `spec.topic` for `spec.seconds` (or `max_messages`), then flushes (60 s at most).
// Throws bench_error when the client cannot be made or produce() fails for
// another reason than a full queue.
produce_stats produce_phase(const produce_spec& spec);

// produce_phase on a thread of its own from construction. finish() waits for
// the phase to end and returns its figures or rethrows its error; destruction
// ends it early and waits.
class background_produce {
 public:
  explicit background_produce(produce_spec spec);
  ~background_produce();
  background_produce(const background_produce&) = delete;
  background_produce& operator=(const background_produce&) = delete;
  produce_stats finish();

 private:
  std::atomic<bool> stop_{false};
  produce_stats stats_;
  std::exception_ptr error_;
  std::thread thread_;
};

// How many of a topic's `partitions` take a producer's messages at once, so
// how many logs' syncs a message waits among (the group-commit floor's file
// count): all of them with keys, or when `producer_props` (KEY=VALUE) sets
// sticky.partitioning.linger.ms=0; else one, since librdkafka's partitioner
// sends messages without a key to one partition for that linger (10 ms).
inline int partitions_taking_messages(int partitions, bool keys,
                                      const std::vector<std::string>& producer_props) {
  if (keys) return partitions;
  constexpr std::string_view sticky = "sticky.partitioning.linger.ms=";
  for (const auto& p : producer_props)
    if (p.starts_with(sticky) && std::strtol(p.c_str() + sticky.size(), nullptr, 10) == 0)
      return partitions;
  return 1;
}

}  // namespace sluice::bench
