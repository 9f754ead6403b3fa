#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/crc32c.h"
#include "base/limits.h"
#include "config/broker_config.h"
#include "config/dynamic.h"
#include "config/overrides_file.h"
#include "config/schema.h"

namespace sluice::config {
namespace {

broker_config defaults() {
  auto b = make_broker_config({});
  EXPECT_TRUE(b.ok()) << b.err().message;
  return std::move(b).value();
}

result<broker_config> load(std::vector<std::string> args) {
  auto parsed = parse_serve_args(std::span<const std::string>(args));
  if (!parsed.ok()) return parsed.err();
  return load_broker_config(*parsed);
}

// Expects an invalid_config error whose message names `key`.
template <class R>
void expect_refused(const R& r, const std::string& key) {
  ASSERT_FALSE(r.ok()) << "accepted, expected refusal naming " << key;
  EXPECT_EQ(r.code(), errc::invalid_config) << r.err().message;
  EXPECT_NE(r.err().message.find(key), std::string::npos) << r.err().message;
}

class temp_dir {
 public:
  temp_dir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "sluice_config_XXXXXX").string();
    SLUICE_ASSERT(mkdtemp(pattern.data()) != nullptr, "mkdtemp");
    path_ = pattern;
  }
  ~temp_dir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(file(name), std::ios::binary) << text;
  }

 private:
  std::string path_;
};

// ---- Schema -----------------------------------------------------------------

TEST(schema, every_default_is_valid_and_names_are_unique) {
  std::set<std::string_view> names;
  std::set<std::string_view> topic_names;
  for (const auto& s : all_settings()) {
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    if (s.is_topic_setting()) {
      EXPECT_TRUE(topic_names.insert(s.topic_name).second) << s.topic_name;
    }
    EXPECT_FALSE(s.doc.empty()) << s.name;
    auto v = parse_value(s, s.name, s.default_text);
    EXPECT_TRUE(v.ok()) << s.name << ": " << (v.ok() ? "" : v.err().message);
    EXPECT_EQ(format_value(default_value(s)), s.default_text) << s.name;
  }
}

TEST(schema, kafka_topic_configs_are_present_with_broker_synonyms) {
  const std::pair<const char*, const char*> pairs[] = {
      {"cleanup.policy", "log.cleanup.policy"},
      {"compression.type", "compression.type"},
      {"delete.retention.ms", "log.cleaner.delete.retention.ms"},
      {"file.delete.delay.ms", "log.segment.delete.delay.ms"},
      {"flush.messages", "log.flush.interval.messages"},
      {"flush.ms", "log.flush.interval.ms"},
      {"index.interval.bytes", "log.index.interval.bytes"},
      {"max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms"},
      {"max.message.bytes", "message.max.bytes"},
      {"message.timestamp.type", "log.message.timestamp.type"},
      {"min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio"},
      {"min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms"},
      {"min.insync.replicas", "min.insync.replicas"},
      {"retention.bytes", "log.retention.bytes"},
      {"retention.ms", "log.retention.ms"},
      {"segment.bytes", "log.segment.bytes"},
      {"segment.index.bytes", "log.index.size.max.bytes"},
      {"segment.ms", "log.roll.ms"},
      {"unclean.leader.election.enable", "unclean.leader.election.enable"},
  };
  for (auto [topic, broker] : pairs) {
    const setting* s = find_topic_setting(topic);
    ASSERT_NE(s, nullptr) << topic;
    EXPECT_EQ(s->name, broker);
    EXPECT_EQ(find_broker_setting(broker), s);
  }
}

TEST(schema, parse_value_by_type) {
  const setting& retention = *find_topic_setting("retention.ms");
  EXPECT_EQ(std::get<int64_t>(*parse_value(retention, "retention.ms", " 1000 ")), 1000);
  expect_refused(parse_value(retention, "retention.ms", "10s"), "retention.ms");
  expect_refused(parse_value(retention, "retention.ms", "-2"), "retention.ms");
  expect_refused(parse_value(retention, "retention.ms", "99999999999999999999"), "retention.ms");
  const setting& segment = *find_topic_setting("segment.bytes");
  expect_refused(parse_value(segment, "segment.bytes", "13"), "segment.bytes");
  expect_refused(parse_value(segment, "segment.bytes", "2147483648"), "segment.bytes");
  const setting& unclean = *find_topic_setting("unclean.leader.election.enable");
  EXPECT_TRUE(std::get<bool>(*parse_value(unclean, "u", "TRUE")));
  expect_refused(parse_value(unclean, "unclean.leader.election.enable", "yes"),
                 "unclean.leader.election.enable");
  const setting& ratio = *find_topic_setting("min.cleanable.dirty.ratio");
  EXPECT_DOUBLE_EQ(std::get<double>(*parse_value(ratio, "r", "0.25")), 0.25);
  expect_refused(parse_value(ratio, "min.cleanable.dirty.ratio", "1.5"),
                 "min.cleanable.dirty.ratio");
  expect_refused(parse_value(ratio, "min.cleanable.dirty.ratio", "nan"),
                 "min.cleanable.dirty.ratio");
  const setting& ts = *find_topic_setting("message.timestamp.type");
  EXPECT_EQ(std::get<std::string>(*parse_value(ts, "t", "LogAppendTime")), "LogAppendTime");
  expect_refused(parse_value(ts, "message.timestamp.type", "logappendtime"),
                 "message.timestamp.type");
  const setting& policy = *find_topic_setting("cleanup.policy");
  EXPECT_EQ(std::get<std::vector<std::string>>(*parse_value(policy, "c", "compact, delete")),
            (std::vector<std::string>{"compact", "delete"}));
  expect_refused(parse_value(policy, "cleanup.policy", "compact,shred"), "cleanup.policy");
  expect_refused(parse_value(policy, "cleanup.policy", ""), "cleanup.policy");
  expect_refused(parse_value(policy, "cleanup.policy", "delete,delete"), "cleanup.policy");
  expect_refused(parse_value(policy, "cleanup.policy", "delete\ncompact"), "cleanup.policy");
}

// ---- Broker configuration -----------------------------------------------------

TEST(broker_config, defaults) {
  broker_config b = defaults();
  EXPECT_EQ(b.listener, (host_port{"127.0.0.1", 9092}));
  EXPECT_EQ(b.advertised_listener, b.listener);
  EXPECT_EQ(b.data_dir, "./sluice-data");
  EXPECT_EQ(b.node_id, 0);
  EXPECT_GE(b.num_io_threads, 1);
  EXPECT_EQ(b.socket_request_max_bytes, limits::default_socket_request_max_bytes);
  EXPECT_EQ(b.fetch_max_bytes, limits::default_fetch_max_bytes);
  EXPECT_EQ(b.fetch_bytes_per_rtt_ms, limits::default_fetch_bytes_per_rtt_ms);
  EXPECT_EQ(b.connections_max_idle_ms, limits::default_connections_max_idle_ms);
  EXPECT_EQ(b.max_connections, limits::default_max_connections);
  EXPECT_EQ(b.max_inflight_requests_per_connection,
            limits::default_max_inflight_requests_per_connection);
  EXPECT_EQ(b.queued_max_request_bytes, limits::default_queued_max_request_bytes);
  EXPECT_EQ(b.request_read_timeout_ms, limits::default_request_read_timeout_ms);
  EXPECT_TRUE(b.auto_create_topics_enable);
  EXPECT_EQ(b.num_partitions, 1);
  EXPECT_EQ(b.default_replication_factor, 1);
  EXPECT_EQ(b.group_min_session_timeout_ms, 6000);
  EXPECT_EQ(b.group_max_session_timeout_ms, 1800000);
  EXPECT_EQ(b.group_initial_rebalance_delay_ms, 3000);
  EXPECT_EQ(b.offsets_topic_num_partitions, 50);
  EXPECT_EQ(b.transaction_version, 2);
  EXPECT_EQ(b.offsets_retention_minutes, 7 * 24 * 60);
  EXPECT_EQ(b.offsets_commit_timeout_ms, 5000);
  EXPECT_EQ(b.retention_headroom_alert_ms, 24ll * 3600 * 1000);
  EXPECT_EQ(b.write_rate_window_ms, 300000);
  ASSERT_TRUE(b.metrics_listener.has_value());
  const topic_config& t = b.topic_defaults;
  EXPECT_EQ(t.retention_ms, 7ll * 24 * 3600 * 1000);
  EXPECT_EQ(t.retention_bytes, -1);
  EXPECT_TRUE(t.cleanup_delete);
  EXPECT_FALSE(t.cleanup_compact);
  EXPECT_EQ(t.segment_bytes, limits::default_segment_bytes);
  EXPECT_EQ(t.segment_ms, limits::default_segment_ms);
  EXPECT_EQ(t.index_interval_bytes, limits::default_index_interval_bytes);
  EXPECT_EQ(t.segment_index_bytes, limits::default_segment_index_bytes);
  EXPECT_EQ(t.max_message_bytes, limits::default_message_max_bytes);
  EXPECT_EQ(t.message_timestamp_type, timestamp_type::create_time);
  EXPECT_EQ(t.compression, compression_type::producer);
  EXPECT_EQ(t.file_delete_delay_ms, 60000);
  EXPECT_EQ(t.delete_retention_ms, 86400000);
  EXPECT_DOUBLE_EQ(t.min_cleanable_dirty_ratio, 0.5);
  EXPECT_TRUE(t.fsync_enable);
  EXPECT_EQ(load({})->topic_defaults, t);
}

