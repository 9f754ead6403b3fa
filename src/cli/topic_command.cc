// `sluice topic create|list|describe|delete|add-partitions|alter`, through
// librdkafka's admin API. Raising a topic's partition count (add-partitions,
// or alter --partitions) first reads the newest record of each partition:
// when one has a key, it says what the change does to per-key order and
// asks for --yes (exit 1 without it).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/kafka_client.h"
#include "protocol/raw_client.h"

namespace sluice::cli {
namespace {

using protocol::elect_leaders_version;
using protocol::endpoint_of;
using protocol::kafka_error_name;
using protocol::metadata_version;
using protocol::raw_connection;

using namespace std::chrono_literals;

struct topic_options {
  std::string bootstrap = default_bootstrap;
  std::string topic;
  int partitions = -1;
  int replication_factor = -1;
  int total_partitions = 0;
  std::vector<std::string> configs;
  bool validate_only = false;
  bool under_replicated = false;
  bool yes = false;  // add partitions to a topic whose records carry keys
  int timeout_ms = default_timeout_ms;
};

int fail(const std::string& what) {
  std::fprintf(stderr, "sluice topic: %s\n", what.c_str());
  return 1;
}

result<client_ptr> admin_client(const topic_options& o) {
  SLUICE_ASSIGN_OR_RETURN(auto conf, make_conf(o.bootstrap));
  return make_client(RD_KAFKA_PRODUCER, std::move(conf));
}

// Prints each topic result; returns 1 if any failed.
int report_topic_results(const rd_kafka_topic_result_t** res, size_t n, const char* verb) {
  int rc = 0;
  for (size_t i = 0; i < n; ++i) {
    if (rd_kafka_topic_result_error(res[i]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::fprintf(stderr, "sluice topic: %s: %s (%s)\n", rd_kafka_topic_result_name(res[i]),
                   rd_kafka_err2name(rd_kafka_topic_result_error(res[i])),
                   rd_kafka_topic_result_error_string(res[i]));
      rc = 1;
    } else {
      std::printf("%s %s\n", verb, rd_kafka_topic_result_name(res[i]));
    }
  }
  return rc;
}

int run_create(const topic_options& o) {
  auto rk = admin_client(o);
  if (!rk) return fail(rk.err().message);
  char errstr[512];
  rd_kafka_NewTopic_t* nt = rd_kafka_NewTopic_new(o.topic.c_str(), o.partitions,
                                                  o.replication_factor, errstr, sizeof errstr);
  if (!nt) return fail(errstr);
  std::unique_ptr<rd_kafka_NewTopic_t, void (*)(rd_kafka_NewTopic_t*)> guard(nt, rd_kafka_NewTopic_destroy);
  for (const auto& c : o.configs) {
    auto kv = split_key_value(c);
    if (!kv) return fail(kv.err().message);
    rd_kafka_NewTopic_set_config(nt, kv->first.c_str(), kv->second.c_str());
  }
  queue_ptr q(rd_kafka_queue_new(rk->get()));
  auto opts = admin_options(rk->get(), RD_KAFKA_ADMIN_OP_CREATETOPICS, std::chrono::milliseconds(o.timeout_ms));
  if (o.validate_only) rd_kafka_AdminOptions_set_validate_only(opts.get(), 1, errstr, sizeof errstr);
  rd_kafka_CreateTopics(rk->get(), &nt, 1, opts.get(), q.get());
  auto ev = wait_admin_result(q.get(), RD_KAFKA_EVENT_CREATETOPICS_RESULT, std::chrono::milliseconds(o.timeout_ms + 5000));
  if (!ev) return fail(ev.err().message);
  size_t n = 0;
  auto res = rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev->get()), &n);
  return report_topic_results(res, n, o.validate_only ? "validated" : "created");
}

int run_delete(const topic_options& o) {
  auto rk = admin_client(o);
  if (!rk) return fail(rk.err().message);
  rd_kafka_DeleteTopic_t* dt = rd_kafka_DeleteTopic_new(o.topic.c_str());
  queue_ptr q(rd_kafka_queue_new(rk->get()));
  auto opts = admin_options(rk->get(), RD_KAFKA_ADMIN_OP_DELETETOPICS, std::chrono::milliseconds(o.timeout_ms));
  rd_kafka_DeleteTopics(rk->get(), &dt, 1, opts.get(), q.get());
  rd_kafka_DeleteTopic_destroy(dt);
  auto ev = wait_admin_result(q.get(), RD_KAFKA_EVENT_DELETETOPICS_RESULT, std::chrono::milliseconds(o.timeout_ms + 5000));
  if (!ev) return fail(ev.err().message);
  size_t n = 0;
  auto res = rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev->get()), &n);
  return report_topic_results(res, n, "deleted");
}

