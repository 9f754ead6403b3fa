#include "share/coordinator.h"

#include <gtest/gtest.h>

#include <random>

namespace sluice::share {
namespace {

share_key key(const std::string& g, uint8_t topic, int32_t p) {
  share_key k;
  k.group_id = g;
  k.topic_id[15] = topic;
  k.partition = p;
  return k;
}

// Every write the coordinator returned, in order: the log.
struct log {
  std::vector<state_write> records;
  void add(const state_write& w) { records.push_back(w); }
  // A coordinator rebuilt from the log.
  coordinator replay(int32_t partitions) const {
    coordinator c(partitions);
    for (int32_t p = 0; p < partitions; ++p) c.begin_load(p);
    for (const auto& w : records) {
      std::optional<std::span<const uint8_t>> v;
      if (w.value_bytes) v = std::span<const uint8_t>(*w.value_bytes);
      EXPECT_TRUE(c.replay(w.partition, w.key_bytes, v).ok());
    }
    for (int32_t p = 0; p < partitions; ++p) c.finish_load(p);
    return c;
  }
};

coordinator loaded(int32_t partitions) {
  coordinator c(partitions);
  for (int32_t p = 0; p < partitions; ++p) {
    c.begin_load(p);
    c.finish_load(p);
  }
  return c;
}

TEST(ShareRecords, KeysAndSnapshotsRoundTrip) {
  share_key k = key("g", 7, 3);
  auto kb = encode_key(k);
  auto back = decode_key(kb);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, k);
  share_snapshot s;
  s.state_epoch = 2;
  s.leader_epoch = 9;
  s.state = {100, {{100, 104, record_state::available, 1}, {107, 107, record_state::archived, 5}}};
  s.write_timestamp_ms = 12345;
  s.state.dead_letter_producer_id = 4000;
  s.state.dead_letter_producer_epoch = 0;
  s.state.dead_letter_sequence = 9;
  s.state.pending_dead_letters = {{107, 5, archive_reason::delivery_count_exhausted, 8}};
  s.state.archived_count = 31;
  auto sb = encode_snapshot(s);
  auto sback = decode_snapshot(sb);
  ASSERT_TRUE(sback.ok());
  EXPECT_EQ(*sback, s);
}

TEST(ShareRecords, MalformedRecordsAreErrors) {
  EXPECT_FALSE(decode_key({}).ok());
  auto kb = encode_key(key("g", 1, 0));
  kb[1] = 5;  // unknown record type
  EXPECT_FALSE(decode_key(kb).ok());
  kb = encode_key(key("g", 1, 0));
  kb.push_back(0);
  EXPECT_FALSE(decode_key(kb).ok());
  auto bad = [](durable_state d) {
    share_snapshot s;
    s.state = d;
    return decode_snapshot(encode_snapshot(s)).ok();
  };
  EXPECT_TRUE(bad({5, {{5, 6, record_state::available, 1}}}));
  EXPECT_FALSE(bad({5, {{4, 6, record_state::available, 1}}}));  // below the start
  EXPECT_FALSE(bad({5, {{5, 6, record_state::available, 1}, {6, 7, record_state::archived, 1}}}));  // overlap
  EXPECT_FALSE(bad({5, {{5, 6, record_state::acquired, 1}}}));  // acquired is never durable
  EXPECT_FALSE(bad({5, {{7, 6, record_state::available, 1}}}));
  EXPECT_FALSE(bad({5, {{5, 5, record_state::available, -1}}}));
  EXPECT_FALSE(bad({0, {{0, 1'000'000, record_state::available, 1}}}));  // past the largest window
  durable_state dl{0, {}};
  dl.pending_dead_letters = {{3, 1, static_cast<archive_reason>(9), 0}};
  EXPECT_FALSE(bad(dl));  // an unknown reason
  dl.pending_dead_letters = {{-3, 1, archive_reason::rejected, 0}};
  EXPECT_FALSE(bad(dl));
  // Every truncation of a good value fails cleanly.
  share_snapshot s;
  s.state = {5, {{5, 6, record_state::available, 1}}};
  auto sb = encode_snapshot(s);
  for (size_t n = 0; n < sb.size(); ++n) EXPECT_FALSE(decode_snapshot(std::span(sb.data(), n)).ok()) << n;
  // Random bytes never crash.
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> b(rng() % 64);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    (void)decode_snapshot(b);
    (void)decode_key(b);
  }
}

TEST(ShareCoordinator, InitializeWriteReadAndReplay) {
  coordinator c = loaded(3);
  log l;
  share_key k = key("g", 1, 0);
  auto r = c.read(k, 0);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  auto w = c.initialize(k, 0, 42, 1);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->partition, c.partition_for(k));
  l.add(*w);
  durable_state d{43, {{44, 44, record_state::archived, 2}}};
  auto w2 = c.write(k, 0, 0, d, 2);
  ASSERT_TRUE(w2.ok());
  l.add(*w2);
  r = c.read(k, 0);
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ((*r)->state, d);
  EXPECT_EQ((*r)->state_epoch, 0);
  coordinator back = l.replay(3);
  auto rb = back.read(k, 0);
  ASSERT_TRUE(rb.ok() && rb->has_value());
  EXPECT_EQ(**rb, **r);
}