TEST(broker_config, toml_file_with_dotted_quoted_and_table_keys) {
  temp_dir dir;
  dir.write("sluice.toml", R"(
listeners = "PLAINTEXT://0.0.0.0:19092"
log.dirs = ["/var/lib/sluice"]
"log.retention.ms" = 3600000
num.partitions = 4
auto.create.topics.enable = false
log.cleanup.policy = ["compact", "delete"]

[log.cleaner]
min.cleanable.ratio = 0.75

[group]
max.size = 100
)");
  auto b = load({"--config", dir.file("sluice.toml")});
  ASSERT_TRUE(b.ok()) << b.err().message;
  EXPECT_EQ(b->listener, (host_port{"0.0.0.0", 19092}));
  EXPECT_EQ(b->data_dir, "/var/lib/sluice");
  EXPECT_EQ(b->topic_defaults.retention_ms, 3600000);
  EXPECT_EQ(b->num_partitions, 4);
  EXPECT_FALSE(b->auto_create_topics_enable);
  EXPECT_TRUE(b->topic_defaults.cleanup_compact);
  EXPECT_TRUE(b->topic_defaults.cleanup_delete);
  EXPECT_DOUBLE_EQ(b->topic_defaults.min_cleanable_dirty_ratio, 0.75);
  EXPECT_EQ(b->group_max_size, 100);
}

TEST(broker_config, command_line_overrides_win_over_file) {
  temp_dir dir;
  dir.write("sluice.toml", "num.partitions = 4\nlog.retention.ms = 1000\n");
  auto b = load({"--config", dir.file("sluice.toml"), "--num.partitions", "8",
                 "--log.retention.ms=-1", "--listeners", "127.0.0.1:0", "--num.partitions", "9"});
  ASSERT_TRUE(b.ok()) << b.err().message;
  EXPECT_EQ(b->num_partitions, 9);  // the last one wins
  EXPECT_EQ(b->topic_defaults.retention_ms, -1);
  EXPECT_EQ(b->listener, (host_port{"127.0.0.1", 0}));
  EXPECT_EQ(b->static_values.size(), 3u);
}

TEST(broker_config, listener_forms) {
  auto v6 = load({"--listeners", "PLAINTEXT://[::1]:0", "--advertised.listeners", "kafka.lan:9092",
                  "--sluice.metrics.listener", ""});
  ASSERT_TRUE(v6.ok()) << v6.err().message;
  EXPECT_EQ(v6->listener, (host_port{"::1", 0}));
  EXPECT_EQ(format_host_port(v6->listener), "[::1]:0");
  EXPECT_EQ(format_host_port(v6->advertised_listener), "kafka.lan:9092");
  EXPECT_FALSE(v6->metrics_listener.has_value());
  auto any = load({"--listeners", "PLAINTEXT://:9093"});
  ASSERT_TRUE(any.ok()) << any.err().message;
  EXPECT_EQ(any->listener, (host_port{"0.0.0.0", 9093}));
}

TEST(broker_config, unknown_key_refused_naming_it) {
  expect_refused(load({"--log.retension.ms", "5"}), "log.retension.ms");
  auto typo = load({"--log.retension.ms", "5"});
  EXPECT_NE(typo.err().message.find("did you mean log.retention.ms"), std::string::npos)
      << typo.err().message;
  auto topic_key = load({"--retention.ms", "5"});
  expect_refused(topic_key, "retention.ms");
  EXPECT_NE(topic_key.err().message.find("log.retention.ms"), std::string::npos);
  temp_dir dir;
  dir.write("a.toml", "num.partitions = 2\nno.such.key = 1\n");
  auto r = load({"--config", dir.file("a.toml")});
  expect_refused(r, "no.such.key");
  EXPECT_NE(r.err().message.find("a.toml:2"), std::string::npos) << r.err().message;
}

TEST(broker_config, wrong_type_refused_naming_key) {
  temp_dir dir;
  dir.write("a.toml", "log.retention.ms = \"7d\"\n");
  expect_refused(load({"--config", dir.file("a.toml")}), "log.retention.ms");
  dir.write("b.toml", "auto.create.topics.enable = 1\n");
  expect_refused(load({"--config", dir.file("b.toml")}), "auto.create.topics.enable");
  dir.write("c.toml", "log.dirs = [1]\n");
  expect_refused(load({"--config", dir.file("c.toml")}), "log.dirs");
  expect_refused(load({"--num.partitions", "four"}), "num.partitions");
  expect_refused(load({"--auto.create.topics.enable", "maybe"}), "auto.create.topics.enable");
}

TEST(broker_config, out_of_range_refused_naming_key) {
  expect_refused(load({"--num.partitions", "0"}), "num.partitions");
  expect_refused(load({"--log.segment.bytes", "1"}), "log.segment.bytes");
  expect_refused(load({"--socket.request.max.bytes", "2147483647"}), "socket.request.max.bytes");
  expect_refused(load({"--fetch.max.bytes", "1023"}), "fetch.max.bytes");
  expect_refused(load({"--sluice.fetch.bytes.per.rtt.ms", "-1"}), "sluice.fetch.bytes.per.rtt.ms");
  expect_refused(load({"--sluice.fetch.bytes.per.rtt.ms", "1099511627777"}),
                 "sluice.fetch.bytes.per.rtt.ms");
  // Within the cap it is accepted here; the live brokers are counted when a
  // topic is created.
  EXPECT_EQ(load({"--default.replication.factor", "3"})->default_replication_factor, 3);
  expect_refused(load({"--default.replication.factor", "0"}), "default.replication.factor");
  expect_refused(
      load({"--default.replication.factor", std::to_string(limits::max_replication_factor + 1)}),
      "default.replication.factor");
  expect_refused(load({"--listeners", "127.0.0.1:70000"}), "listeners");
  expect_refused(load({"--listeners", "SSL://127.0.0.1:9093"}), "listeners");
  expect_refused(load({"--listeners", "a:1,b:2"}), "listeners");
  expect_refused(load({"--listeners", "::1:9092"}), "listeners");
  expect_refused(load({"--sluice.metrics.listener", "localhost"}), "sluice.metrics.listener");
  expect_refused(
      load({"--group.min.session.timeout.ms", "60000", "--group.max.session.timeout.ms", "1000"}),
      "group.min.session.timeout.ms");
  // Kafka's -1 (unbounded) is not accepted, nor a bound one largest frame
  // and the small requests' reserve cannot fit in.
  expect_refused(load({"--queued.max.request.bytes", "-1"}), "queued.max.request.bytes");
  expect_refused(load({"--queued.max.request.bytes", "104857600"}), "queued.max.request.bytes");
  expect_refused(load({"--socket.request.max.bytes", "268435456"}), "queued.max.request.bytes");
  EXPECT_TRUE(
      load({"--socket.request.max.bytes", "1048576", "--queued.max.request.bytes", "17825792"})
          .ok());
  expect_refused(load({"--sluice.request.read.timeout.ms", "0"}), "sluice.request.read.timeout.ms");
  expect_refused(load({"--log.cleaner.min.compaction.lag.ms", "10",
                       "--log.cleaner.max.compaction.lag.ms", "5"}),
                 "log.cleaner.min.compaction.lag.ms");
}

TEST(broker_config, bad_enum_refused_naming_key) {
  auto r = load({"--compression.type", "brotli"});
  expect_refused(r, "compression.type");
  EXPECT_NE(r.err().message.find("zstd"), std::string::npos) << r.err().message;
  expect_refused(load({"--log.message.timestamp.type", "Now"}), "log.message.timestamp.type");
  expect_refused(load({"--log.cleanup.policy", "keep"}), "log.cleanup.policy");
  expect_refused(load({"--sluice.log.fsync.scope", "disk"}), "sluice.log.fsync.scope");
}