// A partition of `topic` whose newest record has a key (nullopt: none
// has): a topic whose records carry keys, so that adding partitions moves
// keys to other partitions. Reads the newest record of each partition with
// an assigned consumer (no group, nothing committed).
result<std::optional<int32_t>> keyed_partition(const topic_options& o, rd_kafka_t* admin) {
  SLUICE_ASSIGN_OR_RETURN(auto md, fetch_metadata(admin, o.topic, std::chrono::milliseconds(o.timeout_ms)));
  if (md->topic_cnt != 1 || md->topics[0].err != RD_KAFKA_RESP_ERR_NO_ERROR)
    return error{errc::not_found, o.topic + ": " + rd_kafka_err2name(md->topic_cnt ? md->topics[0].err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)};
  SLUICE_ASSIGN_OR_RETURN(auto conf, make_conf(o.bootstrap, {{"group.id", "sluice-topic-keys"},
                                                             {"enable.auto.commit", "false"},
                                                             {"enable.partition.eof", "true"}}));
  SLUICE_ASSIGN_OR_RETURN(auto c, make_client(RD_KAFKA_CONSUMER, std::move(conf)));
  partition_list_ptr assign(rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt));
  for (int i = 0; i < md->topics[0].partition_cnt; ++i) {
    const int32_t p = md->topics[0].partitions[i].id;
    int64_t lo = 0, hi = 0;
    if (rd_kafka_query_watermark_offsets(c.get(), o.topic.c_str(), p, &lo, &hi, o.timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR)
      return error{errc::unavailable, "the offsets of " + o.topic + "-" + std::to_string(p) + " are not known"};
    if (hi > lo) rd_kafka_topic_partition_list_add(assign.get(), o.topic.c_str(), p)->offset = hi - 1;
  }
  if (assign->cnt == 0) return std::optional<int32_t>{};
  if (auto e = rd_kafka_assign(c.get(), assign.get()); e != RD_KAFKA_RESP_ERR_NO_ERROR)
    return error{errc::unavailable, std::string("assign: ") + rd_kafka_err2str(e)};
  int left = assign->cnt;
  std::optional<int32_t> keyed;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(o.timeout_ms);
  while (left > 0 && !keyed && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(c.get(), 200);
    if (!m) continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      --left;
    } else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (m->key) keyed = m->partition;
      --left;  // the newest record of its partition: nothing after it counts
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(c.get());
  if (!keyed && left > 0) return error{errc::unavailable, "the newest records of " + o.topic + " were not read in time"};
  return keyed;
}

