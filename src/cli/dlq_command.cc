// `sluice dlq list|replay GROUP`: a share group's dead letters (KIP-1191,
// docs/share_groups.md "Dead-letter topic").
//
// The dead-letter topic is the group's config
// errors.deadletterqueue.topic.name (DescribeConfigs of the GROUP resource,
// as a raw request: librdkafka 2.0.2 knows no GROUP resources), or the one
// --dlq-topic names. Both commands read it from each partition's log start
// offset (or --from) to its high watermark as it was when they started (or
// --to): a librdkafka consumer with assign(), no group membership, nothing
// committed, read_uncommitted so an open transaction in the topic cannot
// hold the end back. A dead letter is a record whose __dlq.errors.group.id
// header names GROUP (one topic may serve several groups); --topic keeps
// those of one source topic. --from and --to are offsets of the dead-letter
// topic, inclusive, in each of its partitions.
//
//   list    one line per dead letter, in each dead-letter partition's order:
//             DLQTOPIC-P@OFFSET  source=TOPIC-P@OFFSET  delivery_count=N
//             reason=R  timestamp_ms=T  [key=K]  [value=V]
//           (tab-separated; key and value only when the dead letter holds
//           them, i.e. with errors.deadletterqueue.copy.record.enable; text
//           escaped as inside a JSON string), or with --json one object per
//           line: {"dlq_topic", "dlq_partition", "dlq_offset", "timestamp_ms",
//           "topic", "partition", "offset", "group", "delivery_count",
//           "reason", "key", "value"} (key and value null when absent).
//   replay  produces each dead letter back to its source topic and
//           partition (an idempotent producer, so acks=all): the key and
//           value the dead letter holds, or, when it holds neither, those of
//           the record still at that offset of the source partition. A record
//           retention or compaction has removed since is named on stderr and
//           left out; the others are replayed. Only key and value go back
//           (the dead letter keeps none of the original's headers, so neither
//           path replays them); the timestamp is the time of the replay.
//           Prints per dead letter
//             replayed  DLQTOPIC-P@OFFSET  to=TOPIC-P@NEWOFFSET
//               source=TOPIC-P@OFFSET  key_value=dead_letter|source
//           ("would replay ... to=TOPIC-P" with --dry-run, which reads the
//           source records too but produces nothing), then
//             summary  selected=N  replayed=N  failed=N.
//           Replaying twice produces twice: --from and --to choose what to
//           resume with.
//
// Exit status: 0 done (with replay: every selected dead letter replayed),
// 1 a request failed, a record of the group was not a well-formed dead
// letter, or (replay) a dead letter could not be replayed: each is named on
// stderr; 2 bad usage.

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "base/clock.h"
#include "base/json_text.h"
#include "cli/commands.h"
#include "cli/kafka_client.h"
#include "cli/raw_requests.h"