TEST(broker_config, fsync_scope) {
  EXPECT_TRUE(defaults().fsync_scope_filesystem);
  auto f = load({"--sluice.log.fsync.scope", "file"});
  ASSERT_TRUE(f.ok()) << f.err().message;
  EXPECT_FALSE(f->fsync_scope_filesystem);
  auto fs = load({"--sluice.log.fsync.scope", "filesystem"});
  ASSERT_TRUE(fs.ok()) << fs.err().message;
  EXPECT_TRUE(fs->fsync_scope_filesystem);
}

TEST(broker_config, cache_drop_behind) {
  EXPECT_EQ(defaults().follower_cache_drop_behind_bytes, limits::default_follower_cache_drop_behind_bytes);
  auto off = load({"--sluice.follower.cache.drop.behind.bytes", "0"});
  ASSERT_TRUE(off.ok()) << off.err().message;
  EXPECT_EQ(off->follower_cache_drop_behind_bytes, 0);
  expect_refused(load({"--sluice.follower.cache.drop.behind.bytes", "-1"}), "sluice.follower.cache.drop.behind.bytes");
}

TEST(broker_config, argument_and_file_errors) {
  auto missing = load({"--num.partitions"});
  expect_refused(missing, "num.partitions");
  expect_refused(load({"serve"}), "serve");
  temp_dir dir;
  auto no_file = load({"--config", dir.file("absent.toml")});
  ASSERT_FALSE(no_file.ok());
  EXPECT_EQ(no_file.code(), errc::not_found);
  EXPECT_NE(no_file.err().message.find("absent.toml"), std::string::npos);
  dir.write("broken.toml", "num.partitions = = 3\n");
  auto broken = load({"--config", dir.file("broken.toml")});
  expect_refused(broken, "broken.toml:1");
  dir.write("twice.toml", "\"num.partitions\" = 2\n[num]\npartitions = 3\n");
  expect_refused(load({"--config", dir.file("twice.toml")}), "num.partitions");
}

TEST(broker_config, help_flag_and_listing) {
  auto h = parse_serve_args(std::vector<std::string>{"--num.partitions", "3", "--help"});
  ASSERT_TRUE(h.ok());
  EXPECT_TRUE(h->help);
  const char* argv[] = {"-h"};
  EXPECT_TRUE(parse_serve_args(1, argv)->help);
  const std::string help = render_help();
  for (const auto& s : all_settings()) {
    EXPECT_NE(help.find("--" + std::string(s.name) + " " + std::string(value_type_name(s.type))),
              std::string::npos)
        << s.name;
    EXPECT_NE(help.find(std::string(s.doc.substr(0, 20))), std::string::npos) << s.name;
    if (s.is_topic_setting()) {
      EXPECT_NE(help.find("topic config " + std::string(s.topic_name)), std::string::npos);
    }
  }
  EXPECT_NE(help.find("default: \"604800000\""), std::string::npos);
  EXPECT_NE(help.find("--config FILE"), std::string::npos);
}

// ---- Topic configuration ----------------------------------------------------

TEST(topic_config, overrides_over_broker_defaults) {
  auto b = load({"--log.retention.ms", "5000", "--log.segment.bytes", "1048576"});
  ASSERT_TRUE(b.ok()) << b.err().message;
  std::vector<config_entry> entries = {{"retention.ms", "1000"},
                                       {"cleanup.policy", "compact"},
                                       {"message.timestamp.type", "LogAppendTime"},
                                       {"segment.ms", std::nullopt}};
  auto o = make_topic_overrides(*b, entries);
  ASSERT_TRUE(o.ok()) << o.err().message;
  EXPECT_EQ(o->size(), 3u);
  topic_config t = effective_topic_config(*b, *o);
  EXPECT_EQ(t.retention_ms, 1000);
  EXPECT_EQ(t.segment_bytes, 1048576);                  // the broker's static value
  EXPECT_EQ(t.segment_ms, limits::default_segment_ms);  // the default
  EXPECT_TRUE(t.cleanup_compact);
  EXPECT_FALSE(t.cleanup_delete);
  EXPECT_EQ(t.message_timestamp_type, timestamp_type::log_append_time);
  EXPECT_EQ(effective_topic_config(*b, {}).retention_ms, 5000);
}

TEST(topic_config, create_configs_refused_naming_key) {
  broker_config b = defaults();
  expect_refused(make_topic_overrides(b, std::vector<config_entry>{{"retention.mss", "1"}}),
                 "retention.mss");
  auto broker_key = make_topic_overrides(b, std::vector<config_entry>{{"log.retention.ms", "1"}});
  expect_refused(broker_key, "log.retention.ms");
  EXPECT_NE(broker_key.err().message.find("retention.ms)"), std::string::npos);
  expect_refused(make_topic_overrides(b, std::vector<config_entry>{{"segment.bytes", "big"}}),
                 "segment.bytes");
  expect_refused(make_topic_overrides(b, std::vector<config_entry>{{"max.message.bytes", "-1"}}),
                 "max.message.bytes");
  expect_refused(make_topic_overrides(b, std::vector<config_entry>{{"compression.type", "brotli"}}),
                 "compression.type");
  expect_refused(make_topic_overrides(
                     b, std::vector<config_entry>{{"retention.ms", "1"}, {"retention.ms", "2"}}),
                 "retention.ms");
  expect_refused(make_topic_overrides(b, std::vector<config_entry>{{"min.compaction.lag.ms", "10"},
                                                                   {"max.compaction.lag.ms", "5"}}),
                 "min.compaction.lag.ms");
}

