// share_consumer: a command-line KIP-932 share consumer for the integration
// tests, built on librdkafka 2.15.1's share consumer C API (the build links it
// statically; see tests/integration/CMakeLists.txt). share_client.py runs it.
//
// Output contract (stdout, one JSON object per line, flushed after each line,
// so a reader sees every line as soon as it is written):
//   a record handled:
//     {"topic":T,"partition":P,"offset":O,"delivery_count":D,"key":K,"value":V}
//     K and V are UTF-8 text (invalid bytes become U+FFFD) or null.
//     With --compact: {"topic":T,"partition":P,"offset":O,"delivery_count":D}.
//   an error (from a poll, a record, a commit, librdkafka's error callback):
//     {"error":MESSAGE,"code":N,"name":NAME,"source":S,"fatal":B,...}
//     N is librdkafka's rd_kafka_resp_err_t (negative: raised by the client,
//     positive: a Kafka error code); NAME its rd_kafka_err2name();
//     S one of poll, record, error_cb, commit_sync, commit_async, close.
//     A record-level error also carries topic, partition and offset.
//   an acknowledgement-commit outcome, one line per partition:
//     {"commit":HOW,"topic":T,"partition":P,"code":N,"name":NAME[,"offsets":[..]]}
//     HOW is "callback" (the acknowledgement-commit callback: acknowledgements
//     sent with a poll, commit_async or close) or "sync" (commit_sync's result).
//     With --compact a callback line has no "offsets".
//   --compact (for a benchmark whose consumers hand over hundreds of
//   thousands of records a second): besides the shorter lines above, record
//   and callback lines are flushed together after each poll (and before a
//   --process-ms wait or a --poison exit), not one by one.
//   lifecycle: {"event":"subscribed","group":G,"topics":[..]} once subscribed,
//     {"event":"closing","reason":R,"records":N} and {"event":"closed"} at the
//     end; R is signal, idle, max-records or fatal.
//
// Exit status: 0 after a clean close (SIGTERM/SIGINT, --idle-exit-ms,
// --max-records), 1 after a fatal error or when the consumer cannot be made,
// 2 for bad arguments, 3 when a --poison record arrives: the program then
// prints the record and leaves at once, acknowledging nothing and closing
// nothing, as a consumer that crashes on it would.

#include <chrono>
#include <thread>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include "json_lines.h"

// The Debian librdkafka (2.0.2) installs a header of the same name; this
// program needs the share consumer API of the one the build made.
static_assert(RD_KAFKA_VERSION >= 0x020f0100, "share_consumer needs librdkafka >= 2.15.1");