TEST(ShareCoordinator, OlderLeaderEpochsAndOtherStateEpochsAreFenced) {
  coordinator c = loaded(1);
  share_key k = key("g", 1, 0);
  ASSERT_TRUE(c.initialize(k, 5, 0, 0).ok());
  EXPECT_EQ(c.write(k, 0, 4, {0, {}}, 0).code(), errc::fenced_leader_epoch);
  EXPECT_EQ(c.write(k, 1, 5, {0, {}}, 0).code(), errc::fenced_state_epoch);
  // A newer leader reads: the old one can no longer write.
  ASSERT_TRUE(c.read(k, 6).ok());
  EXPECT_EQ(c.write(k, 0, 5, {1, {}}, 0).code(), errc::fenced_leader_epoch);
  EXPECT_EQ(c.read(k, 5).code(), errc::fenced_leader_epoch);
  EXPECT_TRUE(c.write(k, 0, 6, {1, {}}, 0).ok());
  // The start offset does not move back within a state epoch...
  EXPECT_EQ(c.write(k, 0, 6, {0, {}}, 0).code(), errc::invalid_argument);
  // ...but a reset (initialize) may, at the next state epoch.
  auto w = c.initialize(k, 6, 0, 0);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(c.write(k, 0, 6, {0, {}}, 0).code(), errc::fenced_state_epoch);
  EXPECT_TRUE(c.write(k, 1, 6, {0, {}}, 0).ok());
  // An initialisation asked at a given state epoch must be newer.
  EXPECT_EQ(c.initialize(k, -1, 0, 0, 1).code(), errc::fenced_state_epoch);
  EXPECT_TRUE(c.initialize(k, -1, 0, 0, 5).ok());
  EXPECT_EQ(c.read(k, 6)->value().state_epoch, 5);
  EXPECT_EQ(c.read(k, 6)->value().leader_epoch, 6);  // -1 kept the leader epoch
  // An admin read (leader epoch -1) is never fenced and fences no one.
  ASSERT_TRUE(c.read(k, -1).ok());
  EXPECT_EQ(c.read(k, -1)->value().state_epoch, 5);
  EXPECT_TRUE(c.write(k, 5, 6, {0, {}}, 0).ok());
  // Writing a state that is not there (deleted since) is fenced.
  EXPECT_EQ(c.write(key("g", 2, 0), 0, 0, {0, {}}, 0).code(), errc::fenced_state_epoch);
  ASSERT_TRUE(c.remove(k).ok());
  EXPECT_EQ(c.write(k, 5, 6, {0, {}}, 0).code(), errc::fenced_state_epoch);
}

TEST(ShareCoordinator, PartitionsNotLoadedOrLoadingAnswerSo) {
  coordinator c(4);
  share_key k = key("g", 1, 0);
  EXPECT_EQ(c.read(k, 0).code(), errc::not_coordinator);
  c.begin_load(c.partition_for(k));
  EXPECT_EQ(c.initialize(k, 0, 0, 0).code(), errc::coordinator_load_in_progress);
  c.finish_load(c.partition_for(k));
  EXPECT_TRUE(c.initialize(k, 0, 0, 0).ok());
  c.unload(c.partition_for(k));
  EXPECT_EQ(c.read(k, 0).code(), errc::not_coordinator);
  EXPECT_EQ(c.size(), 0u);
}

TEST(ShareCoordinator, RemoveWritesATombstoneThatReplayHonours) {
  coordinator c = loaded(2);
  log l;
  share_key a = key("g", 1, 0), b = key("g", 1, 1), other = key("h", 1, 0);
  for (auto& k : {a, b, other}) l.add(*c.initialize(k, 0, 0, 0));
  EXPECT_EQ(c.group_state("g").size(), 2u);
  auto t = c.remove(a);
  ASSERT_TRUE(t.ok() && t->has_value());
  EXPECT_FALSE((*t)->value_bytes);
  l.add(**t);
  auto none = c.remove(a);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  coordinator back = l.replay(2);
  EXPECT_EQ(back.group_state("g").size(), 1u);
  EXPECT_FALSE(back.read(a, 0)->has_value());
  EXPECT_TRUE(back.read(other, 0)->has_value());
}

TEST(ShareCoordinator, ReplayRefusesRecordsItCannotRead) {
  coordinator c(2);
  c.begin_load(0);
  std::vector<uint8_t> junk = {1, 2, 3};
  EXPECT_FALSE(c.replay(0, junk, std::nullopt).ok());
  // A key in the wrong partition.
  share_key k = key("g", 1, 0);
  const int32_t wrong = 1 - partition_for(k, 2);
  c.begin_load(wrong);
  auto kb = encode_key(k);
  EXPECT_EQ(c.replay(wrong, kb, std::nullopt).code(), errc::corrupt_data);
}

}  // namespace
}  // namespace sluice::share