TEST(topic_config, incremental_set_delete_append_subtract) {
  broker_config b = defaults();
  config_map current;
  current.set("retention.ms", int64_t{1000});
  std::vector<alter_request> ops = {{"cleanup.policy", alter_op::append, "compact"},
                                    {"retention.ms", alter_op::remove, std::nullopt},
                                    {"segment.bytes", alter_op::set, "1048576"}};
  auto next = alter_topic_overrides(b, current, ops);
  ASSERT_TRUE(next.ok()) << next.err().message;
  EXPECT_EQ(next->find("retention.ms"), nullptr);
  // Appended to the effective value (the broker default "delete").
  EXPECT_EQ(std::get<std::vector<std::string>>(*next->find("cleanup.policy")),
            (std::vector<std::string>{"delete", "compact"}));
  topic_config t = effective_topic_config(b, *next);
  EXPECT_TRUE(t.cleanup_compact && t.cleanup_delete);
  EXPECT_EQ(t.retention_ms, b.topic_defaults.retention_ms);
  EXPECT_EQ(t.segment_bytes, 1048576);

  // Appending what is there changes nothing; subtract removes.
  auto again = alter_topic_overrides(
      b, *next, std::vector<alter_request>{{"cleanup.policy", alter_op::append, "delete"}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *next);
  auto sub = alter_topic_overrides(
      b, *next, std::vector<alter_request>{{"cleanup.policy", alter_op::subtract, "delete"}});
  ASSERT_TRUE(sub.ok()) << sub.err().message;
  EXPECT_EQ(std::get<std::vector<std::string>>(*sub->find("cleanup.policy")),
            (std::vector<std::string>{"compact"}));
  // Subtracting the last policy leaves an impossible empty list.
  expect_refused(
      alter_topic_overrides(
          b, *sub, std::vector<alter_request>{{"cleanup.policy", alter_op::subtract, "compact"}}),
      "cleanup.policy");
  // append on a non-list, a bad item, a missing value, a duplicate key.
  expect_refused(alter_topic_overrides(
                     b, {}, std::vector<alter_request>{{"retention.ms", alter_op::append, "5"}}),
                 "retention.ms");
  expect_refused(alter_topic_overrides(
                     b, {}, std::vector<alter_request>{{"cleanup.policy", alter_op::append, "x"}}),
                 "cleanup.policy");
  expect_refused(
      alter_topic_overrides(
          b, {}, std::vector<alter_request>{{"segment.ms", alter_op::set, std::nullopt}}),
      "segment.ms");
  expect_refused(alter_topic_overrides(
                     b, {},
                     std::vector<alter_request>{{"segment.ms", alter_op::set, "5"},
                                                {"segment.ms", alter_op::remove, std::nullopt}}),
                 "segment.ms");
  // A refused request changes nothing: the input map is untouched.
  EXPECT_EQ(current.find("retention.ms") != nullptr, true);
}

TEST(topic_config, describe_sources_and_synonyms) {
  auto base = load({"--log.retention.ms", "5000"});
  ASSERT_TRUE(base.ok());
  // A cluster-wide dynamic default for segment.ms, a node value for flush.ms.
  auto b = alter_broker_config(*base, true,
                               std::vector<alter_request>{{"log.roll.ms", alter_op::set, "60000"}});
  ASSERT_TRUE(b.ok()) << b.err().message;
  b = alter_broker_config(
      *b, false, std::vector<alter_request>{{"log.flush.interval.ms", alter_op::set, "100"}});
  ASSERT_TRUE(b.ok()) << b.err().message;
  config_map overrides;
  overrides.set("cleanup.policy", std::vector<std::string>{"compact"});

  auto d = describe_topic(*b, overrides);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(std::is_sorted(d->begin(), d->end(),
                             [](const auto& x, const auto& y) { return x.name < y.name; }));
  auto find = [&](const std::string& name) -> const described_config& {
    for (const auto& c : *d) {
      if (c.name == name) return c;
    }
    ADD_FAILURE() << name;
    return d->front();
  };
  const auto& policy = find("cleanup.policy");
  EXPECT_EQ(policy.value, "compact");
  EXPECT_EQ(policy.source, config_source::dynamic_topic_config);
  EXPECT_FALSE(policy.read_only);
  EXPECT_EQ(policy.config_type, 7);
  ASSERT_EQ(policy.synonyms.size(), 2u);
  EXPECT_EQ(policy.synonyms[1].name, "log.cleanup.policy");
  EXPECT_EQ(policy.synonyms[1].value, "delete");
  EXPECT_EQ(policy.synonyms[1].source, config_source::default_config);

  const auto& retention = find("retention.ms");
  EXPECT_EQ(retention.value, "5000");
  EXPECT_EQ(retention.source, config_source::static_broker_config);
  ASSERT_EQ(retention.synonyms.size(), 2u);
  EXPECT_EQ(retention.synonyms[0].name, "log.retention.ms");
  EXPECT_EQ(retention.synonyms[1].value, "604800000");

  const auto& segment_ms = find("segment.ms");
  EXPECT_EQ(segment_ms.value, "60000");
  EXPECT_EQ(segment_ms.source, config_source::dynamic_default_broker_config);
  EXPECT_EQ(find("flush.ms").source, config_source::dynamic_broker_config);
  EXPECT_EQ(find("flush.ms").value, "100");
  const auto& bytes = find("segment.bytes");
  EXPECT_EQ(bytes.source, config_source::default_config);
  EXPECT_TRUE(bytes.is_default);
  EXPECT_EQ(bytes.synonyms.size(), 1u);
  EXPECT_EQ(effective_topic_config(*b, overrides).segment_ms, 60000);

  auto only = describe_topic(*b, overrides, std::vector<std::string>{"retention.ms"});
  ASSERT_TRUE(only.ok());
  EXPECT_EQ(only->size(), 1u);
  expect_refused(describe_topic(*b, overrides, std::vector<std::string>{"nope"}), "nope");

  auto broker = describe_broker(*b, std::vector<std::string>{"log.retention.ms", "node.id"});
  ASSERT_TRUE(broker.ok());
  ASSERT_EQ(broker->size(), 2u);
  EXPECT_EQ((*broker)[0].name, "log.retention.ms");
  EXPECT_EQ((*broker)[0].source, config_source::static_broker_config);
  EXPECT_FALSE((*broker)[0].read_only);
  EXPECT_EQ((*broker)[1].name, "node.id");
  EXPECT_TRUE((*broker)[1].read_only);
  EXPECT_EQ((*broker)[1].source, config_source::default_config);
}

TEST(topic_config, describe_lists_every_setting_once) {
  broker_config b = defaults();
  auto topic = describe_topic(b, {});
  auto broker = describe_broker(b);
  ASSERT_TRUE(topic.ok() && broker.ok());
  EXPECT_EQ(broker->size(), all_settings().size());
  size_t topic_settings = 0;
  for (const auto& s : all_settings()) topic_settings += s.is_topic_setting() ? 1 : 0;
  EXPECT_EQ(topic->size(), topic_settings);
  for (const auto& d : *topic) {
    EXPECT_EQ(d.source, config_source::default_config) << d.name;
    ASSERT_EQ(d.synonyms.size(), 1u) << d.name;
    EXPECT_EQ(d.synonyms[0].name, find_topic_setting(d.name)->name);
    EXPECT_EQ(d.value, d.synonyms[0].value);
  }
}

// ---- Dynamic broker configs ---------------------------------------------------

// Expects Kafka's INVALID_REQUEST refusal of settings that cannot change at
// runtime, naming each of `keys`.
template <class R>
void expect_not_dynamic(const R& r, std::initializer_list<std::string> keys) {
  ASSERT_FALSE(r.ok()) << "accepted a static setting";
  EXPECT_EQ(r.code(), errc::invalid_argument) << r.err().message;
  EXPECT_NE(r.err().message.find("Cannot update these configs dynamically"), std::string::npos)
      << r.err().message;
  for (const auto& k : keys) EXPECT_NE(r.err().message.find(k), std::string::npos) << k;
}

TEST(broker_dynamic, which_settings_are_dynamic) {
  for (const char* key :
       {"log.retention.ms", "log.retention.bytes", "log.segment.bytes", "log.cleanup.policy",
        "message.max.bytes", "log.flush.interval.ms", "log.flush.interval.messages",
        "sluice.log.fsync.enable", "num.partitions", "auto.create.topics.enable", "max.connections",
        "group.min.session.timeout.ms", "group.max.session.timeout.ms",
        "log.retention.check.interval.ms"}) {
    ASSERT_NE(find_broker_setting(key), nullptr) << key;
    EXPECT_TRUE(find_broker_setting(key)->dynamic) << key;
  }
  // What is bound at start: sockets, directories, threads, the layout of
  // __consumer_offsets.
  for (const char* key : {"node.id", "listeners", "advertised.listeners", "log.dirs",
                          "num.io.threads", "socket.request.max.bytes", "fetch.max.bytes",
                          "queued.max.request.bytes", "sluice.request.read.timeout.ms",
                          "offsets.topic.num.partitions", "sluice.metrics.listener"}) {
    ASSERT_NE(find_broker_setting(key), nullptr) << key;
    EXPECT_FALSE(find_broker_setting(key)->dynamic) << key;
  }
  // Every broker default of a topic setting can change, like the topic's own.
  for (const auto& s : all_settings()) {
    if (s.is_topic_setting()) {
      EXPECT_TRUE(s.dynamic) << s.name;
    }
  }
}

TEST(broker_dynamic, static_settings_refused_as_invalid_request) {
  broker_config b = defaults();
  expect_not_dynamic(
      alter_broker_config(b, false, std::vector<alter_request>{{"log.dirs", alter_op::set, "/x"}}),
      {"log.dirs"});
  // Every static key of the request is named, and nothing else is applied.
  expect_not_dynamic(alter_broker_config(
                         b, true,
                         std::vector<alter_request>{{"log.retention.ms", alter_op::set, "1000"},
                                                    {"node.id", alter_op::set, "3"},
                                                    {"listeners", alter_op::remove, std::nullopt}}),
                     {"node.id", "listeners"});
  expect_not_dynamic(
      replace_broker_config(b, false, std::vector<config_entry>{{"num.io.threads", "4"}}),
      {"num.io.threads"});
  // A bad value of a dynamic setting is INVALID_CONFIG naming it.
  expect_refused(
      alter_broker_config(b, true, std::vector<alter_request>{{"log.roll.ms", alter_op::set, "0"}}),
      "log.roll.ms");
  expect_refused(
      replace_broker_config(b, false, std::vector<config_entry>{{"log.retention.ms", "soon"}}),
      "log.retention.ms");
  // An unknown key, and a topic key on the broker, are INVALID_CONFIG with a hint.
  auto unknown = alter_broker_config(
      b, false, std::vector<alter_request>{{"retention.ms", alter_op::set, "1"}});
  expect_refused(unknown, "retention.ms");
  EXPECT_NE(unknown.err().message.find("log.retention.ms"), std::string::npos)
      << unknown.err().message;
  // Settings valid alone but not together: named, refused.
  expect_refused(alter_broker_config(b, false,
                                     std::vector<alter_request>{
                                         {"group.min.session.timeout.ms", alter_op::set, "9000"},
                                         {"group.max.session.timeout.ms", alter_op::set, "8000"}}),
                 "group.min.session.timeout.ms");
}

TEST(broker_dynamic, levels_and_precedence) {
  auto stat = load({"--log.retention.ms", "5000", "--num.partitions", "3"});
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ(stat->topic_defaults.retention_ms, 5000);

  // The cluster-wide default wins over the static value...
  auto b =
      alter_broker_config(*stat, true,
                          std::vector<alter_request>{{"log.retention.ms", alter_op::set, "4000"},
                                                     {"num.partitions", alter_op::set, "4"},
                                                     {"max.connections", alter_op::set, "7"}});
  ASSERT_TRUE(b.ok()) << b.err().message;
  EXPECT_EQ(b->topic_defaults.retention_ms, 4000);
  EXPECT_EQ(b->num_partitions, 4);
  EXPECT_EQ(b->max_connections, 7);
  EXPECT_TRUE(b->dynamic_broker_values.empty());
  // ...and this node's value wins over both.
  b = alter_broker_config(*b, false,
                          std::vector<alter_request>{{"log.retention.ms", alter_op::set, "3000"}});
  ASSERT_TRUE(b.ok()) << b.err().message;
  EXPECT_EQ(b->topic_defaults.retention_ms, 3000);
  EXPECT_EQ(b->num_partitions, 4);
  EXPECT_EQ(b->static_values, stat->static_values);

  auto d = describe_broker(*b, std::vector<std::string>{"log.retention.ms"});
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->size(), 1u);
  const auto& r = (*d)[0];
  EXPECT_EQ(r.value, "3000");
  EXPECT_EQ(r.source, config_source::dynamic_broker_config);
  EXPECT_FALSE(r.read_only);
  ASSERT_EQ(r.synonyms.size(), 4u);
  const config_source chain[] = {
      config_source::dynamic_broker_config, config_source::dynamic_default_broker_config,
      config_source::static_broker_config, config_source::default_config};
  const char* values[] = {"3000", "4000", "5000", "604800000"};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r.synonyms[i].name, "log.retention.ms");
    EXPECT_EQ(r.synonyms[i].source, chain[i]) << i;
    EXPECT_EQ(r.synonyms[i].value, values[i]) << i;
  }
  // A topic without its own retention.ms shows where its value comes from.
  auto t = describe_topic(*b, {}, std::vector<std::string>{"retention.ms"});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)[0].value, "3000");
  EXPECT_EQ((*t)[0].source, config_source::dynamic_broker_config);
  EXPECT_EQ((*t)[0].synonyms[0].name, "log.retention.ms");
  EXPECT_EQ((*t)[0].synonyms.size(), 4u);

  // The default resource lists only what is set there, without the node level.
  auto defaults_only = describe_broker_defaults(*b);
  ASSERT_TRUE(defaults_only.ok());
  std::vector<std::string> names;
  for (const auto& c : *defaults_only) {
    names.push_back(c.name);
    EXPECT_EQ(c.source, config_source::dynamic_default_broker_config) << c.name;
    for (const auto& syn : c.synonyms) {
      EXPECT_NE(syn.source, config_source::dynamic_broker_config) << c.name;
    }
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"log.retention.ms", "max.connections", "num.partitions"}));
  EXPECT_TRUE(describe_broker_defaults(*stat)->empty());

  // DELETE at the node falls back to the default level, then to the static value.
  b = alter_broker_config(
      *b, false, std::vector<alter_request>{{"log.retention.ms", alter_op::remove, std::nullopt}});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->topic_defaults.retention_ms, 4000);
  b = alter_broker_config(
      *b, true, std::vector<alter_request>{{"log.retention.ms", alter_op::remove, std::nullopt}});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->topic_defaults.retention_ms, 5000);
  EXPECT_EQ(b->num_partitions, 4);
}