int run_add_partitions(const topic_options& o) {
  auto rk = admin_client(o);
  if (!rk) return fail(rk.err().message);
  if (!o.yes) {
    // The brief: adding partitions moves which partition each key maps
    // to, which breaks per-key order for a while.
    auto keyed = keyed_partition(o, rk->get());
    if (!keyed) return fail(keyed.err().message);
    if (*keyed) {
      std::fprintf(stderr,
                   "sluice topic: %s carries keyed records (partition %d): with %d partitions the default partitioner "
                   "maps most keys to other partitions than today, so a key's new records may be read before its "
                   "older ones still waiting in its old partition; per-key order holds again once consumers have "
                   "caught up past the change. Run again with --yes to add them.\n",
                   o.topic.c_str(), **keyed, o.total_partitions);
      return 1;
    }
  }
  char errstr[512];
  rd_kafka_NewPartitions_t* np = rd_kafka_NewPartitions_new(
      o.topic.c_str(), static_cast<size_t>(o.total_partitions), errstr, sizeof errstr);
  if (!np) return fail(errstr);
  queue_ptr q(rd_kafka_queue_new(rk->get()));
  auto opts = admin_options(rk->get(), RD_KAFKA_ADMIN_OP_CREATEPARTITIONS, std::chrono::milliseconds(o.timeout_ms));
  rd_kafka_CreatePartitions(rk->get(), &np, 1, opts.get(), q.get());
  rd_kafka_NewPartitions_destroy(np);
  auto ev = wait_admin_result(q.get(), RD_KAFKA_EVENT_CREATEPARTITIONS_RESULT, std::chrono::milliseconds(o.timeout_ms + 5000));
  if (!ev) return fail(ev.err().message);
  size_t n = 0;
  auto res = rd_kafka_CreatePartitions_result_topics(rd_kafka_event_CreatePartitions_result(ev->get()), &n);
  return report_topic_results(res, n, "partitions added to");
}

int run_list(const topic_options& o) {
  auto rk = admin_client(o);
  if (!rk) return fail(rk.err().message);
  auto md = fetch_metadata(rk->get(), "", std::chrono::milliseconds(o.timeout_ms));
  if (!md) return fail(md.err().message);
  std::map<std::string, int> topics;
  for (int i = 0; i < (*md)->topic_cnt; ++i) topics[(*md)->topics[i].topic] = (*md)->topics[i].partition_cnt;
  for (const auto& [name, parts] : topics) std::printf("%s\tpartitions=%d\n", name.c_str(), parts);
  return 0;
}

// Prints the topic's configuration entries with their sources.
int describe_configs(rd_kafka_t* rk, const topic_options& o) {
  rd_kafka_ConfigResource_t* cr = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, o.topic.c_str());
  queue_ptr q(rd_kafka_queue_new(rk));
  auto opts = admin_options(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS, std::chrono::milliseconds(o.timeout_ms));
  rd_kafka_DescribeConfigs(rk, &cr, 1, opts.get(), q.get());
  rd_kafka_ConfigResource_destroy(cr);
  auto ev = wait_admin_result(q.get(), RD_KAFKA_EVENT_DESCRIBECONFIGS_RESULT, std::chrono::milliseconds(o.timeout_ms + 5000));
  if (!ev) return fail("describe configs: " + ev.err().message);
  size_t n = 0;
  auto res = rd_kafka_DescribeConfigs_result_resources(rd_kafka_event_DescribeConfigs_result(ev->get()), &n);
  int rc = 0;
  for (size_t i = 0; i < n; ++i) {
    if (rd_kafka_ConfigResource_error(res[i]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      std::fprintf(stderr, "sluice topic: configs of %s: %s\n", o.topic.c_str(),
                   rd_kafka_ConfigResource_error_string(res[i]));
      rc = 1;
      continue;
    }
    size_t m = 0;
    auto entries = rd_kafka_ConfigResource_configs(res[i], &m);
    std::printf("configs:\n");
    for (size_t j = 0; j < m; ++j) {
      const char* v = rd_kafka_ConfigEntry_value(entries[j]);
      std::printf("  %s=%s\t(%s)\n", rd_kafka_ConfigEntry_name(entries[j]), v ? v : "",
                  rd_kafka_ConfigSource_name(rd_kafka_ConfigEntry_source(entries[j])));
    }
  }
  return rc;
}

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? "," : "") + std::to_string(ids[i]);
  return out;
}