namespace {

using sluice::append_json_escaped;
using json_lines::json_line;
using json_lines::print_and_destroy;
using json_lines::print_error;

volatile std::sig_atomic_t stop_signal = 0;

void on_stop_signal(int) {
  stop_signal = 1;
}

// ---- librdkafka callbacks (all run on the polling thread) -----------------

bool fatal_seen = false;
bool compact_output = false;  // --compact

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

void on_ack_commit(rd_kafka_share_t*, rd_kafka_share_partition_offsets_list_t* partitions,
                   rd_kafka_resp_err_t err, void*) {
  size_t count = rd_kafka_share_partition_offsets_list_count(partitions);
  for (size_t i = 0; i < count; ++i) {
    const auto* entry = rd_kafka_share_partition_offsets_list_get(partitions, i);
    const rd_kafka_topic_partition_t* tp = rd_kafka_share_partition_offsets_partition(entry);
    rd_kafka_resp_err_t code = err != RD_KAFKA_RESP_ERR_NO_ERROR ? err : tp->err;
    json_line line;
    line.str("commit", "callback")
        .str("topic", tp->topic)
        .num("partition", tp->partition)
        .num("code", code)
        .str("name", rd_kafka_err2name(code));
    if (!compact_output) {
      std::string offsets = "[";
      const int64_t* off = rd_kafka_share_partition_offsets_offsets(entry);
      size_t n = rd_kafka_share_partition_offsets_offsets_cnt(entry);
      for (size_t k = 0; k < n; ++k) {
        if (k) offsets += ',';
        offsets += std::to_string(off[k]);
      }
      offsets += ']';
      line.raw("offsets", offsets);
    }
    line.line(!compact_output);
  }
}

// ---- the program ----------------------------------------------------------

struct options {
  std::string bootstrap;
  std::string group;
  std::vector<std::string> topics;
  long long max_records = 0;   // 0: no limit
  long long idle_exit_ms = 0;  // 0: never
  std::string ack = "accept";
  std::optional<std::string> poison;
  std::string mode = "implicit";
  std::string commit = "poll";
  int process_ms = 0;  // time spent on each record before it is acknowledged
  bool compact = false;  // shorter record and callback lines, flushed per poll
  int commit_timeout_ms = 10000;
  int poll_ms = 100;
  std::vector<std::string> config;
  std::string debug;
};

rd_kafka_share_AcknowledgeType_t ack_type(const std::string& name) {
  if (name == "release") return RD_KAFKA_SHARE_ACKNOWLEDGE_TYPE_RELEASE;
  if (name == "reject") return RD_KAFKA_SHARE_ACKNOWLEDGE_TYPE_REJECT;
  return RD_KAFKA_SHARE_ACKNOWLEDGE_TYPE_ACCEPT;
}

// commit_sync and its per-partition results; returns false on a fatal error.
bool commit_sync(rd_kafka_share_t* share, int timeout_ms) {
  rd_kafka_topic_partition_list_t* results = nullptr;
  if (rd_kafka_error_t* error = rd_kafka_share_commit_sync(share, timeout_ms, &results)) {
    return !print_and_destroy("commit_sync", error);
  }
  if (results == nullptr) return true;
  for (int i = 0; i < results->cnt; ++i) {
    const auto& tp = results->elems[i];
    json_line()
        .str("commit", "sync")
        .str("topic", tp.topic)
        .num("partition", tp.partition)
        .num("code", tp.err)
        .str("name", rd_kafka_err2name(tp.err))
        .line();
  }
  rd_kafka_topic_partition_list_destroy(results);
  return true;
}

bool set_config(rd_kafka_conf_t* conf, const std::string& key, const std::string& value) {
  char errstr[512];
  if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), errstr, sizeof errstr) !=
      RD_KAFKA_CONF_OK) {
    std::fprintf(stderr, "share_consumer: --config %s=%s: %s\n", key.c_str(), value.c_str(),
                 errstr);
    return false;
  }
  return true;
}