namespace sluice::cli {
namespace {

constexpr const char* dead_letter_topic_key = "errors.deadletterqueue.topic.name";

struct dlq_options {
  std::string bootstrap = default_bootstrap;
  int timeout_ms = default_timeout_ms;
  std::string group;
  std::string dlq_topic;  // --dlq-topic; empty: the group's config
  std::string topic;      // --topic: only dead letters of this source topic
  std::optional<int64_t> from, to;  // offsets of the dead-letter topic, inclusive
  bool json = false;      // list --json
  bool dry_run = false;   // replay --dry-run
};

int fail(const std::string& what) {
  std::fprintf(stderr, "sluice dlq: %s\n", what.c_str());
  return 1;
}

std::chrono::milliseconds timeout(const dlq_options& o) { return std::chrono::milliseconds(o.timeout_ms); }

// One dead letter, as the share partition's leader writes it.
struct dead_letter {
  int32_t dlq_partition = 0;
  int64_t dlq_offset = 0;
  int64_t timestamp_ms = -1;
  std::string topic;  // the source
  int32_t partition = -1;
  int64_t offset = -1;
  std::string group;
  int32_t delivery_count = 0;
  std::string reason;  // "rejected" or "delivery_count_exhausted"
  std::optional<std::string> key, value;  // copied from the source record
};

std::string tp(const std::string& topic, int32_t partition) { return topic + "-" + std::to_string(partition); }

std::string at(const std::string& topic, int32_t partition, int64_t offset) {
  return tp(topic, partition) + "@" + std::to_string(offset);
}

// The topic --dlq-topic names, else the group's errors.deadletterqueue.topic.name.
result<std::string> dead_letter_topic(const dlq_options& o) {
  if (!o.dlq_topic.empty()) return o.dlq_topic;
  SLUICE_ASSIGN_OR_RETURN(auto conn, protocol::raw_connection::connect_any(o.bootstrap, timeout(o)));
  SLUICE_ASSIGN_OR_RETURN(auto configs, describe_group_configs(conn, o.group, false));
  for (const auto& e : configs.configs) {
    if (e.name == dead_letter_topic_key && e.value && !e.value->empty()) return *e.value;
  }
  return error{errc::not_found, "group " + o.group + " names no dead-letter topic (its config " +
                                    std::string(dead_letter_topic_key) + " is not set); give --dlq-topic"};
}

std::optional<std::string> bytes(const void* p, size_t n) {
  if (!p) return std::nullopt;
  return std::string(static_cast<const char*>(p), n);
}

// The record `m` of the dead-letter topic as a dead letter of `group`;
// nullopt when it is none of the group's (no group header, or another
// group's); errc::corrupt_data when the group's record lacks a header the
// broker writes or holds one that is not a number where a number belongs.
result<std::optional<dead_letter>> parse(const rd_kafka_message_t* m, const std::string& group) {
  rd_kafka_headers_t* headers = nullptr;
  const std::optional<dead_letter> none;
  if (rd_kafka_message_headers(m, &headers) != RD_KAFKA_RESP_ERR_NO_ERROR) return none;
  auto header = [&](const char* name) -> std::optional<std::string> {
    const void* v = nullptr;
    size_t n = 0;
    if (rd_kafka_header_get_last(headers, name, &v, &n) != RD_KAFKA_RESP_ERR_NO_ERROR) return std::nullopt;
    return bytes(v ? v : "", n);
  };
  auto g = header("__dlq.errors.group.id");
  if (!g || *g != group) return none;
  dead_letter d;
  d.dlq_partition = m->partition;
  d.dlq_offset = m->offset;
  d.timestamp_ms = rd_kafka_message_timestamp(m, nullptr);
  d.group = *g;
  auto broken = [&](const std::string& why) {
    return error{errc::corrupt_data,
                 at(rd_kafka_topic_name(m->rkt), m->partition, m->offset) + " is not a well-formed dead letter: " + why};
  };
  auto number = [&](const char* name, auto& out) -> status {
    auto v = header(name);
    if (!v) return broken("no header " + std::string(name));
    auto [end, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
    if (ec != std::errc() || end != v->data() + v->size()) return broken(std::string(name) + " is '" + *v + "'");
    return {};
  };
  auto topic = header("__dlq.errors.topic");
  auto reason = header("__dlq.errors.reason");
  if (!topic) return broken("no header __dlq.errors.topic");
  if (!reason) return broken("no header __dlq.errors.reason");
  d.topic = *topic;
  d.reason = *reason;
  SLUICE_TRY(number("__dlq.errors.partition", d.partition));
  SLUICE_TRY(number("__dlq.errors.offset", d.offset));
  SLUICE_TRY(number("__dlq.errors.delivery.count", d.delivery_count));
  d.key = bytes(m->key, m->key_len);
  d.value = bytes(m->payload, m->len);
  return std::optional<dead_letter>(std::move(d));
}

// A consumer for assign() alone: no group membership, nothing committed,
// every record up to the high watermark (read_uncommitted), an end of
// partition reported; `offset_reset` is its auto.offset.reset.
result<client_ptr> make_reader(const dlq_options& o, const char* offset_reset) {
  SLUICE_ASSIGN_OR_RETURN(auto conf, make_conf(o.bootstrap, {{"group.id", "sluice-dlq"},
                                                             {"enable.auto.commit", "false"},
                                                             {"enable.auto.offset.store", "false"},
                                                             {"enable.partition.eof", "true"},
                                                             {"isolation.level", "read_uncommitted"},
                                                             {"auto.offset.reset", offset_reset}}));
  SLUICE_ASSIGN_OR_RETURN(auto rk, make_client(RD_KAFKA_CONSUMER, std::move(conf)));
  rd_kafka_poll_set_consumer(rk.get());
  return rk;
}

// Reads `topic` as the header comment says and calls `each` with every
// dead letter of the group --topic selects, in each partition's order.
// Returns how many of the group's records were not well-formed dead
// letters (each named on stderr), or why the topic could not be read to
// its end (no progress for --timeout-ms is a failure).
result<int64_t> read_dead_letters(const dlq_options& o, const std::string& topic,
                                  const std::function<void(dead_letter&&)>& each) {
  SLUICE_ASSIGN_OR_RETURN(auto rk, make_reader(o, "earliest"));
  SLUICE_ASSIGN_OR_RETURN(auto md, fetch_metadata(rk.get(), topic, timeout(o)));
  if (md->topic_cnt != 1 || md->topics[0].err)
    return error{errc::not_found, "the dead-letter topic " + topic + ": " +
                                      rd_kafka_err2str(md->topic_cnt ? md->topics[0].err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)};
  // Per partition still to read, the first offset not to read.
  std::map<int32_t, int64_t> end;
  partition_list_ptr assignment(rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt));
  for (int i = 0; i < md->topics[0].partition_cnt; ++i) {
    const int32_t p = md->topics[0].partitions[i].id;
    int64_t lo = 0, hi = 0;
    if (auto e = rd_kafka_query_watermark_offsets(rk.get(), topic.c_str(), p, &lo, &hi, o.timeout_ms))
      return error{errc::unavailable, "the watermarks of " + tp(topic, p) + ": " + rd_kafka_err2str(e)};
    const int64_t start = std::max(lo, o.from.value_or(0));
    const int64_t stop = o.to ? std::min(hi, *o.to + 1) : hi;
    if (start >= stop) continue;
    rd_kafka_topic_partition_list_add(assignment.get(), topic.c_str(), p)->offset = start;
    end[p] = stop;
  }
  if (end.empty()) return int64_t{0};
  if (auto e = rd_kafka_assign(rk.get(), assignment.get()))
    return error{errc::invalid_argument, "assigning " + topic + ": " + rd_kafka_err2str(e)};
  int64_t malformed = 0;
  sluice::deadline progress(o.timeout_ms, sluice::clock::system());
  while (!end.empty()) {
    if (progress.passed())
      return error{errc::unavailable, "reading " + topic + ": nothing came for " + std::to_string(o.timeout_ms) + " ms"};
    std::unique_ptr<rd_kafka_message_t, void (*)(rd_kafka_message_t*)> m(rd_kafka_consumer_poll(rk.get(), 100),
                                                                         rd_kafka_message_destroy);
    if (!m) continue;
    progress = sluice::deadline(o.timeout_ms, sluice::clock::system());
    if (m->err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC || m->err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION ||
        m->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
      return error{errc::not_found, "reading " + topic + ": " + rd_kafka_message_errstr(m.get())};
    auto it = end.find(m->partition);
    if (it == end.end()) continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      end.erase(it);
      continue;
    }
    if (m->err) continue;  // librdkafka tries again by itself; `progress` bounds it
    if (m->offset >= it->second) {
      end.erase(it);
      continue;
    }
    auto d = parse(m.get(), o.group);
    if (!d) {
      ++malformed;
      std::fprintf(stderr, "sluice dlq: %s\n", d.err().message.c_str());
    } else if (*d && (o.topic.empty() || (*d)->topic == o.topic)) {
      each(std::move(**d));
    }
    if (m->offset + 1 >= it->second) end.erase(it);
  }
  rd_kafka_consumer_close(rk.get());
  return malformed;
}

// ---- list ---------------------------------------------------------------------------

std::string escaped(std::string_view s) {
  std::string out;
  append_json_escaped(out, s);
  return out;
}

std::string json_text(const std::optional<std::string>& s) { return s ? "\"" + escaped(*s) + "\"" : "null"; }

void print_dead_letter(const dlq_options& o, const std::string& topic, const dead_letter& d) {
  std::string line;
  if (o.json) {
    line = "{\"dlq_topic\":" + json_text(topic) + ",\"dlq_partition\":" + std::to_string(d.dlq_partition) +
           ",\"dlq_offset\":" + std::to_string(d.dlq_offset) + ",\"timestamp_ms\":" + std::to_string(d.timestamp_ms) +
           ",\"topic\":" + json_text(d.topic) + ",\"partition\":" + std::to_string(d.partition) +
           ",\"offset\":" + std::to_string(d.offset) + ",\"group\":" + json_text(d.group) +
           ",\"delivery_count\":" + std::to_string(d.delivery_count) + ",\"reason\":" + json_text(d.reason) +
           ",\"key\":" + json_text(d.key) + ",\"value\":" + json_text(d.value) + "}\n";
  } else {
    line = escaped(at(topic, d.dlq_partition, d.dlq_offset)) + "\tsource=" + escaped(at(d.topic, d.partition, d.offset)) +
           "\tdelivery_count=" + std::to_string(d.delivery_count) + "\treason=" + escaped(d.reason) +
           "\ttimestamp_ms=" + std::to_string(d.timestamp_ms);
    if (d.key) line += "\tkey=" + escaped(*d.key);
    if (d.value) line += "\tvalue=" + escaped(*d.value);
    line += "\n";
  }
  std::fwrite(line.data(), 1, line.size(), stdout);
}

int run_list(const dlq_options& o) {
  auto topic = dead_letter_topic(o);
  if (!topic) return fail(topic.err().message);
  auto malformed = read_dead_letters(o, *topic, [&](dead_letter&& d) { print_dead_letter(o, *topic, d); });
  std::fflush(stdout);
  if (!malformed) return fail(malformed.err().message);
  return *malformed == 0 ? 0 : 1;
}

// ---- replay -------------------------------------------------------------------------

struct record_body {
  std::optional<std::string> key, value;
};

// Reads single records of source partitions at given offsets, for dead
// letters that hold no copy of their record. One consumer, made on first
// use, assigned to one partition at a time.
class source_reader {
 public:
  explicit source_reader(const dlq_options& o) : o_(o) {}