// `describe --under-replicated`: every partition, of the topic or of every
// topic, whose ISR is smaller than its replica list (Kafka's
// --under-replicated-partitions), one line each; nothing when all are in
// sync.
int run_under_replicated(const topic_options& o) {
  const auto timeout = std::chrono::milliseconds(o.timeout_ms);
  auto conn = raw_connection::connect_any(o.bootstrap, timeout);
  if (!conn) return fail(conn.err().message);
  protocol::metadata_request req;
  if (!o.topic.empty()) req.topics.emplace().emplace_back().name = o.topic;  // else null: every topic
  req.allow_auto_topic_creation = false;
  auto md = conn->call<protocol::metadata_response>(req, metadata_version);
  if (!md) return fail("metadata: " + md.err().message);
  std::sort(md->topics.begin(), md->topics.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& t : md->topics) {
    if (t.error_code != 0) return fail(t.name.value_or("") + ": " + kafka_error_name(t.error_code));
    std::sort(t.partitions.begin(), t.partitions.end(),
              [](const auto& a, const auto& b) { return a.partition_index < b.partition_index; });
    for (const auto& p : t.partitions) {
      if (p.isr_nodes.size() >= p.replica_nodes.size()) continue;
      std::printf("%s-%d\tleader=%d\treplicas=%s\tisr=%s\toffline=%s\n", t.name.value_or("").c_str(),
                  p.partition_index, p.leader_id, join_ids(p.replica_nodes).c_str(), join_ids(p.isr_nodes).c_str(),
                  join_ids(p.offline_replicas).c_str());
    }
  }
  return 0;
}

// Partitions through a raw Metadata v9 request (raw_client.h): librdkafka
// 2.0.2's metadata has no leader epochs and no offline replicas.
int run_describe(const topic_options& o) {
  if (o.under_replicated) return run_under_replicated(o);
  if (o.topic.empty()) return fail("describe: name a topic (or ask for --under-replicated)");
  const auto timeout = std::chrono::milliseconds(o.timeout_ms);
  auto conn = raw_connection::connect_any(o.bootstrap, timeout);
  if (!conn) return fail(conn.err().message);
  protocol::metadata_request req;
  req.topics.emplace().emplace_back().name = o.topic;
  req.allow_auto_topic_creation = false;
  auto md = conn->call<protocol::metadata_response>(req, metadata_version);
  if (!md) return fail("metadata: " + md.err().message);
  if (md->topics.size() != 1) return fail("no such topic: " + o.topic);
  auto& t = md->topics[0];
  if (t.error_code != 0) {
    return fail(o.topic + ": " + std::string(kafka_error_name(t.error_code)));
  }
  std::sort(t.partitions.begin(), t.partitions.end(),
            [](const auto& a, const auto& b) { return a.partition_index < b.partition_index; });
  std::printf("topic %s\tpartitions=%zu\n", o.topic.c_str(), t.partitions.size());
  for (const auto& p : t.partitions) {
    std::printf("  partition %d\tleader=%d\tleader_epoch=%d\treplicas=%s\tisr=%s\toffline=%s%s\n",
                p.partition_index, p.leader_id, p.leader_epoch, join_ids(p.replica_nodes).c_str(),
                join_ids(p.isr_nodes).c_str(), join_ids(p.offline_replicas).c_str(),
                p.error_code ? ("\terror=" + std::string(kafka_error_name(p.error_code))).c_str() : "");
  }
  auto rk = admin_client(o);
  if (!rk) return fail(rk.err().message);
  return describe_configs(rk->get(), o);
}

int run_alter(const topic_options& o) {
  auto rk = admin_client(o);
  if (!rk) return fail(rk.err().message);
  rd_kafka_ConfigResource_t* cr = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, o.topic.c_str());
  std::unique_ptr<rd_kafka_ConfigResource_t, void (*)(rd_kafka_ConfigResource_t*)> guard(
      cr, rd_kafka_ConfigResource_destroy);
  for (const auto& c : o.configs) {
    auto kv = split_key_value(c);
    if (!kv) return fail(kv.err().message);
    rd_kafka_ConfigResource_set_config(cr, kv->first.c_str(), kv->second.c_str());
  }
  queue_ptr q(rd_kafka_queue_new(rk->get()));
  auto opts = admin_options(rk->get(), RD_KAFKA_ADMIN_OP_ALTERCONFIGS, std::chrono::milliseconds(o.timeout_ms));
  rd_kafka_AlterConfigs(rk->get(), &cr, 1, opts.get(), q.get());
  auto ev = wait_admin_result(q.get(), RD_KAFKA_EVENT_ALTERCONFIGS_RESULT, std::chrono::milliseconds(o.timeout_ms + 5000));
  if (!ev) return fail(ev.err().message);
  size_t n = 0;
  auto res = rd_kafka_AlterConfigs_result_resources(rd_kafka_event_AlterConfigs_result(ev->get()), &n);
  for (size_t i = 0; i < n; ++i) {
    if (rd_kafka_ConfigResource_error(res[i]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      return fail("alter " + o.topic + ": " + rd_kafka_err2name(rd_kafka_ConfigResource_error(res[i])) +
                  " (" + (rd_kafka_ConfigResource_error_string(res[i]) ?: "") + ")");
    }
  }
  std::printf("altered %s\n", o.topic.c_str());
  return 0;
}

}  // namespace