int run(const options& o) {
  const bool explicit_mode = o.mode == "explicit";
  const rd_kafka_share_AcknowledgeType_t ack = ack_type(o.ack);

  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  bool ok = set_config(conf, "bootstrap.servers", o.bootstrap) &&
            set_config(conf, "group.id", o.group) &&
            set_config(conf, "share.acknowledgement.mode", o.mode);
  bool max_poll_records_set = false;
  for (const auto& kv : o.config) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) {
      std::fprintf(stderr, "share_consumer: --config wants key=value, not '%s'\n", kv.c_str());
      ok = false;
      break;
    }
    ok = ok && set_config(conf, kv.substr(0, eq), kv.substr(eq + 1));
    max_poll_records_set |= kv.substr(0, eq) == "max.poll.records";
  }
  // A soft bound in librdkafka, but it keeps a --max-records run from
  // acquiring many records it will only release again.
  if (ok && o.max_records > 0 && !max_poll_records_set)
    ok = set_config(conf, "max.poll.records", std::to_string(o.max_records));
  if (ok && !o.debug.empty()) ok = set_config(conf, "debug", o.debug);
  if (!ok) {
    rd_kafka_conf_destroy(conf);
    return 2;
  }
  rd_kafka_conf_set_error_cb(conf, on_error);

  char errstr[512];
  rd_kafka_share_t* share = rd_kafka_share_consumer_new(conf, errstr, sizeof errstr);
  if (share == nullptr) {
    rd_kafka_conf_destroy(conf);
    print_error("create", RD_KAFKA_RESP_ERR__INVALID_ARG, errstr, true);
    return 1;
  }
  if (rd_kafka_error_t* error =
          rd_kafka_share_set_acknowledgement_commit_cb(share, on_ack_commit, nullptr)) {
    print_and_destroy("create", error);
  }

  rd_kafka_topic_partition_list_t* topics =
      rd_kafka_topic_partition_list_new(static_cast<int>(o.topics.size()));
  std::string topics_json = "[";
  for (const auto& t : o.topics) {
    rd_kafka_topic_partition_list_add(topics, t.c_str(), RD_KAFKA_PARTITION_UA);
    if (topics_json.size() > 1) topics_json += ',';
    topics_json += '"';
    append_json_escaped(topics_json, t);
    topics_json += '"';
  }
  topics_json += ']';
  rd_kafka_resp_err_t sub_err = rd_kafka_share_subscribe(share, topics);
  rd_kafka_topic_partition_list_destroy(topics);
  int status = 0;
  const char* reason = "signal";
  long long handled = 0;
  if (sub_err != RD_KAFKA_RESP_ERR_NO_ERROR) {
    print_error("subscribe", sub_err, rd_kafka_err2str(sub_err), true);
    status = 1;
    reason = "fatal";
  } else {
    json_line().str("event", "subscribed").str("group", o.group).raw("topics", topics_json).line();
  }

  using clock = std::chrono::steady_clock;
  auto last_record = clock::now();
  while (status == 0 && !stop_signal) {
    if (fatal_seen) {
      status = 1;
      reason = "fatal";
      break;
    }
    rd_kafka_messages_t* batch = nullptr;
    if (rd_kafka_error_t* error = rd_kafka_share_poll(share, o.poll_ms, &batch)) {
      if (print_and_destroy("poll", error)) {
        status = 1;
        reason = "fatal";
        break;
      }
    }
    size_t count = batch ? rd_kafka_messages_count(batch) : 0;
    bool limit_reached = false;
    for (size_t i = 0; i < count; ++i) {
      rd_kafka_message_t* m = rd_kafka_messages_get(batch, i);
      const char* topic = m->rkt ? rd_kafka_topic_name(m->rkt) : "";
      if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        // librdkafka has already chosen the acknowledgement of a record-level
        // error (REJECT for a corrupt batch, RELEASE for a decompression failure).
        json_line()
            .str("error", rd_kafka_message_errstr(m))
            .num("code", m->err)
            .str("name", rd_kafka_err2name(m->err))
            .str("source", "record")
            .boolean("fatal", false)
            .str("topic", topic)
            .num("partition", m->partition)
            .num("offset", m->offset)
            .line();
        continue;
      }
      if (limit_reached) {
        // Over --max-records in explicit mode: hand it back untouched, so it
        // is redelivered instead of lost (implicit mode handles the batch).
        rd_kafka_share_acknowledge_type(share, m, RD_KAFKA_SHARE_ACKNOWLEDGE_TYPE_RELEASE);
        continue;
      }
      json_line line;
      line.str("topic", topic)
          .num("partition", m->partition)
          .num("offset", m->offset)
          .num("delivery_count", rd_kafka_message_delivery_count(m));
      if (!o.compact) {
        line.bytes_or_null("key", m->key, m->key_len).bytes_or_null("value", m->payload, m->len);
      }
      line.line(!o.compact);
      if (o.poison && m->payload &&
          std::string_view(static_cast<const char*>(m->payload), m->len) == *o.poison) {
        std::fflush(stdout);
        _exit(3);  // no acknowledgement, no close: a crash, as far as the broker can tell
      }
      if (o.process_ms > 0) {
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::milliseconds(o.process_ms));
      }
      if (explicit_mode) {
        rd_kafka_resp_err_t err = rd_kafka_share_acknowledge_type(share, m, ack);
        if (err) print_error("acknowledge", err, rd_kafka_err2str(err));
      }
      ++handled;
      if (o.max_records > 0 && handled >= o.max_records && explicit_mode) limit_reached = true;
    }
    rd_kafka_messages_destroy(batch);
    if (count > 0) last_record = clock::now();
    if (o.compact) std::fflush(stdout);

    if (count > 0 && o.commit == "sync") {
      if (!commit_sync(share, o.commit_timeout_ms)) {
        status = 1;
        reason = "fatal";
        break;
      }
    } else if (count > 0 && o.commit == "async") {
      if (rd_kafka_error_t* error = rd_kafka_share_commit_async(share)) {
        if (print_and_destroy("commit_async", error)) {
          status = 1;
          reason = "fatal";
          break;
        }
      }
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
  // Acknowledgements not yet sent go now, with their outcome printed; close
  // would send them too, but silently. After a fatal error the handle
  // refuses both, so only destroy is left.
  if (status == 0) commit_sync(share, o.commit_timeout_ms);
  if (rd_kafka_error_t* error = rd_kafka_share_consumer_close(share)) {
    print_and_destroy("close", error);
  }
  if (rd_kafka_error_t* error = rd_kafka_share_destroy(share)) {
    print_and_destroy("close", error);
  }
  json_line().str("event", "closed").line();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  CLI::App app{"A KIP-932 share consumer printing JSON lines (librdkafka " +
               std::string(rd_kafka_version_str()) + ")"};
  app.add_option("--bootstrap", o.bootstrap, "bootstrap.servers")->required();
  app.add_option("--group", o.group, "share group id")->required();
  app.add_option("--topic", o.topics, "topic to subscribe to (repeatable)")->required();
  app.add_option("--max-records", o.max_records,
                 "stop after N records handled (implicit mode: after the batch that reaches N)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--idle-exit-ms", o.idle_exit_ms, "stop after this long without a record")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--ack", o.ack, "acknowledgement of each record (explicit mode)")
      ->check(CLI::IsMember({"accept", "release", "reject"}));
  app.add_option("--poison", o.poison,
                 "exit at once with status 3, acknowledging nothing, on a record with this value");
  app.add_option("--mode", o.mode, "share.acknowledgement.mode")
      ->check(CLI::IsMember({"implicit", "explicit"}));
  app.add_option("--commit", o.commit,
                 "send acknowledgements with the next poll, or commit_sync/commit_async after "
                 "each batch")
      ->check(CLI::IsMember({"poll", "sync", "async"}));
  app.add_option("--commit-timeout-ms", o.commit_timeout_ms, "commit_sync timeout")
      ->check(CLI::PositiveNumber);
  app.add_option("--process-ms", o.process_ms,
                 "time spent on each record (after printing it, before acknowledging it): a slow consumer "
                 "holds its records that long")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--poll-ms", o.poll_ms,
                 "rd_kafka_share_poll timeout (bounds the reaction to SIGTERM)")
      ->check(CLI::PositiveNumber);
  app.add_option("--config", o.config, "librdkafka property key=value (repeatable)");
  app.add_option("--debug", o.debug, "librdkafka debug contexts (logs go to stderr)");
  app.add_flag("--compact", o.compact,
               "record lines without key and value, callback lines without offsets, flushed once "
               "per poll (for benchmarks)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  // Record lines go out in bunches: a buffer that holds a poll's worth.
  compact_output = o.compact;
  if (o.compact) std::setvbuf(stdout, nullptr, _IOFBF, 1 << 16);
  if (o.mode == "implicit" && o.ack != "accept") {
    std::fprintf(stderr, "share_consumer: --ack %s needs --mode explicit\n", o.ack.c_str());
    return 2;
  }

  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  return run(o);
}