  // The key and value of the record at `offset` of `topic`-`partition`;
  // errc::not_found when the partition holds no record there any more
  // (below its log start offset, or compacted away).
  result<record_body> read(const std::string& topic, int32_t partition, int64_t offset) {
    if (!rk_) {
      SLUICE_ASSIGN_OR_RETURN(rk_, make_reader(o_, "error"));
    }
    const std::string where = tp(topic, partition);
    int64_t lo = 0, hi = 0;
    if (auto e = rd_kafka_query_watermark_offsets(rk_.get(), topic.c_str(), partition, &lo, &hi, o_.timeout_ms))
      return error{errc::unavailable, "the watermarks of " + where + ": " + rd_kafka_err2str(e)};
    if (offset < lo)
      return error{errc::not_found, "the record is gone from " + where + ": its log starts at " + std::to_string(lo) + " now"};
    if (offset >= hi)
      return error{errc::not_found, where + " has no offset " + std::to_string(offset) + " (its high watermark is " +
                                        std::to_string(hi) + ")"};
    partition_list_ptr one(rd_kafka_topic_partition_list_new(1));
    rd_kafka_topic_partition_list_add(one.get(), topic.c_str(), partition)->offset = offset;
    if (auto e = rd_kafka_assign(rk_.get(), one.get()))
      return error{errc::invalid_argument, "assigning " + where + ": " + rd_kafka_err2str(e)};
    const sluice::deadline until(o_.timeout_ms, sluice::clock::system());
    const std::string gone = "the record is gone from " + where + " (compacted away, or a transaction marker)";
    while (!until.passed()) {
      std::unique_ptr<rd_kafka_message_t, void (*)(rd_kafka_message_t*)> m(rd_kafka_consumer_poll(rk_.get(), 100),
                                                                           rd_kafka_message_destroy);
      if (!m || m->partition != partition || topic != rd_kafka_topic_name(m->rkt)) continue;
      if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) return error{errc::not_found, gone};
      if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET || m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE)
        return error{errc::not_found, "the record is gone from " + where + " (retention)"};
      if (m->err) return error{errc::unavailable, "reading " + where + ": " + rd_kafka_message_errstr(m.get())};
      if (m->offset < offset) continue;
      if (m->offset > offset) return error{errc::not_found, gone};
      return record_body{bytes(m->key, m->key_len), bytes(m->payload, m->len)};
    }
    return error{errc::unavailable, "reading " + at(topic, partition, offset) + ": nothing came for " +
                                        std::to_string(o_.timeout_ms) + " ms"};
  }

