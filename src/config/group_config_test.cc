// The group keys (GROUP config resources): their table, validation against
// the broker's bounds, IncrementalAlterConfigs and AlterConfigs on a group,
// DescribeConfigs of a group, the typed views, and the group configs file.

#include "config/group_config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/crc32c.h"
#include "base/limits.h"
#include "config/overrides_file.h"

namespace sluice::config {
namespace {

broker_config defaults() {
  auto b = make_broker_config({});
  EXPECT_TRUE(b.ok()) << b.err().message;
  return std::move(b).value();
}

alter_request set(std::string key, std::string value) {
  return {std::move(key), alter_op::set, std::move(value)};
}
alter_request del(std::string key) {
  return {std::move(key), alter_op::remove, std::nullopt};
}

template <class R>
void expect_refused(const R& r, const std::string& key, const std::string& words = "") {
  ASSERT_FALSE(r.ok()) << "accepted, expected a refusal naming " << key;
  EXPECT_EQ(r.code(), errc::invalid_config) << r.err().message;
  EXPECT_NE(r.err().message.find(key), std::string::npos) << r.err().message;
  if (!words.empty()) {
    EXPECT_NE(r.err().message.find(words), std::string::npos) << r.err().message;
  }
}

// ---- The table --------------------------------------------------------------

TEST(GroupConfig, EveryKeyHasKafkasNameTypeAndDefault) {
  const std::vector<std::pair<std::string, std::string>> want = {
      {"share.auto.offset.reset", "latest"},
      {"share.record.lock.duration.ms", "30000"},
      {"share.delivery.count.limit", "5"},
      {"share.isolation.level", "read_uncommitted"},
      {"share.session.timeout.ms", "45000"},
      {"share.heartbeat.interval.ms", "5000"},
      {"errors.deadletterqueue.topic.name", ""},
      {"errors.deadletterqueue.copy.record.enable", "false"},
      {"consumer.session.timeout.ms", "45000"},
      {"consumer.heartbeat.interval.ms", "5000"},
  };
  ASSERT_EQ(all_group_settings().size(), want.size());
  const auto b = defaults();
  for (const auto& [key, def] : want) {
    const group_setting* g = find_group_setting(key);
    ASSERT_NE(g, nullptr) << key;
    const auto inherited = inherited_value(b, *g);
    EXPECT_EQ(format_value(inherited.value), def) << key;
    // Sluice's schema has no group.share.* / group.consumer.* setting yet:
    // every inherited value is the key's own default.
    EXPECT_EQ(inherited.source, config_source::default_config) << key;
    EXPECT_FALSE(g->row.doc.empty()) << key;
  }
  EXPECT_EQ(find_group_setting("retention.ms"), nullptr);
  EXPECT_EQ(find_group_setting("group.share.record.lock.duration.ms"), nullptr);
}

TEST(GroupConfig, BoundsAreKafkasDefaultsWhileTheBrokerHasNoSetting) {
  const auto b = defaults();
  auto bounds = [&](const char* key) { return value_bounds(b, *find_group_setting(key)); };
  EXPECT_EQ(bounds("share.record.lock.duration.ms").min, limits::min_share_record_lock_duration_ms);
  EXPECT_EQ(bounds("share.record.lock.duration.ms").max, limits::max_share_record_lock_duration_ms);
  EXPECT_EQ(bounds("share.record.lock.duration.ms").min_name, "group.share.min.record.lock.duration.ms");
  EXPECT_EQ(bounds("share.delivery.count.limit").min, 2);
  EXPECT_EQ(bounds("share.delivery.count.limit").max, 10);
  EXPECT_EQ(bounds("share.session.timeout.ms").min, 45000);
  EXPECT_EQ(bounds("share.session.timeout.ms").max, 60000);
  EXPECT_EQ(bounds("share.heartbeat.interval.ms").min, 5000);
  EXPECT_EQ(bounds("share.heartbeat.interval.ms").max, 15000);
  EXPECT_EQ(bounds("consumer.session.timeout.ms").min, 45000);
  EXPECT_EQ(bounds("consumer.heartbeat.interval.ms").max, 15000);
}

// ---- IncrementalAlterConfigs --------------------------------------------------

TEST(GroupConfig, SetAndDeleteKeepOnlyTheKeysSet) {
  const auto b = defaults();
  std::vector<alter_request> ops = {set("share.record.lock.duration.ms", "20000"),
                                    set("share.auto.offset.reset", "earliest"),
                                    set("share.isolation.level", "read_committed"),
                                    set("errors.deadletterqueue.topic.name", "orders.dlq"),
                                    set("errors.deadletterqueue.copy.record.enable", "TRUE"),
                                    set("share.delivery.count.limit", "7")};
  auto r = alter_group_configs(b, {}, ops);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->size(), 6u);
  EXPECT_EQ(std::get<int64_t>(*r->find("share.record.lock.duration.ms")), 20000);
  EXPECT_EQ(std::get<bool>(*r->find("errors.deadletterqueue.copy.record.enable")), true);