void add_topic_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<topic_options>();
  CLI::App* topic = app.add_subcommand("topic", "Create, list, describe, alter and delete topics");
  topic->require_subcommand(1);
  auto common = [&](CLI::App* c) {
    c->add_option("--bootstrap", o->bootstrap, "Broker address host:port")->capture_default_str();
    c->add_option("--timeout-ms", o->timeout_ms, "How long to wait for the broker")->capture_default_str();
  };

  CLI::App* create = topic->add_subcommand("create", "Create a topic");
  create->add_option("topic", o->topic, "Topic name")->required();
  create->add_option("--partitions,-p", o->partitions, "Partition count (-1: the broker's num.partitions)")
      ->capture_default_str();
  create->add_option("--replication-factor,-r", o->replication_factor,
                     "Replication factor (-1: the broker's default)")
      ->capture_default_str();
  create->add_option("--config,-c", o->configs, "Topic setting KEY=VALUE (repeatable)");
  create->add_flag("--validate-only", o->validate_only, "Ask the broker to check, not create");
  common(create);
  create->callback([o, exit_code] { *exit_code = run_create(*o); });

  CLI::App* list = topic->add_subcommand("list", "List topics and their partition counts");
  common(list);
  list->callback([o, exit_code] { *exit_code = run_list(*o); });

  CLI::App* describe = topic->add_subcommand("describe", "Partitions, leaders, replicas and configs of a topic");
  describe->add_option("topic", o->topic, "Topic name (optional with --under-replicated: every topic)");
  describe->add_flag("--under-replicated", o->under_replicated,
                     "Only the partitions whose ISR is smaller than their replica list, one line each");
  common(describe);
  describe->callback([o, exit_code] { *exit_code = run_describe(*o); });

  CLI::App* del = topic->add_subcommand("delete", "Delete a topic and all its data");
  del->add_option("topic", o->topic, "Topic name")->required();
  common(del);
  del->callback([o, exit_code] { *exit_code = run_delete(*o); });

  CLI::App* add = topic->add_subcommand("add-partitions", "Raise a topic's partition count");
  add->add_option("topic", o->topic, "Topic name")->required();
  add->add_option("--total", o->total_partitions, "The new total partition count")->required()->check(CLI::PositiveNumber);
  add->add_flag("--yes", o->yes, "Add them even though the topic's records carry keys");
  common(add);
  add->callback([o, exit_code] { *exit_code = run_add_partitions(*o); });

  CLI::App* alter = topic->add_subcommand(
      "alter", "Set topic settings (replaces the topic's overrides) or raise the partition count");
  alter->add_option("topic", o->topic, "Topic name")->required();
  auto* cfg = alter->add_option("--config,-c", o->configs, "Topic setting KEY=VALUE (repeatable)");
  auto* parts = alter->add_option("--partitions,-p", o->total_partitions, "The new total partition count")
                    ->check(CLI::PositiveNumber);
  alter->add_flag("--yes", o->yes, "With --partitions: add them even though the topic's records carry keys");
  cfg->excludes(parts);
  common(alter);
  alter->callback([o, exit_code, cfg, parts] {
    if (cfg->count() == 0 && parts->count() == 0) {
      std::fprintf(stderr, "sluice topic alter: give --config or --partitions\n");
      *exit_code = 2;
      return;
    }
    *exit_code = parts->count() ? run_add_partitions(*o) : run_alter(*o);
  });
}

}  // namespace sluice::cli
