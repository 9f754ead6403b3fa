// `sluice config describe|alter (--broker [ID] | --topic NAME | --group NAME)`,
// through librdkafka's admin API (DescribeConfigs, AlterConfigs) for
// brokers and topics, and through raw requests (protocol/raw_client.h) for
// groups.
//
// librdkafka 2.0.2 (Debian 12) has no IncrementalAlterConfigs, and Kafka's
// AlterConfigs replaces a resource's whole set of values at its level. So
// `alter` reads the values set at that level (DescribeConfigs: the entries
// whose source is DYNAMIC_TOPIC_CONFIG for a topic, DYNAMIC_BROKER_CONFIG
// for a broker), applies --config and --delete to them, and sends the
// result. Two operators altering the same resource at the same moment can
// therefore lose one change; the broker itself applies each request whole.
//
// librdkafka names a broker resource by a numeric id only, so the
// cluster-wide default (resource name "") is out of this tool's reach; any
// client that sends "" (kafka-python's admin client) can alter it.
//
// A group's configs (Kafka's GROUP config resource, type 32, as
// `kafka-configs --entity-type groups` alters them) are a resource type
// librdkafka 2.0.2 does not know, so --group sends DescribeConfigs v4 and
// IncrementalAlterConfigs v1 itself: SET for each --config, DELETE for each
// --delete, in one request, so nothing is read back first and two operators
// cannot lose each other's keys.

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/kafka_client.h"
#include "cli/raw_requests.h"
#include "config/dynamic.h"
#include "protocol/raw_client.h"

