// group_consumer: librdkafka 2.15.1's ordinary consumer in a consumer group,
// for tests of the KIP-848 consumer protocol (--group-protocol consumer, the
// default here) and, for comparison, of the classic one. The share consumer
// of the same library is share_consumer.cc.
//
// Output (stdout, JSON lines, see json_lines.h):
//   a record: {"topic":T,"partition":P,"offset":O,"key":K,"value":V}
//     With --compact: {"topic":T,"partition":P,"offset":O}, and record
//     lines are flushed in bunches, when 10 ms have passed since the last
//     flush or a poll returns nothing, not one by one (for a benchmark whose
//     consumers read hundreds of thousands a second).
//   an error: {"error":MESSAGE,"code":N,"name":NAME,"source":S,"fatal":B}
//     S is consume (a message error; it also carries topic and partition),
//     error_cb, create, subscribe, assign or close.
//   events: {"event":"subscribed","group":G,"protocol":"classic"|"consumer"},
//     {"event":"assigned"|"revoked","partitions":[{"topic":T,"partition":P},..]}
//     at each rebalance, {"event":"closing","reason":R,"records":N} and
//     {"event":"closed"}.
// Offsets are committed automatically (enable.auto.commit) and at close.
// Exit status: 0 after a clean close (SIGTERM/SIGINT, --idle-exit-ms,
// --max-records), 1 after a fatal error, 2 for bad arguments.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <librdkafka/rdkafka.h>

#include "json_lines.h"

static_assert(RD_KAFKA_VERSION >= 0x020f0100, "group_consumer needs librdkafka >= 2.15.1");

namespace {

using json_lines::json_line;
using json_lines::print_and_destroy;
using json_lines::print_error;

volatile std::sig_atomic_t stop_signal = 0;

void on_stop_signal(int) {
  stop_signal = 1;
}

bool fatal_seen = false;

void on_error(rd_kafka_t* rk, int err, const char* reason, void*) {
  auto code = static_cast<rd_kafka_resp_err_t>(err);
  if (code == RD_KAFKA_RESP_ERR__FATAL) {
    char why[512];
    code = rd_kafka_fatal_error(rk, why, sizeof why);
    print_error("error_cb", code, why, true);
    fatal_seen = true;
    return;
  }
  print_error("error_cb", code, reason);
}

std::string partitions_json(const rd_kafka_topic_partition_list_t* parts) {
  std::string out = "[";
  for (int i = 0; parts && i < parts->cnt; ++i) {
    if (i) out += ',';
    out += "{\"topic\":\"";
    sluice::append_json_escaped(out, parts->elems[i].topic);
    out += "\",\"partition\":" + std::to_string(parts->elems[i].partition) + "}";
  }
  return out + "]";
}

// Applies each rebalance as the protocol in use wants it (incremental for
// KIP-848 and cooperative-sticky, eager otherwise) and prints it.
void on_rebalance(rd_kafka_t* rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t* parts,
                  void*) {
  const bool assigned = err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS;
  json_line()
      .str("event", assigned ? "assigned" : "revoked")
      .raw("partitions", partitions_json(parts))
      .line();
  const bool incremental = std::strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
  rd_kafka_error_t* error = nullptr;
  if (incremental) {
    error = assigned ? rd_kafka_incremental_assign(rk, parts)
                     : rd_kafka_incremental_unassign(rk, parts);
  } else if (rd_kafka_resp_err_t e = rd_kafka_assign(rk, assigned ? parts : nullptr)) {
    print_error("assign", e, rd_kafka_err2str(e));
  }
  if (error) print_and_destroy("assign", error);
}

struct options {
  std::string bootstrap;
  std::string group;
  std::vector<std::string> topics;
  std::string protocol = "consumer";
  long long max_records = 0;
  long long idle_exit_ms = 0;
  int poll_ms = 100;
  bool compact = false;  // record lines without key and value, flushed in bunches
  std::vector<std::string> config;
  std::string debug;
};

bool set_config(rd_kafka_conf_t* conf, const std::string& key, const std::string& value) {
  char errstr[512];
  if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), errstr, sizeof errstr) !=
      RD_KAFKA_CONF_OK) {
    std::fprintf(stderr, "group_consumer: %s=%s: %s\n", key.c_str(), value.c_str(), errstr);
    return false;
  }
  return true;
}