TEST(broker_dynamic, append_subtract_on_lists_and_validate) {
  broker_config b = defaults();
  auto next = alter_broker_config(
      b, false, std::vector<alter_request>{{"log.cleanup.policy", alter_op::append, "compact"}});
  ASSERT_TRUE(next.ok()) << next.err().message;
  EXPECT_TRUE(next->topic_defaults.cleanup_compact && next->topic_defaults.cleanup_delete);
  // At the cluster-wide default, append starts from the value without the
  // node's own: the schema default "delete", not the node's "delete,compact".
  auto dflt = alter_broker_config(
      *next, true, std::vector<alter_request>{{"log.cleanup.policy", alter_op::append, "compact"}});
  ASSERT_TRUE(dflt.ok()) << dflt.err().message;
  auto sub = alter_broker_config(
      *dflt, true,
      std::vector<alter_request>{{"log.cleanup.policy", alter_op::subtract, "delete"}});
  ASSERT_TRUE(sub.ok()) << sub.err().message;
  EXPECT_EQ(
      std::get<std::vector<std::string>>(*sub->dynamic_default_values.find("log.cleanup.policy")),
      (std::vector<std::string>{"compact"}));
  // The node value (delete,compact) still wins.
  EXPECT_TRUE(sub->topic_defaults.cleanup_delete);
  // Emptying the list, or append on a non-list, is refused naming the key.
  expect_refused(alter_broker_config(*sub, true,
                                     std::vector<alter_request>{
                                         {"log.cleanup.policy", alter_op::subtract, "compact"}}),
                 "log.cleanup.policy");
  auto node_sub = alter_broker_config(
      *sub, false,
      std::vector<alter_request>{{"log.cleanup.policy", alter_op::subtract, "delete"}});
  ASSERT_TRUE(node_sub.ok()) << node_sub.err().message;
  EXPECT_FALSE(node_sub->topic_defaults.cleanup_delete);
  expect_refused(
      alter_broker_config(b, true,
                          std::vector<alter_request>{{"num.partitions", alter_op::append, "2"}}),
      "num.partitions");
}

TEST(broker_dynamic, replace_sets_the_whole_level) {
  broker_config b = defaults();
  auto one = replace_broker_config(b, true,
                                   std::vector<config_entry>{{"log.retention.ms", "1000"},
                                                             {"log.segment.bytes", "1048576"},
                                                             {"num.partitions", std::nullopt}});
  ASSERT_TRUE(one.ok()) << one.err().message;
  EXPECT_EQ(one->dynamic_default_values.size(), 2u);
  auto node =
      replace_broker_config(*one, false, std::vector<config_entry>{{"log.retention.ms", "2000"}});
  ASSERT_TRUE(node.ok());
  // The default level is untouched by a change of the node level...
  EXPECT_EQ(node->dynamic_default_values, one->dynamic_default_values);
  EXPECT_EQ(node->topic_defaults.retention_ms, 2000);
  // ...and replacing the default level drops what the new set leaves out.
  auto two = replace_broker_config(*node, true,
                                   std::vector<config_entry>{{"log.segment.bytes", "2097152"}});
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->dynamic_default_values.size(), 1u);
  EXPECT_EQ(two->dynamic_default_values.find("log.retention.ms"), nullptr);
  EXPECT_EQ(two->topic_defaults.segment_bytes, 2097152);
  EXPECT_EQ(two->dynamic_broker_values, node->dynamic_broker_values);
  expect_refused(
      replace_broker_config(
          b, true, std::vector<config_entry>{{"log.retention.ms", "1"}, {"log.retention.ms", "2"}}),
      "log.retention.ms");
}

// ---- The cluster's settings ---------------------------------------------------

// Expects a refusal naming `key` whose message also holds `text`.
template <class R>
void expect_refused_with(const R& r, const std::string& key, const std::string& text) {
  expect_refused(r, key);
  if (!r.ok()) {
    EXPECT_NE(r.err().message.find(text), std::string::npos) << r.err().message;
  }
}

// A cluster member's command line with the given extra arguments.
result<broker_config> load_member(std::vector<std::string> extra) {
  std::vector<std::string> args = {"--node.id", "1", "--sluice.etcd.endpoints",
                                   "http://127.0.0.1:2379"};
  args.insert(args.end(), extra.begin(), extra.end());
  return load(std::move(args));
}

TEST(cluster_config, defaults_are_a_single_node) {
  broker_config b = defaults();
  EXPECT_FALSE(b.rack.has_value());
  EXPECT_TRUE(b.etcd_endpoints.empty());
  EXPECT_FALSE(b.cluster_mode());
  EXPECT_EQ(b.etcd_prefix, "/sluice/");
  EXPECT_EQ(b.etcd_session_timeout_ms, 10000);
  EXPECT_EQ(b.etcd_lease_ttl_seconds(), 10);
  // The etcd client's default, which its retry budget is sized for.
  EXPECT_EQ(b.etcd_request_timeout_ms, limits::default_etcd_request_timeout_ms);
  EXPECT_TRUE(b.auto_leader_rebalance_enable);
  EXPECT_EQ(b.leader_imbalance_per_broker_percentage, 10);
  EXPECT_EQ(b.leader_imbalance_check_interval_seconds, 300);
  EXPECT_EQ(b.offsets_topic_replication_factor, 3);
  EXPECT_EQ(b.default_replication_factor, 1);
  // A single node may listen on and advertise 0.0.0.0, and leave node.id
  // at 0, as before.
  EXPECT_TRUE(load({"--listeners", "0.0.0.0:9092"}).ok());
}

