// `sluice consume TOPIC`: prints messages, one per line, optionally with
// partition, offset, timestamp and key before the value.

#include <csignal>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/kafka_client.h"

namespace sluice::cli {
namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

struct consume_options {
  std::string bootstrap = default_bootstrap;
  std::string topic;
  std::string from = "end";  // beginning, end, or an offset
  int partition = -1;        // -1: every partition
  std::string group;         // empty: no group, partitions assigned directly
  int64_t count = -1;        // -1: no limit
  bool exit_at_end = false;
  bool print_key = false, print_partition = false, print_offset = false, print_timestamp = false;
  std::string separator = "\t";
  std::vector<std::string> properties;
};

result<int64_t> start_offset(const std::string& from) {
  if (from == "beginning") return int64_t{RD_KAFKA_OFFSET_BEGINNING};
  if (from == "end") return int64_t{RD_KAFKA_OFFSET_END};
  try {
    size_t used = 0;
    long long v = std::stoll(from, &used);
    if (used == from.size() && v >= 0) return int64_t{v};
  } catch (...) {
  }
  return error{errc::invalid_argument, "--from must be beginning, end or an offset, not '" + from + "'"};
}

void print_message(const consume_options& o, const rd_kafka_message_t* m) {
  std::string out;
  const std::string& s = o.separator;
  if (o.print_partition) out += std::to_string(m->partition) + s;
  if (o.print_offset) out += std::to_string(m->offset) + s;
  if (o.print_timestamp) {
    rd_kafka_timestamp_type_t tt;
    out += std::to_string(rd_kafka_message_timestamp(m, &tt)) + s;
  }
  if (o.print_key) out += (m->key ? std::string(static_cast<const char*>(m->key), m->key_len) : "") + s;
  if (m->payload) out.append(static_cast<const char*>(m->payload), m->len);
  out += '\n';
  std::fwrite(out.data(), 1, out.size(), stdout);
}

int run_consume(const consume_options& o) {
  auto off = start_offset(o.from);
  if (!off) {
    std::fprintf(stderr, "sluice consume: %s\n", off.err().message.c_str());
    return 2;
  }
  std::vector<std::pair<std::string, std::string>> props = {
      {"group.id", o.group.empty() ? "sluice-consume" : o.group},
      {"enable.partition.eof", o.exit_at_end ? "true" : "false"},
      {"enable.auto.commit", o.group.empty() ? "false" : "true"},
      {"auto.offset.reset", o.from == "beginning" ? "earliest" : "latest"},
  };
  for (const auto& p : o.properties) {
    auto kv = split_key_value(p);
    if (!kv) {
      std::fprintf(stderr, "sluice consume: %s\n", kv.err().message.c_str());
      return 2;
    }
    props.push_back(*kv);
  }
  auto conf = make_conf(o.bootstrap, props);
  if (!conf) {
    std::fprintf(stderr, "sluice consume: %s\n", conf.err().message.c_str());
    return 2;
  }
  auto rk = make_client(RD_KAFKA_CONSUMER, std::move(*conf));
  if (!rk) {
    std::fprintf(stderr, "sluice consume: %s\n", rk.err().message.c_str());
    return 2;
  }
  rd_kafka_poll_set_consumer(rk->get());

  int assigned = 0;
  if (o.group.empty()) {
    auto md = fetch_metadata(rk->get(), o.topic, std::chrono::seconds(30));
    if (!md || (*md)->topic_cnt != 1 || (*md)->topics[0].err) {
      std::fprintf(stderr, "sluice consume: topic %s not found\n", o.topic.c_str());
      return 1;
    }
    partition_list_ptr parts(rd_kafka_topic_partition_list_new(1));
    for (int i = 0; i < (*md)->topics[0].partition_cnt; ++i) {
      int id = (*md)->topics[0].partitions[i].id;
      if (o.partition >= 0 && id != o.partition) continue;
      rd_kafka_topic_partition_list_add(parts.get(), o.topic.c_str(), id)->offset = *off;
      ++assigned;
    }
    if (assigned == 0) {
      std::fprintf(stderr, "sluice consume: no partition %d in %s\n", o.partition, o.topic.c_str());
      return 1;
    }
    rd_kafka_assign(rk->get(), parts.get());
  } else {
    partition_list_ptr sub(rd_kafka_topic_partition_list_new(1));
    rd_kafka_topic_partition_list_add(sub.get(), o.topic.c_str(), RD_KAFKA_PARTITION_UA);
    rd_kafka_subscribe(rk->get(), sub.get());
  }

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  int64_t seen = 0;
  int at_end = 0;
  int rc = 0;
  while (!g_stop && (o.count < 0 || seen < o.count)) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk->get(), 200);
    if (!m) continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      if (o.exit_at_end && o.group.empty() && ++at_end >= assigned) g_stop = 1;
    } else if (m->err) {
      std::fprintf(stderr, "sluice consume: %s\n", rd_kafka_message_errstr(m));
      if (m->err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC || m->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
        rc = 1;
        g_stop = 1;
      }
    } else {
      print_message(o, m);
      ++seen;
    }
    rd_kafka_message_destroy(m);
  }
  std::fflush(stdout);
  rd_kafka_consumer_close(rk->get());
  return rc;
}

}  // namespace

void add_consume_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<consume_options>();
  CLI::App* c = app.add_subcommand("consume", "Print a topic's messages, one per line");
  c->add_option("topic", o->topic, "Topic name")->required();
  c->add_option("--bootstrap", o->bootstrap, "Broker address host:port")->capture_default_str();
  c->add_option("--from", o->from, "beginning, end, or an offset")->capture_default_str();
  c->add_option("--partition,-p", o->partition, "Only this partition (-1: all)")->capture_default_str();
  c->add_option("--group,-g", o->group, "Consume as a member of this group (commits offsets)");
  c->add_option("--count,-n", o->count, "Stop after N messages (-1: no limit)")->capture_default_str();
  c->add_flag("--exit-at-end,-e", o->exit_at_end, "Stop when every partition is read to its end");
  c->add_flag("--print-key", o->print_key, "Print the key before the value");
  c->add_flag("--print-partition", o->print_partition, "Print the partition");
  c->add_flag("--print-offset", o->print_offset, "Print the offset");
  c->add_flag("--print-timestamp", o->print_timestamp, "Print the timestamp (ms)");
  c->add_option("--separator", o->separator, "Between printed fields")->capture_default_str();
  c->add_option("-X", o->properties, "Any librdkafka property KEY=VALUE (repeatable)");
  c->callback([o, exit_code] { *exit_code = run_consume(*o); });
}

}  // namespace sluice::cli