 private:
  const dlq_options& o_;
  client_ptr rk_;
};

struct replay_counts {
  int64_t selected = 0, replayed = 0, failed = 0;
};

// What a replayed record's delivery report needs (the message's opaque,
// owned by it until the report).
struct replay_label {
  std::string dead_letter;  // DLQTOPIC-P@OFFSET
  std::string source;       // TOPIC-P@OFFSET
  const char* key_value;    // "dead_letter" or "source"
};

void not_replayed(replay_counts& c, const std::string& dead_letter, const std::string& source, const std::string& why) {
  ++c.failed;
  std::fprintf(stderr, "sluice dlq: %s (source %s): not replayed: %s\n", dead_letter.c_str(), source.c_str(), why.c_str());
}

void on_replayed(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
  auto* counts = static_cast<replay_counts*>(opaque);
  std::unique_ptr<replay_label> label(static_cast<replay_label*>(m->_private));
  if (m->err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT)
    return not_replayed(*counts, label->dead_letter, label->source,
                        "no answer in time; it may have been written all the same");
  if (m->err) return not_replayed(*counts, label->dead_letter, label->source, rd_kafka_err2str(m->err));
  ++counts->replayed;
  std::printf("replayed\t%s\tto=%s\tsource=%s\tkey_value=%s\n", label->dead_letter.c_str(),
              at(rd_kafka_topic_name(m->rkt), m->partition, m->offset).c_str(), label->source.c_str(), label->key_value);
}