TEST(cluster_config, rack_and_leadership_settings) {
  auto b = load({"--broker.rack", " eu-west-1a ", "--auto.leader.rebalance.enable", "false",
                 "--leader.imbalance.per.broker.percentage", "0",
                 "--leader.imbalance.check.interval.seconds", "1",
                 "--offsets.topic.replication.factor", "1"});
  ASSERT_TRUE(b.ok()) << b.err().message;
  EXPECT_EQ(b->rack, "eu-west-1a");
  EXPECT_FALSE(b->auto_leader_rebalance_enable);
  EXPECT_EQ(b->leader_imbalance_per_broker_percentage, 0);
  EXPECT_EQ(b->leader_imbalance_check_interval_seconds, 1);
  EXPECT_EQ(b->offsets_topic_replication_factor, 1);
  EXPECT_FALSE(load({"--broker.rack", ""})->rack.has_value());
  EXPECT_EQ(load({"--leader.imbalance.per.broker.percentage", "100"})
                ->leader_imbalance_per_broker_percentage,
            100);
  EXPECT_EQ(
      load({"--offsets.topic.replication.factor", std::to_string(limits::max_replication_factor)})
          ->offsets_topic_replication_factor,
      limits::max_replication_factor);
  expect_refused(load({"--leader.imbalance.per.broker.percentage", "-1"}),
                 "leader.imbalance.per.broker.percentage");
  expect_refused(load({"--leader.imbalance.per.broker.percentage", "101"}),
                 "leader.imbalance.per.broker.percentage");
  expect_refused(load({"--leader.imbalance.check.interval.seconds", "0"}),
                 "leader.imbalance.check.interval.seconds");
  expect_refused(load({"--auto.leader.rebalance.enable", "1"}), "auto.leader.rebalance.enable");
  expect_refused(load({"--offsets.topic.replication.factor", "0"}),
                 "offsets.topic.replication.factor");
  expect_refused(load({"--offsets.topic.replication.factor",
                       std::to_string(limits::max_replication_factor + 1)}),
                 "offsets.topic.replication.factor");
  expect_refused(load({"--broker.rack", "a\tb"}), "broker.rack");
}

// The transaction coordinator's settings: Kafka's names and defaults, and
// Kafka's lower bound of 1 for each; the topic layout ones are bounded by
// Sluice's limits.
TEST(transaction_config, kafka_defaults_and_bounds) {
  auto d = load({});
  ASSERT_TRUE(d.ok()) << d.err().message;
  EXPECT_EQ(d->transaction_state_log_num_partitions, 50);
  EXPECT_EQ(d->transaction_state_log_replication_factor, 3);
  EXPECT_EQ(d->transaction_state_log_min_isr, 2);
  EXPECT_EQ(d->transaction_state_log_segment_bytes, 100 * 1024 * 1024);
  EXPECT_EQ(d->transaction_max_timeout_ms, 900000);
  EXPECT_EQ(d->transactional_id_expiration_ms, 604800000);
  EXPECT_EQ(d->transaction_abort_interval_ms, 10000);
  EXPECT_EQ(d->transactional_id_removal_interval_ms, 3600000);
  // The same defaults as limits.h names them, where the coordinator's own
  // defaults (txn::coordinator_config) come from.
  EXPECT_EQ(d->transaction_state_log_num_partitions, limits::default_transaction_state_partitions);
  EXPECT_EQ(d->transaction_state_log_replication_factor, limits::default_transaction_state_replication_factor);
  EXPECT_EQ(d->transaction_state_log_min_isr, limits::default_transaction_state_min_isr);
  EXPECT_EQ(d->transaction_max_timeout_ms, limits::default_transaction_max_timeout_ms);
  EXPECT_EQ(d->transactional_id_expiration_ms, limits::default_transactional_id_expiration_ms);
  EXPECT_EQ(d->transaction_abort_interval_ms, limits::default_transaction_abort_interval_ms);
  EXPECT_EQ(d->transactional_id_removal_interval_ms, limits::default_transactional_id_removal_interval_ms);
  // Share groups: the schema's literal defaults are limits.h's.
  EXPECT_EQ(d->group_share_record_lock_duration_ms, limits::default_share_record_lock_duration_ms);
  EXPECT_EQ(d->group_share_delivery_count_limit, limits::default_share_delivery_count_limit);
  EXPECT_EQ(d->group_share_partition_max_record_locks, limits::default_share_max_record_locks);
  EXPECT_EQ(d->group_share_session_timeout_ms, limits::default_share_session_timeout_ms);
  EXPECT_EQ(d->group_share_heartbeat_interval_ms, limits::default_share_heartbeat_interval_ms);
  EXPECT_EQ(d->group_share_max_size, limits::default_share_group_max_size);
  EXPECT_EQ(d->share_state_topic_num_partitions, limits::default_share_state_partitions);
  EXPECT_EQ(d->share_state_topic_replication_factor, limits::default_share_state_replication_factor);
  EXPECT_EQ(d->share_state_topic_min_isr, limits::default_share_state_min_isr);
  EXPECT_EQ(d->share_state_topic_segment_bytes, limits::default_share_state_segment_bytes);

  auto b = load({"--transaction.state.log.num.partitions", "3",
                 "--transaction.state.log.replication.factor", "1",
                 "--transaction.state.log.min.isr", "1",
                 "--transaction.state.log.segment.bytes", "1048576",
                 "--transaction.max.timeout.ms", "60000",
                 "--transactional.id.expiration.ms", "3600000",
                 "--transaction.abort.timed.out.transaction.cleanup.interval.ms", "200",
                 "--transaction.remove.expired.transaction.cleanup.interval.ms", "1"});
  ASSERT_TRUE(b.ok()) << b.err().message;
  EXPECT_EQ(b->transaction_state_log_num_partitions, 3);
  EXPECT_EQ(b->transaction_state_log_replication_factor, 1);
  EXPECT_EQ(b->transaction_state_log_min_isr, 1);
  EXPECT_EQ(b->transaction_state_log_segment_bytes, 1048576);
  EXPECT_EQ(b->transaction_max_timeout_ms, 60000);
  EXPECT_EQ(b->transactional_id_expiration_ms, 3600000);
  EXPECT_EQ(b->transaction_abort_interval_ms, 200);
  EXPECT_EQ(b->transactional_id_removal_interval_ms, 1);
  // From a TOML file as tables, like any dotted key.
  auto t = parse_toml_config("[transaction]\nmax.timeout.ms = 1000\n", "t.toml");
  ASSERT_TRUE(t.ok()) << t.err().message;
  auto bt = make_broker_config(*t);
  ASSERT_TRUE(bt.ok()) << bt.err().message;
  EXPECT_EQ(bt->transaction_max_timeout_ms, 1000);

  for (const char* key : {"transaction.state.log.num.partitions", "transaction.state.log.replication.factor",
                          "transaction.state.log.min.isr", "transaction.max.timeout.ms",
                          "transactional.id.expiration.ms",
                          "transaction.abort.timed.out.transaction.cleanup.interval.ms",
                          "transaction.remove.expired.transaction.cleanup.interval.ms"}) {
    SCOPED_TRACE(key);
    expect_refused(load({std::string("--") + key, "0"}), key);
    expect_refused(load({std::string("--") + key, "-1"}), key);
    expect_refused(load({std::string("--") + key, "x"}), key);
  }
  // int32 settings: Kafka's INT.
  expect_refused(load({"--transaction.max.timeout.ms", "2147483648"}), "transaction.max.timeout.ms");
  expect_refused(load({"--transactional.id.expiration.ms", "2147483648"}), "transactional.id.expiration.ms");
  EXPECT_EQ(load({"--transaction.max.timeout.ms", "2147483647"})->transaction_max_timeout_ms, 2147483647);
  // The topic's layout: within what a topic may be created with.
  expect_refused(load({"--transaction.state.log.num.partitions",
                       std::to_string(limits::max_partitions_per_topic + 1)}),
                 "transaction.state.log.num.partitions");
  expect_refused(load({"--transaction.state.log.replication.factor",
                       std::to_string(limits::max_replication_factor + 1)}),
                 "transaction.state.log.replication.factor");
  expect_refused(load({"--transaction.state.log.segment.bytes",
                       std::to_string(limits::min_segment_bytes - 1)}),
                 "transaction.state.log.segment.bytes");
  // None of them changes at runtime, as in Kafka.
  for (const auto& s : all_settings()) {
    if (s.name.starts_with("transaction")) {
      EXPECT_FALSE(s.dynamic) << s.name;
    }
  }
}

