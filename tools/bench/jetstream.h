#pragma once

// The NATS JetStream side of `sluice-bench cluster`: three nats-server
// processes clustered on loopback, one stream of `replicas` replicas on file
// storage, published to with the NATS C client's asynchronous JetStream
// publish (many in flight), each message timed from the publish call to its
// acknowledgement.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

namespace sluice::bench {

class child_process;

struct js_publish_stats {
  uint64_t acked = 0, failed = 0;
  std::string first_error;
  double msgs_per_s = 0;           // acknowledged, to the last acknowledgement
  std::vector<double> publish_ms;  // sorted
  double server_cpu_seconds = -1;  // the servers' utime + stime over the phase
  double schedule_lag_max_ms = 0;  // fixed rate: how far the sender fell behind
};

class jetstream_cluster {
 public:
  // Starts `servers` nats-server processes (`binary`) clustered on free
  // loopback ports with their stores under `root`, and waits until each
  // listens. Throws bench_error when one does not start.
  jetstream_cluster(const std::string& binary, const std::string& root, int servers);
  ~jetstream_cluster();  // stops them (SIGTERM, by pid)
  jetstream_cluster(const jetstream_cluster&) = delete;
  jetstream_cluster& operator=(const jetstream_cluster&) = delete;

  std::vector<pid_t> pids() const;
  std::string urls() const;  // nats://127.0.0.1:p1,nats://...

  // A stream `name` on subject `name` with `replicas` replicas and file
  // storage, created afresh (waits, 30 s at most, for JetStream's
  // leader), then `seconds` (or until `stop`) of asynchronous publishes of
  // `message_bytes` at `rate` msgs/s (0: as fast as `max_pending` in
  // flight allow), then waits for every acknowledgement and deletes the
  // stream.
  js_publish_stats publish_phase(const std::string& name, int replicas, double rate, double seconds,
                                 size_t message_bytes, int max_pending,
                                 const std::atomic<bool>* stop);

 private:
  std::vector<std::unique_ptr<child_process>> servers_;
  std::vector<uint16_t> ports_;
};

}  // namespace sluice::bench