int run_replay(const dlq_options& o) {
  auto topic = dead_letter_topic(o);
  if (!topic) return fail(topic.err().message);
  replay_counts counts;
  auto conf = make_conf(o.bootstrap, {{"enable.idempotence", "true"},
                                      {"acks", "all"},
                                      {"message.timeout.ms", std::to_string(o.timeout_ms)}});
  if (!conf) return fail(conf.err().message);
  rd_kafka_conf_set_dr_msg_cb(conf->get(), on_replayed);
  rd_kafka_conf_set_opaque(conf->get(), &counts);
  auto producer = make_client(RD_KAFKA_PRODUCER, std::move(*conf));
  if (!producer) return fail(producer.err().message);
  rd_kafka_t* rk = producer->get();
  source_reader sources(o);
  std::map<std::string, int> partitions;  // of each source topic; 0 when it does not exist

  auto replay = [&](dead_letter&& d) {
    ++counts.selected;
    const std::string dead = at(*topic, d.dlq_partition, d.dlq_offset);
    const std::string source = at(d.topic, d.partition, d.offset);
    auto known = partitions.find(d.topic);
    if (known == partitions.end()) {
      auto md = fetch_metadata(rk, d.topic, timeout(o));
      const bool exists = md && (*md)->topic_cnt == 1 && !(*md)->topics[0].err;
      known = partitions.emplace(d.topic, exists ? (*md)->topics[0].partition_cnt : 0).first;
    }
    if (d.partition < 0 || d.partition >= known->second)
      return not_replayed(counts, dead, source, known->second ? "the topic has no such partition" : "no topic " + d.topic);
    record_body body{d.key, d.value};
    const char* key_value = "dead_letter";
    if (!d.key && !d.value) {
      auto r = sources.read(d.topic, d.partition, d.offset);
      if (!r) return not_replayed(counts, dead, source, r.err().message);
      body = std::move(*r);
      key_value = "source";
    }
    if (o.dry_run) {
      std::printf("would replay\t%s\tto=%s\tsource=%s\tkey_value=%s\n", dead.c_str(), tp(d.topic, d.partition).c_str(),
                  source.c_str(), key_value);
      return;
    }
    auto label = std::make_unique<replay_label>(replay_label{dead, source, key_value});
    // Null stays null (a null value is a tombstone, not an empty value).
    char* key = body.key ? body.key->data() : nullptr;
    char* value = body.value ? body.value->data() : nullptr;
    const size_t key_len = body.key ? body.key->size() : 0;
    const size_t value_len = body.value ? body.value->size() : 0;
    for (;;) {
      auto e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(d.topic.c_str()), RD_KAFKA_V_PARTITION(d.partition),
                                 RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(key, key_len),
                                 RD_KAFKA_V_VALUE(value, value_len), RD_KAFKA_V_OPAQUE(label.get()), RD_KAFKA_V_END);
      if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(rk, 100);
        continue;
      }
      if (e) return not_replayed(counts, dead, source, rd_kafka_err2str(e));
      label.release();  // the delivery report owns it now
      break;
    }
    rd_kafka_poll(rk, 0);
  };
  auto malformed = read_dead_letters(o, *topic, replay);
  if (rd_kafka_flush(rk, o.timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    // What is left is reported as not replayed (or, if it was in flight,
    // not confirmed) by its delivery report.
    rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_flush(rk, o.timeout_ms);
  }
  std::printf("summary\tselected=%lld\treplayed=%lld\tfailed=%lld%s\n", static_cast<long long>(counts.selected),
              static_cast<long long>(counts.replayed), static_cast<long long>(counts.failed),
              o.dry_run ? "\tdry_run" : "");
  std::fflush(stdout);
  if (!malformed) return fail(malformed.err().message);
  return *malformed == 0 && counts.failed == 0 ? 0 : 1;
}

}  // namespace