TEST(cluster_config, endpoint_lists_are_parsed_and_normalised) {
  auto b = load({"--node.id", "7", "--sluice.etcd.endpoints",
                 " http://etcd-1.example:2379 ,HTTP://ETCD-2.Example:02379/, "
                 "http://10.0.0.3:2379,http://[0:0::1]:2380,http://etcd_4:1"});
  ASSERT_TRUE(b.ok()) << b.err().message;
  EXPECT_TRUE(b->cluster_mode());
  EXPECT_EQ(b->node_id, 7);
  EXPECT_EQ(
      b->etcd_endpoints,
      (std::vector<std::string>{"http://etcd-1.example:2379", "http://etcd-2.example:2379",
                                "http://10.0.0.3:2379", "http://[::1]:2380", "http://etcd_4:1"}));
  // The value as given stays what DescribeConfigs shows.
  EXPECT_NE(b->static_values.find("sluice.etcd.endpoints"), nullptr);

  std::string most;
  for (size_t i = 0; i < limits::max_etcd_endpoints; ++i) {
    most += (i == 0 ? "http://e" : ",http://e") + std::to_string(i) + ":2379";
  }
  auto full = load({"--node.id", "1", "--sluice.etcd.endpoints", most});
  ASSERT_TRUE(full.ok()) << full.err().message;
  EXPECT_EQ(full->etcd_endpoints.size(), limits::max_etcd_endpoints);
  const std::string many = most + ",http://one-more:2379";
  expect_refused_with(load({"--node.id", "1", "--sluice.etcd.endpoints", many}),
                      "sluice.etcd.endpoints", "17 items, expected 0 to 16");
}

TEST(cluster_config, bad_endpoints_refused_with_their_reason) {
  const std::string key = "sluice.etcd.endpoints";
  auto refused = [&](const std::string& list, const std::string& text) {
    SCOPED_TRACE(list);
    expect_refused_with(load({"--node.id", "1", "--" + key, list}), key, text);
  };
  refused("https://etcd:2379", "TLS to etcd is not supported yet");
  refused("http://a:2379,HTTPS://b:2379", "TLS to etcd is not supported yet");
  refused("etcd:2379", "not an http://host:port URL");
  refused("grpc://etcd:2379", "not an http://host:port URL");
  refused("http://etcd", "no port");
  refused("http://[::1]", "no port");
  refused("http://etcd:", "not in 1..65535");
  refused("http://etcd:0", "not in 1..65535");
  refused("http://etcd:65536", "not in 1..65535");
  refused("http://etcd:-1", "not in 1..65535");
  refused("http://etcd:23x9", "not in 1..65535");
  refused("http://etcd:2379/v3", "without a path");
  refused("http://user@etcd:2379", "without a path, query or user");
  refused("http://etcd:2379?x=1", "without a path");
  refused("http://:2379", "not a host name or IP address");
  refused("http://et cd:2379", "not a host name or IP address");
  refused("http://etcd..lan:2379", "not a host name or IP address");
  refused("http://-etcd:2379", "not a host name or IP address");
  refused("http://" + std::string(64, 'a') + ":2379", "not a host name or IP address");
  refused("http://10.0.0.256:2379", "not an IPv4 address");
  refused("http://10.0.1:2379", "not an IPv4 address");
  refused("http://[::g]:2379", "not an IPv6 address");
  refused("http://::1:2379", "brackets");
  refused("http://0.0.0.0:2379", "no address to connect to");
  refused("http://[::]:2379", "no address to connect to");
  // The list's own shape: no empty item (a trailing comma makes one), no
  // endpoint twice, however it is spelled.
  refused("http://a:2379,", "empty list item");
  refused("http://a:2379,,http://b:2379", "empty list item");
  refused("http://a:2379,http://a:2379", "listed twice");
  refused("http://a:2379,HTTP://A:2379/", "listed twice");
  refused("http://[::1]:2379,http://[0::1]:02379", "listed twice");
}

TEST(cluster_config, prefix_rules) {
  const std::string key = "sluice.etcd.prefix";
  for (const std::string ok : {"/sluice/", "//", "/prod/sluice-1/", "/a_b.c~d/"}) {
    auto b = load({"--" + key, ok});
    ASSERT_TRUE(b.ok()) << ok << ": " << b.err().message;
    EXPECT_EQ(b->etcd_prefix, ok);
  }
  const std::string longest = "/" + std::string(limits::max_etcd_prefix_bytes - 2, 'p') + "/";
  EXPECT_EQ(load({"--" + key, longest})->etcd_prefix, longest);
  expect_refused_with(load({"--" + key, "/" + longest}), key, "2 to 128 characters");
  expect_refused_with(load({"--" + key, "/"}), key, "2 to 128 characters");
  expect_refused_with(load({"--" + key, ""}), key, "2 to 128 characters");
  expect_refused_with(load({"--" + key, "sluice/"}), key, "start and end with '/'");
  expect_refused_with(load({"--" + key, "/sluice"}), key, "start and end with '/'");
  expect_refused_with(load({"--" + key, "/my cluster/"}), key, "printable ASCII without spaces");
  expect_refused_with(load({"--" + key, "/caf\xc3\xa9/"}), key, "printable ASCII without spaces");
}

TEST(cluster_config, timeouts) {
  auto b = load_member(
      {"--sluice.etcd.session.timeout.ms", "2500", "--sluice.etcd.request.timeout.ms", "100"});
  ASSERT_TRUE(b.ok()) << b.err().message;
  EXPECT_EQ(b->etcd_session_timeout_ms, 2500);
  EXPECT_EQ(b->etcd_lease_ttl_seconds(), 3);  // rounded up
  EXPECT_EQ(b->etcd_request_timeout_ms, 100);
  auto longest = load(
      {"--sluice.etcd.session.timeout.ms", "300000", "--sluice.etcd.request.timeout.ms", "60000"});
  ASSERT_TRUE(longest.ok()) << longest.err().message;
  EXPECT_EQ(longest->etcd_lease_ttl_seconds(), 300);
  expect_refused(load({"--sluice.etcd.session.timeout.ms", "1999"}),
                 "sluice.etcd.session.timeout.ms");
  expect_refused(load({"--sluice.etcd.session.timeout.ms", "300001"}),
                 "sluice.etcd.session.timeout.ms");
  expect_refused(load({"--sluice.etcd.request.timeout.ms", "99"}),
                 "sluice.etcd.request.timeout.ms");
  expect_refused(load({"--sluice.etcd.request.timeout.ms", "60001"}),
                 "sluice.etcd.request.timeout.ms");
  // In a cluster one request may not outlast the session; a single node
  // does not use either.
  expect_refused_with(load_member({"--sluice.etcd.session.timeout.ms", "2000"}),
                      "sluice.etcd.request.timeout.ms", "not below sluice.etcd.session.timeout.ms");
  expect_refused(load_member({"--sluice.etcd.request.timeout.ms", "10000"}),
                 "sluice.etcd.request.timeout.ms");
  EXPECT_TRUE(load({"--sluice.etcd.session.timeout.ms", "2000"}).ok());
}

TEST(cluster_config, cross_checks_in_cluster_mode) {
  auto no_id = load({"--sluice.etcd.endpoints", "http://127.0.0.1:2379"});
  ASSERT_FALSE(no_id.ok());
  EXPECT_EQ(no_id.code(), errc::invalid_config);
  EXPECT_EQ(no_id.err().message,
            "sluice.etcd.endpoints is set: node.id must be given (each broker of a cluster "
            "needs its own)");
  // Given explicitly, even as 0, it is this broker's own.
  EXPECT_TRUE(load({"--sluice.etcd.endpoints", "http://127.0.0.1:2379", "--node.id", "0"}).ok());

  expect_refused_with(load_member({"--listeners", "0.0.0.0:9092"}), "advertised.listeners",
                      "advertised.listeners is unset");
  expect_refused_with(load_member({"--listeners", "PLAINTEXT://:9092"}), "advertised.listeners",
                      "other brokers and clients connect to it");
  expect_refused_with(
      load_member({"--listeners", "0.0.0.0:9092", "--advertised.listeners", "0.0.0.0:9092"}),
      "advertised.listeners", "0.0.0.0:9092 cannot be advertised");
  expect_refused(load_member({"--advertised.listeners", "[::]:9092"}), "advertised.listeners");
  auto ok = load_member({"--listeners", "0.0.0.0:9092", "--advertised.listeners", "b1.lan:9092"});
  ASSERT_TRUE(ok.ok()) << ok.err().message;
  EXPECT_EQ(format_host_port(ok->advertised_listener), "b1.lan:9092");
}