int run(const options& o) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  bool ok = set_config(conf, "bootstrap.servers", o.bootstrap) &&
            set_config(conf, "group.id", o.group) &&
            set_config(conf, "group.protocol", o.protocol) &&
            set_config(conf, "auto.offset.reset", "earliest");
  for (const auto& kv : o.config) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "group_consumer: --config wants key=value, not '%s'\n", kv.c_str());
      ok = false;
      break;
    }
    ok = ok && set_config(conf, kv.substr(0, eq), kv.substr(eq + 1));
  }
  if (ok && !o.debug.empty()) ok = set_config(conf, "debug", o.debug);
  if (!ok) {
    rd_kafka_conf_destroy(conf);
    return 2;
  }
  rd_kafka_conf_set_error_cb(conf, on_error);
  rd_kafka_conf_set_rebalance_cb(conf, on_rebalance);

  char errstr[512];
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
  if (rk == nullptr) {
    rd_kafka_conf_destroy(conf);
    print_error("create", RD_KAFKA_RESP_ERR__INVALID_ARG, errstr, true);
    return 1;
  }
  rd_kafka_poll_set_consumer(rk);

  rd_kafka_topic_partition_list_t* topics =
      rd_kafka_topic_partition_list_new(static_cast<int>(o.topics.size()));
  for (const auto& t : o.topics)
    rd_kafka_topic_partition_list_add(topics, t.c_str(), RD_KAFKA_PARTITION_UA);
  rd_kafka_resp_err_t sub_err = rd_kafka_subscribe(rk, topics);
  rd_kafka_topic_partition_list_destroy(topics);

  int status = 0;
  const char* reason = "signal";
  long long handled = 0;
  if (sub_err) {
    print_error("subscribe", sub_err, rd_kafka_err2str(sub_err), true);
    status = 1;
    reason = "fatal";
  } else {
    json_line().str("event", "subscribed").str("group", o.group).str("protocol", o.protocol).line();
  }

  using clock = std::chrono::steady_clock;
  auto last_record = clock::now();
  auto last_flush = clock::now();
  constexpr auto kFlushEvery = std::chrono::milliseconds(10);  // --compact
  while (status == 0 && !stop_signal) {
    if (fatal_seen) {
      status = 1;
      reason = "fatal";
      break;
    }
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, o.poll_ms);
    const bool polled_one = m != nullptr;
    if (polled_one) {
      const char* topic = m->rkt ? rd_kafka_topic_name(m->rkt) : "";
      if (m->err) {
        json_line()
            .str("error", rd_kafka_message_errstr(m))
            .num("code", m->err)
            .str("name", rd_kafka_err2name(m->err))
            .str("source", "consume")
            .boolean("fatal", false)
            .str("topic", topic)
            .num("partition", m->partition)
            .line();
      } else {
        json_line line;
        line.str("topic", topic).num("partition", m->partition).num("offset", m->offset);
        if (!o.compact) {
          line.bytes_or_null("key", m->key, m->key_len).bytes_or_null("value", m->payload, m->len);
        }
        line.line(!o.compact);
        ++handled;
        last_record = clock::now();
      }
      rd_kafka_message_destroy(m);
    }
    if (o.compact && (!polled_one || clock::now() - last_flush >= kFlushEvery)) {
      std::fflush(stdout);
      last_flush = clock::now();
    }
    if (o.max_records > 0 && handled >= o.max_records) {
      reason = "max-records";
      break;
    }
    if (o.idle_exit_ms > 0 &&
        clock::now() - last_record >= std::chrono::milliseconds(o.idle_exit_ms)) {
      reason = "idle";
      break;
    }
  }
  if (status == 0 && fatal_seen) {
    status = 1;
    reason = "fatal";
  }

  json_line().str("event", "closing").str("reason", reason).num("records", handled).line();
  if (rd_kafka_resp_err_t err = rd_kafka_consumer_close(rk))
    print_error("close", err, rd_kafka_err2str(err));
  rd_kafka_destroy(rk);
  json_line().str("event", "closed").line();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"A consumer-group consumer printing JSON lines (librdkafka " +
               std::string(rd_kafka_version_str()) + ")"};
  app.add_option("--bootstrap", o.bootstrap, "bootstrap.servers")->required();
  app.add_option("--group", o.group, "consumer group id")->required();
  app.add_option("--topic", o.topics, "topic to subscribe to (repeatable)")->required();
  app.add_option("--group-protocol", o.protocol, "group.protocol (consumer: KIP-848)")
      ->check(CLI::IsMember({"classic", "consumer"}));
  app.add_option("--max-records", o.max_records, "stop after N records")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--idle-exit-ms", o.idle_exit_ms, "stop after this long without a record")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--poll-ms", o.poll_ms, "rd_kafka_consumer_poll timeout")
      ->check(CLI::PositiveNumber);
  app.add_option("--config", o.config, "librdkafka property key=value (repeatable)");
  app.add_option("--debug", o.debug, "librdkafka debug contexts (logs go to stderr)");
  app.add_flag("--compact", o.compact,
               "record lines without key and value, flushed in bunches (for benchmarks)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (o.compact) std::setvbuf(stdout, nullptr, _IOFBF, 1 << 16);

  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  return run(o);
}
