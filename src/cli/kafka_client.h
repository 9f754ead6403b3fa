#pragma once

// Small RAII helpers over librdkafka's C API for the command-line tools
// (`sluice topic|produce|consume|group`). The tools are ordinary Kafka
// clients: they talk to any broker through --bootstrap, Sluice or not.

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"

namespace sluice::cli {

struct rk_deleter {
  void operator()(rd_kafka_t* p) const { rd_kafka_destroy(p); }
  void operator()(rd_kafka_conf_t* p) const { rd_kafka_conf_destroy(p); }
  void operator()(rd_kafka_queue_t* p) const { rd_kafka_queue_destroy(p); }
  void operator()(rd_kafka_event_t* p) const { rd_kafka_event_destroy(p); }
  void operator()(rd_kafka_AdminOptions_t* p) const { rd_kafka_AdminOptions_destroy(p); }
  void operator()(const rd_kafka_metadata_t* p) const { rd_kafka_metadata_destroy(p); }
  void operator()(rd_kafka_topic_partition_list_t* p) const {
    rd_kafka_topic_partition_list_destroy(p);
  }
};
using client_ptr = std::unique_ptr<rd_kafka_t, rk_deleter>;
using conf_ptr = std::unique_ptr<rd_kafka_conf_t, rk_deleter>;
using queue_ptr = std::unique_ptr<rd_kafka_queue_t, rk_deleter>;
using event_ptr = std::unique_ptr<rd_kafka_event_t, rk_deleter>;
using admin_options_ptr = std::unique_ptr<rd_kafka_AdminOptions_t, rk_deleter>;
using metadata_ptr = std::unique_ptr<const rd_kafka_metadata_t, rk_deleter>;
using partition_list_ptr = std::unique_ptr<rd_kafka_topic_partition_list_t, rk_deleter>;

// A client configuration: bootstrap servers plus KEY=VALUE properties.
// Fails with errc::invalid_config naming the property librdkafka refused.
result<conf_ptr> make_conf(const std::string& bootstrap,
                           const std::vector<std::pair<std::string, std::string>>& props = {});

// Creates a client of the given type from `conf` (ownership of conf passes
// to the client on success).
result<client_ptr> make_client(rd_kafka_type_t type, conf_ptr conf);

// Waits on `queue` for one admin result event of `type`, up to `timeout`.
result<event_ptr> wait_admin_result(rd_kafka_queue_t* queue, rd_kafka_event_type_t type,
                                    std::chrono::milliseconds timeout);

// Admin options with the request and operation timeouts set.
admin_options_ptr admin_options(rd_kafka_t* rk, rd_kafka_admin_op_t op,
                                std::chrono::milliseconds timeout);

// Cluster metadata for one topic or, when `topic` is empty, for all topics.
result<metadata_ptr> fetch_metadata(rd_kafka_t* rk, const std::string& topic,
                                    std::chrono::milliseconds timeout);

// Splits "KEY=VALUE"; fails naming the argument when there is no '='.
result<std::pair<std::string, std::string>> split_key_value(const std::string& arg);

}  // namespace sluice::cli