  std::vector<alter_request> ops2 = {del("share.record.lock.duration.ms"), del("share.session.timeout.ms")};
  auto r2 = alter_group_configs(b, *r, ops2);
  ASSERT_TRUE(r2.ok()) << r2.err().message;
  EXPECT_EQ(r2->size(), 5u);
  EXPECT_EQ(r2->find("share.record.lock.duration.ms"), nullptr);
}

TEST(GroupConfig, RefusesUnknownKeysAndBadValuesNamingTheKey) {
  const auto b = defaults();
  auto one = [&](alter_request op) { return alter_group_configs(b, {}, std::span(&op, 1)); };
  expect_refused(one(set("share.record.lock.duration", "20000")), "share.record.lock.duration",
                 "did you mean share.record.lock.duration.ms");
  expect_refused(one(set("group.share.record.lock.duration.ms", "20000")), "group.share.record.lock.duration.ms",
                 "broker setting");
  expect_refused(one(set("retention.ms", "1")), "retention.ms", "topic config");
  expect_refused(one(set("share.record.lock.duration.ms", "abc")), "share.record.lock.duration.ms", "integer");
  // Kafka's fixed lower bound, then the broker's.
  expect_refused(one(set("share.record.lock.duration.ms", "999")), "share.record.lock.duration.ms");
  expect_refused(one(set("share.record.lock.duration.ms", "14999")), "share.record.lock.duration.ms",
                 "group.share.min.record.lock.duration.ms");
  expect_refused(one(set("share.record.lock.duration.ms", "60001")), "share.record.lock.duration.ms",
                 "group.share.max.record.lock.duration.ms");
  expect_refused(one(set("share.delivery.count.limit", "1")), "share.delivery.count.limit");
  expect_refused(one(set("share.delivery.count.limit", "11")), "share.delivery.count.limit", "at most 10");
  expect_refused(one(set("share.isolation.level", "READ_COMMITTED")), "share.isolation.level");
  expect_refused(one(set("share.auto.offset.reset", "none")), "share.auto.offset.reset");
  expect_refused(one(set("share.auto.offset.reset", "by_duration:PT-1H")), "share.auto.offset.reset",
                 "negative");
  expect_refused(one(set("errors.deadletterqueue.topic.name", "no spaces")), "errors.deadletterqueue.topic.name");
  expect_refused(one(set("errors.deadletterqueue.topic.name", std::string(250, 'a'))),
                 "errors.deadletterqueue.topic.name");
  expect_refused(one(set("errors.deadletterqueue.copy.record.enable", "yes")),
                 "errors.deadletterqueue.copy.record.enable");
  expect_refused(one(set("consumer.session.timeout.ms", "1000")), "consumer.session.timeout.ms");
  expect_refused(one(set("share.record.lock.duration.ms", std::string(300, '1'))), "share.record.lock.duration.ms",
                 "longer than");
  expect_refused(one(alter_request{"share.delivery.count.limit", alter_op::set, std::nullopt}),
                 "share.delivery.count.limit", "without a value");
}

TEST(GroupConfig, AppendAndSubtractAreRefusedWithKafkasMessage) {
  const auto b = defaults();
  alter_request op{"share.delivery.count.limit", alter_op::append, "3"};
  auto r = alter_group_configs(b, {}, std::span(&op, 1));
  expect_refused(r, "share.delivery.count.limit",
                 "Can't APPEND to key share.delivery.count.limit because its type is not LIST.");
  op.op = alter_op::subtract;
  expect_refused(alter_group_configs(b, {}, std::span(&op, 1)), "share.delivery.count.limit", "Can't SUBTRACT");
}

TEST(GroupConfig, SessionTimeoutMustExceedHeartbeatIntervalCountingInheritedValues) {
  const auto b = defaults();
  // Within each key's own bounds, but not above the other's value.
  std::vector<alter_request> ops = {set("share.session.timeout.ms", "45000"),
                                    set("share.heartbeat.interval.ms", "15000")};
  ASSERT_TRUE(alter_group_configs(b, {}, ops).ok());
  // Heartbeat alone is compared with the inherited session timeout (45000).
  std::vector<alter_request> hb = {set("consumer.heartbeat.interval.ms", "15000")};
  ASSERT_TRUE(alter_group_configs(b, {}, hb).ok());
  // With Kafka's default bounds (heartbeats at most 15 s, sessions at least
  // 45 s) no pair of values can break the rule; it matters once broker
  // settings widen the bounds, and is kept for then.
}

TEST(GroupConfig, DuplicateKeysAreRefused) {
  std::vector<alter_request> ops = {set("share.delivery.count.limit", "3"), del("share.delivery.count.limit")};
  expect_refused(alter_group_configs(defaults(), {}, ops), "share.delivery.count.limit", "twice");
}

// ---- AlterConfigs (legacy) ------------------------------------------------------

TEST(GroupConfig, ReplaceSetsTheWholeSetAndRefusesNullValues) {
  const auto b = defaults();
  config_map before;
  before.set("share.delivery.count.limit", int64_t{3});
  std::vector<config_entry> entries = {{"share.isolation.level", "read_committed"}};
  auto r = replace_group_configs(b, entries);
  ASSERT_TRUE(r.ok()) << r.err().message;
  EXPECT_EQ(r->size(), 1u);
  EXPECT_NE(r->find("share.isolation.level"), nullptr);
  std::vector<config_entry> nulls = {{"share.isolation.level", std::nullopt}};
  expect_refused(replace_group_configs(b, nulls), "share.isolation.level", "Null value not supported");
  std::vector<config_entry> none;
  auto empty = replace_group_configs(b, none);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

// ---- DescribeConfigs -------------------------------------------------------------

TEST(GroupConfig, DescribeListsEveryKeyWithItsSource) {
  const auto b = defaults();
  config_map c;
  c.set("share.record.lock.duration.ms", int64_t{20000});
  const auto d = describe_group(b, c);
  ASSERT_EQ(d.size(), all_group_settings().size());
  for (size_t i = 1; i < d.size(); ++i) EXPECT_LT(d[i - 1].name, d[i].name);
  for (const auto& e : d) {
    EXPECT_FALSE(e.read_only) << e.name;
    ASSERT_FALSE(e.synonyms.empty()) << e.name;
    EXPECT_EQ(e.synonyms.back().source, config_source::default_config) << e.name;
    if (e.name == "share.record.lock.duration.ms") {
      EXPECT_EQ(e.value, "20000");
      EXPECT_EQ(e.source, config_source::dynamic_group_config);
      EXPECT_EQ(static_cast<int>(e.source), 8);
      EXPECT_FALSE(e.is_default);
      ASSERT_EQ(e.synonyms.size(), 2u);
      EXPECT_EQ(e.synonyms[1].value, "30000");
      EXPECT_EQ(e.config_type, 3);  // INT
    } else {
      EXPECT_EQ(e.source, config_source::default_config) << e.name;
      EXPECT_TRUE(e.is_default) << e.name;
    }
    if (e.name == "errors.deadletterqueue.copy.record.enable") {
      EXPECT_EQ(e.config_type, 1);  // BOOLEAN
    }
    if (e.name == "share.auto.offset.reset") {
      EXPECT_EQ(e.value, "latest");
    }
  }
  std::vector<std::string> keys = {"share.isolation.level", "not.a.key"};
  const auto some = describe_group(b, c, keys);
  ASSERT_EQ(some.size(), 1u);
  EXPECT_EQ(some[0].name, "share.isolation.level");
}

// ---- share.auto.offset.reset -----------------------------------------------------

TEST(GroupConfig, AutoOffsetResetReadsJavasDurations) {
  using k = share_auto_offset_reset::strategy;
  auto ms = [](std::string_view text) -> int64_t {
    auto r = parse_share_auto_offset_reset(text);
    EXPECT_TRUE(r.ok()) << text << ": " << (r.ok() ? "" : r.err().message);
    if (!r.ok()) return -1;
    EXPECT_EQ(r->kind, k::by_duration) << text;
    return r->duration_ms;
  };
  EXPECT_EQ(parse_share_auto_offset_reset("latest")->kind, k::latest);
  EXPECT_EQ(parse_share_auto_offset_reset("EARLIEST")->kind, k::earliest);
  EXPECT_EQ(ms("by_duration:PT1H"), 3'600'000);
  EXPECT_EQ(ms("by_duration:P1DT12H30M"), 131'400'000);
  EXPECT_EQ(ms("BY_DURATION:pt1.5s"), 1'500);
  EXPECT_EQ(ms("by_duration:PT0,250S"), 250);
  EXPECT_EQ(ms("by_duration:P2D"), 172'800'000);
  EXPECT_EQ(ms("by_duration:PT0S"), 0);
  EXPECT_EQ(ms("by_duration:PT1H-30M"), 1'800'000);  // parts carry their own signs
  EXPECT_EQ(ms("by_duration:+PT10M"), 600'000);
  for (const char* bad : {"by_duration:", "by_duration:P", "by_duration:PT", "by_duration:P1DT",
                          "by_duration:1H", "by_duration:P1H", "by_duration:PT1D", "by_duration:PT1M1H",
                          "by_duration:PT1.5M", "by_duration:PT1.0000000001S", "by_duration:-PT1S",
                          "by_duration:P1Y", "by_duration:PT1H ", "by_duration:P99999999999999999999D",
                          "by_duration:P106751991167301D", "latest ", "by-duration:PT1H", ""}) {
    EXPECT_FALSE(parse_share_auto_offset_reset(bad).ok()) << bad;
  }
}

// ---- Typed views ---------------------------------------------------------------

TEST(GroupConfig, EffectiveShareConfigResolvesEveryKey) {
  const auto b = defaults();
  EXPECT_EQ(effective_share_group_config(b, {}), share_group_config{});
  config_map c;
  c.set("share.auto.offset.reset", std::string("by_duration:PT1M"));
  c.set("share.record.lock.duration.ms", int64_t{20000});
  c.set("share.delivery.count.limit", int64_t{3});
  c.set("share.isolation.level", std::string("read_committed"));
  c.set("errors.deadletterqueue.topic.name", std::string("dlq.orders"));
  c.set("errors.deadletterqueue.copy.record.enable", true);
  const auto s = effective_share_group_config(b, c);
  EXPECT_EQ(s.auto_offset_reset.kind, share_auto_offset_reset::strategy::by_duration);
  EXPECT_EQ(s.auto_offset_reset.duration_ms, 60'000);
  EXPECT_EQ(s.record_lock_duration_ms, 20000);
  EXPECT_EQ(s.delivery_count_limit, 3);
  EXPECT_TRUE(s.read_committed);
  EXPECT_EQ(s.session_timeout_ms, 45000);
  EXPECT_EQ(s.dead_letter_topic, "dlq.orders");
  EXPECT_TRUE(s.dead_letter_copy_record);
  // A value stored under wider bounds is clamped into today's.
  config_map wide;
  wide.set("share.record.lock.duration.ms", int64_t{3'600'000});
  wide.set("consumer.session.timeout.ms", int64_t{1000});
  EXPECT_EQ(effective_share_group_config(b, wide).record_lock_duration_ms, 60000);
  EXPECT_EQ(effective_consumer_group_config(b, wide).session_timeout_ms, 45000);
}

// ---- The group configs file ----------------------------------------------------

group_config_table sample_table() {
  group_config_table t;
  t["orders"].set("share.record.lock.duration.ms", int64_t{20000});
  t["orders"].set("share.auto.offset.reset", std::string("by_duration:PT1H"));
  t["a b/c=d\n%"].set("errors.deadletterqueue.copy.record.enable", true);
  t["a b/c=d\n%"].set("errors.deadletterqueue.topic.name", std::string(""));
  return t;
}

TEST(GroupConfigsFile, RoundTripsIdsOfAnyBytes) {
  const auto t = sample_table();
  const std::string text = serialize_group_configs(t);
  EXPECT_EQ(text.rfind("sluice-group-configs 1\ngroup a%20b%2Fc%3Dd%0A%25\n", 0), 0u) << text;
  auto back = parse_group_configs(text, "f");
  ASSERT_TRUE(back.ok()) << back.err().message;
  EXPECT_EQ(*back, t);
  auto empty = parse_group_configs(serialize_group_configs({}), "f");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

// `body` with the checksum line the writer would add.
std::string checksummed(const std::string& body) {
  char crc[16];
  std::snprintf(crc, sizeof crc, "%08x", crc32c(body.data(), body.size()));
  return body + "crc32c=" + crc + "\n";
}

TEST(GroupConfigsFile, RefusesDamageNamingTheLine) {
  const std::string good = serialize_group_configs(sample_table());
  auto refused = [](const std::string& text, const std::string& words) {
    auto r = parse_group_configs(text, "meta/group_configs");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.code(), errc::corrupt_data);
    EXPECT_NE(r.err().message.find("meta/group_configs:"), std::string::npos) << r.err().message;
    EXPECT_NE(r.err().message.find(words), std::string::npos) << r.err().message;
  };
  refused(good.substr(0, good.size() - 5), "torn");
  std::string flipped = good;
  flipped[30] ^= 1;
  refused(flipped, "checksum mismatch");
  refused("", "torn");
  // Well-formed checksums over bad contents: refused for what they say.
  refused(checksummed("sluice-config-overrides 1 topic\n"), "not a group configs file");
  refused(checksummed("sluice-group-configs 1\nshare.delivery.count.limit=3\n"), "expected a 'group <id>'");
  refused(checksummed("sluice-group-configs 1\ngroup g\n"), "group without a config");
  refused(checksummed("sluice-group-configs 1\ngroup g\ngroup h\nshare.delivery.count.limit=3\n"),
          "group without a config");
  refused(checksummed("sluice-group-configs 1\ngroup a b\nshare.delivery.count.limit=3\n"), "percent-encoded");
  refused(checksummed("sluice-group-configs 1\ngroup h\nshare.delivery.count.limit=3\n"
                      "group g\nshare.delivery.count.limit=3\n"),
          "ascending");
  refused(checksummed("sluice-group-configs 1\ngroup g\nshare.isolation.level=read_committed\n"
                      "share.delivery.count.limit=3\n"),
          "ascending");
  refused(checksummed("sluice-group-configs 1\ngroup g\nretention.ms=3\n"), "unknown group config");
  refused(checksummed("sluice-group-configs 1\ngroup g\nshare.delivery.count.limit=1\n"), ":3: ");
  refused(checksummed("sluice-group-configs 1\ngroup g\nshare.delivery.count.limit\n"), "key=value");
  // A value within Kafka's fixed bounds but outside today's broker bounds
  // still loads: the bounds may have been wider when it was written.
  EXPECT_TRUE(parse_group_configs(
                  checksummed("sluice-group-configs 1\ngroup g\nshare.record.lock.duration.ms=3600000\n"), "x")
                  .ok());
}

}  // namespace
}  // namespace sluice::config