void add_dlq_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<dlq_options>();
  CLI::App* cmd = app.add_subcommand("dlq", "A share group's dead letters: list them, replay them to their source topics");
  cmd->require_subcommand(1);
  auto common = [&](CLI::App* c) {
    c->add_option("group", o->group, "The share group")->required();
    c->add_option("--bootstrap,-b", o->bootstrap, "Broker addresses host:port[,host:port...]")->capture_default_str();
    c->add_option("--timeout-ms", o->timeout_ms, "How long to wait for the brokers")->capture_default_str();
    c->add_option("--dlq-topic", o->dlq_topic, "Read this topic instead of the group's " + std::string(dead_letter_topic_key));
    c->add_option("--topic,-t", o->topic, "Only dead letters of records of this topic");
    c->add_option("--from", o->from, "Only from this offset of the dead-letter topic on")->check(CLI::NonNegativeNumber);
    c->add_option("--to", o->to, "Only up to this offset of the dead-letter topic (inclusive)")
        ->check(CLI::NonNegativeNumber);
  };
  auto checked = [o, exit_code](int (*run)(const dlq_options&)) {
    return [o, exit_code, run] {
      if (o->from && o->to && *o->from > *o->to) {
        std::fprintf(stderr, "sluice dlq: --from %lld is after --to %lld\n", static_cast<long long>(*o->from),
                     static_cast<long long>(*o->to));
        *exit_code = 2;
        return;
      }
      *exit_code = run(*o);
    };
  };
  CLI::App* list = cmd->add_subcommand("list", "The group's dead letters: where each came from, its delivery count "
                                               "and why it was archived");
  common(list);
  list->add_flag("--json", o->json, "One JSON object per line");
  list->callback(checked(run_list));
  CLI::App* replay = cmd->add_subcommand("replay", "Produce the group's dead letters back to their source topics");
  common(replay);
  replay->add_flag("--dry-run", o->dry_run, "Say what would be replayed; produce nothing");
  replay->callback(checked(run_replay));
}

}  // namespace sluice::cli