namespace sluice::cli {
namespace {

struct config_options {
  std::string bootstrap = default_bootstrap;
  std::string topic;
  std::string broker;  // the id after --broker; empty: the broker --bootstrap reaches
  bool is_broker = false;
  std::string group;  // --group: a group's configs (resource type 32)
  bool is_group = false;
  std::vector<std::string> configs;  // KEY=VALUE to set
  std::vector<std::string> deletes;  // KEY to remove from this level
  bool synonyms = false;
  bool validate_only = false;
  int timeout_ms = default_timeout_ms;
};

int fail(const std::string& what) {
  std::fprintf(stderr, "sluice config: %s\n", what.c_str());
  return 1;
}

std::chrono::milliseconds timeout(const config_options& o) {
  return std::chrono::milliseconds(o.timeout_ms);
}
std::chrono::milliseconds wait_timeout(const config_options& o) {
  return std::chrono::milliseconds(o.timeout_ms + 5000);
}

using resource_ptr =
    std::unique_ptr<rd_kafka_ConfigResource_t, void (*)(rd_kafka_ConfigResource_t*)>;

struct resource {
  rd_kafka_ResourceType_t type;
  std::string name;
  std::string label() const {
    return (type == RD_KAFKA_RESOURCE_BROKER ? "broker " : "topic ") + name;
  }
};

// The resource the options name; `--broker` without an id is the broker the
// client reached first (the bootstrap broker's id, from Metadata). An id not
// in the cluster is refused here: librdkafka would wait for it until the
// timeout.
result<resource> resolve(rd_kafka_t* rk, const config_options& o) {
  if (!o.is_broker) return resource{RD_KAFKA_RESOURCE_TOPIC, o.topic};
  SLUICE_ASSIGN_OR_RETURN(auto md, fetch_metadata(rk, "", timeout(o)));
  if (o.broker.empty())
    return resource{RD_KAFKA_RESOURCE_BROKER, std::to_string(md->orig_broker_id)};
  std::string known;
  for (int i = 0; i < md->broker_cnt; ++i) {
    if (std::to_string(md->brokers[i].id) == o.broker)
      return resource{RD_KAFKA_RESOURCE_BROKER, o.broker};
    known += (known.empty() ? "" : ", ") + std::to_string(md->brokers[i].id);
  }
  return error{errc::invalid_argument,
               "no broker " + o.broker + " in the cluster (brokers: " + known + ")"};
}

// One described entry, as much as this tool needs of it.
struct entry {
  std::string name;
  std::optional<std::string> value;
  rd_kafka_ConfigSource_t source;
  bool read_only = false;
  bool sensitive = false;
  std::vector<
      std::pair<std::string, std::pair<std::optional<std::string>, rd_kafka_ConfigSource_t>>>
      synonyms;
};

result<std::vector<entry>> describe(rd_kafka_t* rk, const resource& r, const config_options& o) {
  resource_ptr cr(rd_kafka_ConfigResource_new(r.type, r.name.c_str()),
                  rd_kafka_ConfigResource_destroy);
  queue_ptr q(rd_kafka_queue_new(rk));
  auto opts = admin_options(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS, timeout(o));
  rd_kafka_ConfigResource_t* raw = cr.get();
  rd_kafka_DescribeConfigs(rk, &raw, 1, opts.get(), q.get());
  SLUICE_ASSIGN_OR_RETURN(
      auto ev, wait_admin_result(q.get(), RD_KAFKA_EVENT_DESCRIBECONFIGS_RESULT, wait_timeout(o)));
  size_t n = 0;
  auto res = rd_kafka_DescribeConfigs_result_resources(
      rd_kafka_event_DescribeConfigs_result(ev.get()), &n);
  if (n != 1)
    return error{errc::malformed, "describe " + r.label() + ": " + std::to_string(n) + " results"};
  if (rd_kafka_ConfigResource_error(res[0]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
    const char* msg = rd_kafka_ConfigResource_error_string(res[0]);
    return error{errc::invalid_argument,
                 "describe " + r.label() + ": " +
                     rd_kafka_err2name(rd_kafka_ConfigResource_error(res[0])) + " (" +
                     (msg ? msg : "") + ")"};
  }
  std::vector<entry> out;
  size_t m = 0;
  auto entries = rd_kafka_ConfigResource_configs(res[0], &m);
  for (size_t j = 0; j < m; ++j) {
    entry e;
    e.name = rd_kafka_ConfigEntry_name(entries[j]);
    if (const char* v = rd_kafka_ConfigEntry_value(entries[j])) e.value = v;
    e.source = rd_kafka_ConfigEntry_source(entries[j]);
    e.read_only = rd_kafka_ConfigEntry_is_read_only(entries[j]);
    e.sensitive = rd_kafka_ConfigEntry_is_sensitive(entries[j]);
    size_t k = 0;
    auto syns = rd_kafka_ConfigEntry_synonyms(entries[j], &k);
    for (size_t s = 0; s < k; ++s) {
      const char* v = rd_kafka_ConfigEntry_value(syns[s]);
      e.synonyms.push_back({rd_kafka_ConfigEntry_name(syns[s]),
                            {v ? std::optional<std::string>(v) : std::nullopt,
                             rd_kafka_ConfigEntry_source(syns[s])}});
    }
    out.push_back(std::move(e));
  }
  return out;
}

// ---- Groups: raw requests --------------------------------------------------

constexpr int8_t resource_group = 32;  // Kafka's ConfigResource.Type GROUP
constexpr int16_t incremental_alter_configs_version = 1;

int run_group_describe(const config_options& o) {
  auto conn = protocol::raw_connection::connect_any(o.bootstrap, timeout(o));
  if (!conn) return fail(conn.err().message);
  auto res = describe_group_configs(*conn, o.group, o.synonyms);
  if (!res) return fail(res.err().message);
  auto source = [](int8_t s) { return std::string(config::config_source_name(static_cast<config::config_source>(s))); };
  std::printf("configs of group %s:\n", o.group.c_str());
  for (const auto& e : res->configs) {
    std::printf("  %s=%s\t(%s%s%s)\n", e.name.c_str(), e.value ? e.value->c_str() : "", source(e.config_source).c_str(),
                e.read_only ? ", read-only" : "", e.is_sensitive ? ", sensitive" : "");
    if (!o.synonyms) continue;
    for (const auto& syn : e.synonyms) {
      std::printf("      %s=%s\t(%s)\n", syn.name.c_str(), syn.value ? syn.value->c_str() : "",
                  source(syn.source).c_str());
    }
  }
  return 0;
}

int run_group_alter(const config_options& o, const std::map<std::string, std::string>& sets) {
  auto conn = protocol::raw_connection::connect_any(o.bootstrap, timeout(o));
  if (!conn) return fail(conn.err().message);
  protocol::incremental_alter_configs_request req;
  auto& r = req.resources.emplace_back();
  r.resource_type = resource_group;
  r.resource_name = o.group;
  for (const auto& [k, v] : sets) {
    auto& c = r.configs.emplace_back();
    c.name = k;
    c.config_operation = 0;  // SET
    c.value = v;
  }
  for (const auto& d : o.deletes) {
    auto& c = r.configs.emplace_back();
    c.name = d;
    c.config_operation = 1;  // DELETE
  }
  req.validate_only = o.validate_only;
  auto resp = conn->call<protocol::incremental_alter_configs_response>(req, incremental_alter_configs_version);
  if (!resp) return fail("alter group " + o.group + ": " + resp.err().message);
  if (resp->responses.size() != 1) return fail("alter group " + o.group + ": " +
                                               std::to_string(resp->responses.size()) + " results");
  const auto& res = resp->responses[0];
  if (res.error_code != 0) return fail("alter group " + o.group + ": " + kafka_failure(res.error_code, res.error_message));
  std::printf("%s group %s\n", o.validate_only ? "validated" : "altered", o.group.c_str());
  return 0;
}

int run_describe(const config_options& o) {
  if (o.is_group) return run_group_describe(o);
  auto conf = make_conf(o.bootstrap);
  if (!conf) return fail(conf.err().message);
  auto rk = make_client(RD_KAFKA_PRODUCER, std::move(conf).value());
  if (!rk) return fail(rk.err().message);
  auto r = resolve(rk->get(), o);
  if (!r) return fail(r.err().message);
  auto entries = describe(rk->get(), *r, o);
  if (!entries) return fail(entries.err().message);
  std::printf("configs of %s:\n", r->label().c_str());
  for (const auto& e : *entries) {
    std::printf("  %s=%s\t(%s%s%s)\n", e.name.c_str(), e.value ? e.value->c_str() : "",
                rd_kafka_ConfigSource_name(e.source), e.read_only ? ", read-only" : "",
                e.sensitive ? ", sensitive" : "");
    if (!o.synonyms) continue;
    for (const auto& [name, vs] : e.synonyms) {
      std::printf("      %s=%s\t(%s)\n", name.c_str(), vs.first ? vs.first->c_str() : "",
                  rd_kafka_ConfigSource_name(vs.second));
    }
  }
  return 0;
}

int run_alter(const config_options& o) {
  if (o.configs.empty() && o.deletes.empty()) {
    std::fprintf(stderr,
                 "sluice config alter: give at least one --config KEY=VALUE or --delete KEY\n");
    return 2;
  }
  std::map<std::string, std::string> sets;
  for (const auto& c : o.configs) {
    auto kv = split_key_value(c);
    if (!kv) return fail(kv.err().message);
    if (!sets.emplace(kv->first, kv->second).second) return fail(kv->first + ": given twice");
  }
  for (const auto& d : o.deletes) {
    if (sets.count(d)) return fail(d + ": both set and deleted");
  }
  if (o.is_group) return run_group_alter(o, sets);
  auto conf = make_conf(o.bootstrap);
  if (!conf) return fail(conf.err().message);
  auto rk = make_client(RD_KAFKA_PRODUCER, std::move(conf).value());
  if (!rk) return fail(rk.err().message);
  auto r = resolve(rk->get(), o);
  if (!r) return fail(r.err().message);
  auto entries = describe(rk->get(), *r, o);
  if (!entries) return fail(entries.err().message);

  // The values set at this level now, then the changes.
  const rd_kafka_ConfigSource_t level = r->type == RD_KAFKA_RESOURCE_BROKER
                                            ? RD_KAFKA_CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG
                                            : RD_KAFKA_CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG;
  std::map<std::string, std::string> next;
  for (const auto& e : *entries) {
    if (e.source != level) continue;
    if (!e.value) return fail(e.name + " is sensitive: its value cannot be read back and kept");
    next[e.name] = *e.value;
  }
  for (const auto& d : o.deletes) {
    if (next.erase(d) == 0)
      std::fprintf(stderr, "sluice config: %s is not set on %s; nothing to delete\n", d.c_str(),
                   r->label().c_str());
  }
  for (const auto& [k, v] : sets) next[k] = v;

  resource_ptr cr(rd_kafka_ConfigResource_new(r->type, r->name.c_str()),
                  rd_kafka_ConfigResource_destroy);
  for (const auto& [k, v] : next)
    rd_kafka_ConfigResource_set_config(cr.get(), k.c_str(), v.c_str());
  queue_ptr q(rd_kafka_queue_new(rk->get()));
  auto opts = admin_options(rk->get(), RD_KAFKA_ADMIN_OP_ALTERCONFIGS, timeout(o));
  char errstr[512];
  if (o.validate_only)
    rd_kafka_AdminOptions_set_validate_only(opts.get(), 1, errstr, sizeof errstr);
  rd_kafka_ConfigResource_t* raw = cr.get();
  rd_kafka_AlterConfigs(rk->get(), &raw, 1, opts.get(), q.get());
  auto ev = wait_admin_result(q.get(), RD_KAFKA_EVENT_ALTERCONFIGS_RESULT, wait_timeout(o));
  if (!ev) return fail(ev.err().message);
  size_t n = 0;
  auto res =
      rd_kafka_AlterConfigs_result_resources(rd_kafka_event_AlterConfigs_result(ev->get()), &n);
  for (size_t i = 0; i < n; ++i) {
    if (rd_kafka_ConfigResource_error(res[i]) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      const char* msg = rd_kafka_ConfigResource_error_string(res[i]);
      return fail("alter " + r->label() + ": " +
                  rd_kafka_err2name(rd_kafka_ConfigResource_error(res[i])) + " (" +
                  (msg ? msg : "") + ")");
    }
  }
  std::printf("%s %s\n", o.validate_only ? "validated" : "altered", r->label().c_str());
  return 0;
}

}  // namespace

void add_config_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<config_options>();
  CLI::App* cmd = app.add_subcommand("config", "Describe and alter broker, topic and group settings");
  cmd->require_subcommand(1);
  auto target = [&](CLI::App* c) {
    auto* broker =
        c->add_option("--broker", o->broker,
                      "A broker's settings: its id, or none for the broker --bootstrap reaches")
            ->expected(0, 1);
    auto* topic = c->add_option("--topic", o->topic, "A topic's settings");
    auto* group = c->add_option("--group", o->group,
                                "A group's settings (share.*, consumer.*, errors.deadletterqueue.*), "
                                "whether or not the group exists");
    broker->excludes(topic);
    group->excludes(broker);
    group->excludes(topic);
    c->add_option("--bootstrap", o->bootstrap, "Broker address host:port")->capture_default_str();
    c->add_option("--timeout-ms", o->timeout_ms, "How long to wait for the broker")
        ->capture_default_str();
    c->callback([o, broker, topic, group, c, exit_code] {
      if (broker->count() == 0 && topic->count() == 0 && group->count() == 0) {
        std::fprintf(stderr, "sluice config %s: give --broker [ID], --topic NAME or --group NAME\n",
                     c->get_name().c_str());
        *exit_code = 2;
        return;
      }
      o->is_broker = broker->count() > 0;
      o->is_group = group->count() > 0;
      *exit_code = c->get_name() == "describe" ? run_describe(*o) : run_alter(*o);
    });
  };
  CLI::App* describe =
      cmd->add_subcommand("describe", "Every setting with its value and where it comes from");
  describe->add_flag("--synonyms", o->synonyms, "Also list each setting's lower levels (synonyms)");
  target(describe);
  CLI::App* alter = cmd->add_subcommand("alter",
                                        "Set or delete settings at the resource's own level (a "
                                        "broker's dynamic values, a topic's overrides, a group's "
                                        "configs)");
  alter->add_option("--config,-c", o->configs, "Setting KEY=VALUE (repeatable)");
  alter->add_option("--delete,-d", o->deletes,
                    "Setting KEY to remove from this level (repeatable)");
  alter->add_flag("--validate-only", o->validate_only, "Ask the broker to check, not change");
  target(alter);
}

}  // namespace sluice::cli
