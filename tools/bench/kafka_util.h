#pragma once

// What the broker, group and maintenance benchmarks share: librdkafka
// handles with RAII, configuration helpers, topic administration, and the
// broker they measure (a `sluice serve` child with `--start`, or one already
// running).
//
// Errors are thrown as bench_error; nothing here is thread-safe unless said
// so.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <librdkafka/rdkafka.h>
#include <sys/types.h>

#include "report.h"

namespace sluice::bench {

struct rk_deleter {
  void operator()(rd_kafka_t* p) const { rd_kafka_destroy(p); }
  void operator()(rd_kafka_queue_t* p) const { rd_kafka_queue_destroy(p); }
  void operator()(rd_kafka_event_t* p) const { rd_kafka_event_destroy(p); }
  void operator()(rd_kafka_topic_partition_list_t* p) const {
    rd_kafka_topic_partition_list_destroy(p);
  }
};
using client_ptr = std::unique_ptr<rd_kafka_t, rk_deleter>;
using queue_ptr = std::unique_ptr<rd_kafka_queue_t, rk_deleter>;
using event_ptr = std::unique_ptr<rd_kafka_event_t, rk_deleter>;
using parts_ptr = std::unique_ptr<rd_kafka_topic_partition_list_t, rk_deleter>;

// Sets one property; on failure destroys `c` and throws.
void set(rd_kafka_conf_t* c, const std::string& k, const std::string& v);
// Sets "KEY=VALUE" properties; on failure destroys `c` and throws.
void set_all(rd_kafka_conf_t* c, const std::vector<std::string>& kvs);
// Creates a client owning `c`; on failure destroys `c` and throws.
client_ptr make_client(rd_kafka_type_t type, rd_kafka_conf_t* c);
// bootstrap.servers and a quiet log level.
rd_kafka_conf_t* base_conf(const std::string& bootstrap);

// A `sluice serve` child on a free loopback port with its own data directory
// under `parent_dir`, given `args` ("KEY=VALUE") as --KEY VALUE. An empty
// `binary` is the `sluice` beside this executable. The
// constructor returns once the port accepts connections (20 s at most).
// Stopped with SIGTERM (SIGKILL after 30 s) by its pid, and its directory
// removed, when destroyed.
class broker_process {
 public:
  broker_process(const std::string& binary, const std::string& parent_dir,
                 const std::vector<std::string>& args);
  ~broker_process();
  broker_process(const broker_process&) = delete;
  broker_process& operator=(const broker_process&) = delete;

  std::string bootstrap() const { return "127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  const std::string& data_dir() const { return data_; }

 private:
  std::string root_, data_;
  uint16_t port_ = 0;
  pid_t pid_ = 0;
};

// A loopback TCP port nothing listens on now (bind to port 0, then close).
uint16_t free_port();
// True if something accepts connections on 127.0.0.1:port.
bool port_open(uint16_t port);

// Which broker a mode measures: one it starts (`start`) or one running at
// `bootstrap`; the options every mode that talks to a broker takes.
struct broker_target {
  std::string bootstrap;                 // a running broker; empty with `start`
  bool start = false;                    // start `sluice serve` on a free loopback port
  std::string sluice_path;               // the binary for `start` (default: beside sluice-bench)
  std::vector<std::string> broker_args;  // KEY=VALUE, passed as --KEY VALUE with `start`
  pid_t broker_pid = 0;                  // for CPU and memory figures with `bootstrap`
  std::string dir = "/tmp";  // parent of the temp data directory; raw fsync figures measured here
};

// The broker being measured, started or attached to. `pid` is 0 when
// unknown (no CPU or memory figures then); `data_dir` is where the raw disk
// limits are measured.
struct broker_handle {
  std::unique_ptr<broker_process> process;  // null when attached
  std::string bootstrap;
  pid_t pid = 0;
  std::string data_dir;
};
// Throws bench_error unless exactly one of `start` and `bootstrap` is given,
// or when the broker does not start.
broker_handle open_broker(const broker_target& t);

// Waits (60 s at most) for an admin result event of `type` on `q`.
event_ptr admin_wait(rd_kafka_queue_t* q, rd_kafka_event_type_t type);
// Throws bench_error naming the first topic a CreateTopics result event
// (admin_wait's) refused, or the request's own error.
void check_create_topics(rd_kafka_event_t* ev);
using config_list = std::vector<std::pair<std::string, std::string>>;

// Creates the topic with `configs` and `replication_factor` replicas and
// waits until every partition has a leader.
void create_topic(const std::string& bootstrap, const std::string& topic, int partitions,
                  const config_list& configs = {}, int replication_factor = 1);
// Replaces the topic's configs with `configs` (AlterConfigs: what is not
// named returns to the broker's default). Throws on any error.
void alter_topic_configs(const std::string& bootstrap, const std::string& topic,
                         const config_list& configs);
// Best effort: a leftover topic only costs disk space.
void delete_topic(const std::string& bootstrap, const std::string& topic);
// A broker setting as DescribeConfigs gives it (the first broker of the
// metadata); empty when it cannot be read.
std::string broker_config_value(const std::string& bootstrap, const std::string& key);

}  // namespace sluice::bench
