// `sluice produce TOPIC`: one message per line of standard input.

#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/kafka_client.h"

namespace sluice::cli {
namespace {

struct produce_options {
  std::string bootstrap = default_bootstrap;
  std::string topic;
  std::string key_separator;  // empty: lines carry no key
  std::string acks = "all";
  std::string compression = "none";
  int partition = -1;  // -1: the client's partitioner (by key hash)
  bool idempotence = false;
  std::vector<std::string> properties;
};

struct delivery_counts {
  std::atomic<int64_t> ok{0};
  std::atomic<int64_t> failed{0};
};

void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  auto* c = static_cast<delivery_counts*>(opaque);
  if (m->err) {
    if (c->failed++ < 10) std::fprintf(stderr, "sluice produce: delivery failed: %s\n", rd_kafka_err2str(m->err));
  } else {
    ++c->ok;
  }
}

int run_produce(const produce_options& o) {
  std::vector<std::pair<std::string, std::string>> props = {
      {"acks", o.acks},
      {"compression.codec", o.compression},
      {"enable.idempotence", o.idempotence ? "true" : "false"},
  };
  for (const auto& p : o.properties) {
    auto kv = split_key_value(p);
    if (!kv) {
      std::fprintf(stderr, "sluice produce: %s\n", kv.err().message.c_str());
      return 2;
    }
    props.push_back(*kv);
  }
  auto conf = make_conf(o.bootstrap, props);
  if (!conf) {
    std::fprintf(stderr, "sluice produce: %s\n", conf.err().message.c_str());
    return 2;
  }
  delivery_counts counts;
  rd_kafka_conf_set_dr_msg_cb(conf->get(), on_delivery);
  rd_kafka_conf_set_opaque(conf->get(), &counts);
  auto rk = make_client(RD_KAFKA_PRODUCER, std::move(*conf));
  if (!rk) {
    std::fprintf(stderr, "sluice produce: %s\n", rk.err().message.c_str());
    return 2;
  }
  int64_t sent = 0;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::string key, value = line;
    bool has_key = false;
    if (!o.key_separator.empty()) {
      auto at = line.find(o.key_separator);
      if (at != std::string::npos) {
        key = line.substr(0, at);
        value = line.substr(at + o.key_separator.size());
        has_key = true;
      }
    }
    for (;;) {
      rd_kafka_resp_err_t err = rd_kafka_producev(
          rk->get(), RD_KAFKA_V_TOPIC(o.topic.c_str()), RD_KAFKA_V_PARTITION(o.partition),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
          RD_KAFKA_V_KEY(has_key ? key.data() : nullptr, has_key ? key.size() : 0),
          RD_KAFKA_V_VALUE(value.data(), value.size()), RD_KAFKA_V_END);
      if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(rk->get(), 100);
        continue;
      }
      if (err) {
        std::fprintf(stderr, "sluice produce: %s\n", rd_kafka_err2str(err));
        return 1;
      }
      break;
    }
    ++sent;
    rd_kafka_poll(rk->get(), 0);
  }
  rd_kafka_flush(rk->get(), 60000);
  int64_t pending = rd_kafka_outq_len(rk->get());
  std::fprintf(stderr, "sluice produce: %lld sent, %lld acknowledged, %lld failed\n",
               static_cast<long long>(sent), static_cast<long long>(counts.ok.load()),
               static_cast<long long>(counts.failed.load() + pending));
  return (counts.failed.load() == 0 && pending == 0) ? 0 : 1;
}

}  // namespace

void add_produce_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<produce_options>();
  CLI::App* c = app.add_subcommand("produce", "Produce standard input's lines to a topic, one message each");
  c->add_option("topic", o->topic, "Topic name")->required();
  c->add_option("--bootstrap", o->bootstrap, "Broker address host:port")->capture_default_str();
  c->add_option("--key-separator,-K", o->key_separator,
                "Split each line at the first SEP into key and value");
  c->add_option("--acks", o->acks, "0, 1 or all")->check(CLI::IsMember({"0", "1", "-1", "all"}))->capture_default_str();
  c->add_option("--compression,-z", o->compression, "none, gzip, snappy, lz4 or zstd")
      ->check(CLI::IsMember({"none", "gzip", "snappy", "lz4", "zstd"}))
      ->capture_default_str();
  c->add_option("--partition,-p", o->partition, "Partition (-1: by key hash)")->capture_default_str();
  c->add_flag("--idempotence", o->idempotence, "Use an idempotent producer");
  c->add_option("-X", o->properties, "Any librdkafka property KEY=VALUE (repeatable)");
  c->callback([o, exit_code] { *exit_code = run_produce(*o); });
}

}  // namespace sluice::cli