TEST(cluster_config, toml_file_sets_them) {
  temp_dir dir;
  dir.write("cluster.toml", R"(
node.id = 2
broker.rack = "rack-b"
listeners = "PLAINTEXT://0.0.0.0:9092"
advertised.listeners = "PLAINTEXT://broker-2.lan:9092"
auto.leader.rebalance.enable = false
offsets.topic.replication.factor = 5

[sluice.etcd]
endpoints = ["http://etcd-1.lan:2379", "http://etcd-2.lan:2379"]
prefix = "/prod/"
session.timeout.ms = 15000
request.timeout.ms = 2000

[leader.imbalance]
per.broker.percentage = 20
check.interval.seconds = 60
)");
  auto b = load({"--config", dir.file("cluster.toml")});
  ASSERT_TRUE(b.ok()) << b.err().message;
  EXPECT_EQ(b->node_id, 2);
  EXPECT_EQ(b->rack, "rack-b");
  EXPECT_TRUE(b->cluster_mode());
  EXPECT_EQ(b->etcd_endpoints,
            (std::vector<std::string>{"http://etcd-1.lan:2379", "http://etcd-2.lan:2379"}));
  EXPECT_EQ(b->etcd_prefix, "/prod/");
  EXPECT_EQ(b->etcd_session_timeout_ms, 15000);
  EXPECT_EQ(b->etcd_lease_ttl_seconds(), 15);
  EXPECT_EQ(b->etcd_request_timeout_ms, 2000);
  EXPECT_FALSE(b->auto_leader_rebalance_enable);
  EXPECT_EQ(b->leader_imbalance_per_broker_percentage, 20);
  EXPECT_EQ(b->leader_imbalance_check_interval_seconds, 60);
  EXPECT_EQ(b->offsets_topic_replication_factor, 5);
  EXPECT_EQ(format_host_port(b->advertised_listener), "broker-2.lan:9092");

  // One comma-separated string works as in a list, and node.id from the
  // file counts as given.
  dir.write("string.toml",
            "node.id = 3\n\"sluice.etcd.endpoints\" = \"http://e1:2379, http://e2:2379\"\n");
  auto s = load({"--config", dir.file("string.toml")});
  ASSERT_TRUE(s.ok()) << s.err().message;
  EXPECT_EQ(s->etcd_endpoints.size(), 2u);
  // The file's refusals name the key and the line.
  dir.write("tls.toml", "node.id = 1\nsluice.etcd.endpoints = [\"https://e1:2379\"]\n");
  expect_refused_with(load({"--config", dir.file("tls.toml")}), "tls.toml:2",
                      "TLS to etcd is not supported yet");
  dir.write("short.toml", "offsets.topic.replication.factor = \"3\"\n");
  expect_refused(load({"--config", dir.file("short.toml")}), "offsets.topic.replication.factor");
}

TEST(cluster_config, static_and_listed_in_help) {
  const std::string help = render_help();
  broker_config b = defaults();
  for (const char* key :
       {"broker.rack", "sluice.etcd.endpoints", "sluice.etcd.prefix",
        "sluice.etcd.session.timeout.ms", "sluice.etcd.request.timeout.ms",
        "auto.leader.rebalance.enable", "leader.imbalance.per.broker.percentage",
        "leader.imbalance.check.interval.seconds", "offsets.topic.replication.factor"}) {
    SCOPED_TRACE(key);
    const setting* s = find_broker_setting(key);
    ASSERT_NE(s, nullptr);
    EXPECT_FALSE(s->dynamic);
    EXPECT_NE(help.find("--" + std::string(key) + " "), std::string::npos);
    expect_not_dynamic(
        alter_broker_config(b, false, std::vector<alter_request>{{key, alter_op::set, "1"}}),
        {key});
  }
  EXPECT_NE(help.find("--offsets.topic.replication.factor int16"), std::string::npos);
  EXPECT_NE(help.find("default: \"/sluice/\""), std::string::npos);
  EXPECT_NE(help.find("range: 2000..300000"), std::string::npos);
  EXPECT_NE(help.find("min(this, live brokers)"), std::string::npos);
  EXPECT_NE(help.find("checked against the live brokers"), std::string::npos);
}

// ---- Persisted overrides ------------------------------------------------------

config_map sample_overrides() {
  config_map m;
  m.set("retention.ms", int64_t{86400000});
  m.set("cleanup.policy", std::vector<std::string>{"compact", "delete"});
  m.set("min.cleanable.dirty.ratio", 0.1);
  m.set("message.timestamp.type", std::string("LogAppendTime"));
  m.set("sluice.fsync.enable", false);
  return m;
}

TEST(overrides_file, round_trip) {
  temp_dir dir;
  auto& fs = io::filesystem::posix();
  const std::string path = dir.file("orders.config");
  config_map m = sample_overrides();
  ASSERT_TRUE(write_overrides_file(fs, path, overrides_kind::topic, m).ok());
  auto back = read_overrides_file(fs, path, overrides_kind::topic);
  ASSERT_TRUE(back.ok()) << back.err().message;
  EXPECT_EQ(*back, m);
  // Rewriting replaces the file.
  m.erase("retention.ms");
  ASSERT_TRUE(write_overrides_file(fs, path, overrides_kind::topic, m).ok());
  EXPECT_EQ(*read_overrides_file(fs, path, overrides_kind::topic), m);
  ASSERT_TRUE(write_overrides_file(fs, path, overrides_kind::topic, {}).ok());
  EXPECT_TRUE(read_overrides_file(fs, path, overrides_kind::topic)->empty());
  EXPECT_EQ(read_overrides_file(fs, dir.file("absent"), overrides_kind::topic).code(),
            errc::not_found);
  // Broker-level files hold broker keys.
  config_map bm;
  bm.set("log.retention.ms", int64_t{1});
  EXPECT_EQ(*parse_overrides(overrides_kind::broker,
                             serialize_overrides(overrides_kind::broker, bm), "x"),
            bm);
}

TEST(overrides_file, text_format) {
  config_map m;
  m.set("retention.ms", int64_t{86400000});
  m.set("cleanup.policy", std::vector<std::string>{"compact", "delete"});
  // The example in docs/configuration.md, byte for byte.
  EXPECT_EQ(serialize_overrides(overrides_kind::topic, m),
            "sluice-config-overrides 1 topic\n"
            "cleanup.policy=compact,delete\n"
            "retention.ms=86400000\n"
            "crc32c=50d7f792\n");
}

TEST(overrides_file, corrupt_file_errors) {
  const std::string good = serialize_overrides(overrides_kind::topic, sample_overrides());
  auto expect_corrupt = [](const std::string& text, const std::string& words) {
    auto r = parse_overrides(overrides_kind::topic, text, "t.config");
    ASSERT_FALSE(r.ok()) << "accepted: " << text;
    EXPECT_EQ(r.code(), errc::corrupt_data);
    EXPECT_NE(r.err().message.find("t.config:"), std::string::npos) << r.err().message;
    EXPECT_NE(r.err().message.find(words), std::string::npos) << r.err().message;
  };
  // Every truncation of the file is refused.
  for (size_t n = 0; n < good.size(); ++n) {
    auto r = parse_overrides(overrides_kind::topic, good.substr(0, n), "t.config");
    EXPECT_FALSE(r.ok()) << "accepted a file cut at " << n;
  }
  // A flipped byte in the body is a checksum mismatch.
  std::string flipped = good;
  flipped[good.find("86400000")] = '9';
  expect_corrupt(flipped, "checksum mismatch");
  // A valid checksum over bad contents still names the line and the key.
  auto sealed = [](std::string body) {
    std::string out = body;
    char buf[9];
    std::snprintf(buf, sizeof buf, "%08x", crc32c(body.data(), body.size()));
    return out + "crc32c=" + buf + "\n";
  };
  expect_corrupt(sealed("sluice-config-overrides 1 topic\nretention.ms=soon\n"), "retention.ms");
  expect_corrupt(sealed("sluice-config-overrides 1 topic\nretention.ms=soon\n"), ":2:");
  expect_corrupt(sealed("sluice-config-overrides 1 topic\nbogus.key=1\n"), "bogus.key");
  expect_corrupt(sealed("sluice-config-overrides 1 topic\nno equals sign\n"), "key=value");
  expect_corrupt(sealed("sluice-config-overrides 1 topic\nsegment.ms=5\nsegment.ms=6\n"),
                 "set twice");
  expect_corrupt(sealed("sluice-config-overrides 2 topic\n"), "header");
  EXPECT_TRUE(
      parse_overrides(overrides_kind::topic, sealed("sluice-config-overrides 1 topic\n"), "t")
          .ok());
  EXPECT_FALSE(
      parse_overrides(overrides_kind::broker, sealed("sluice-config-overrides 1 topic\n"), "t")
          .ok());
}

}  // namespace
}  // namespace sluice::config
