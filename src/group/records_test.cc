#include "group/records.h"

#include <gtest/gtest.h>

namespace sluice::group {
namespace {

TEST(GroupRecords, PartitionIsKafkasRule) {
  // Known to hash to Integer.MIN_VALUE in Java; Kafka's Utils.abs maps it to 0.
  EXPECT_EQ(partition_for("polygenelubricants", 50), 0);
  EXPECT_EQ(partition_for("abc", 50), 96354 % 50);
  for (const char* id : {"a", "orders-indexer", "group-17", "\xC3\xA9t\xC3\xA9"}) {
    int32_t p = partition_for(id, 50);
    EXPECT_GE(p, 0);
    EXPECT_LT(p, 50);
  }
}

TEST(GroupRecords, KeysRoundTrip) {
  record_key ok = offset_key{"g", "orders", 7};
  auto d = decode_key(encode_key(ok));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(std::get<offset_key>(*d), std::get<offset_key>(ok));
  record_key gk = group_key{"g2"};
  auto e = encode_key(gk);
  // Kafka's layout: int16 version 2, int16 length, bytes.
  EXPECT_EQ(e, (std::vector<uint8_t>{0, 2, 0, 2, 'g', '2'}));
  auto d2 = decode_key(e);
  ASSERT_TRUE(d2.ok());
  EXPECT_EQ(std::get<group_key>(*d2).group, "g2");
}

TEST(GroupRecords, ValuesRoundTrip) {
  offset_value ov{42, 3, "meta", 1'700'000'000'000};
  auto dov = decode_offset_value(encode_value(ov));
  ASSERT_TRUE(dov.ok());
  EXPECT_EQ(*dov, ov);

  group_value gv;
  gv.protocol_type = "consumer";
  gv.generation = 5;
  gv.protocol = "range";
  gv.leader = "m1";
  gv.current_state_timestamp_ms = 99;
  gv.members.push_back({"m1", "instance-1", "client", "/127.0.0.1", 30000, 10000, {1, 2, 3}, {4, 5}});
  gv.members.push_back({"m2", std::nullopt, "client", "", -1, 6000, {}, {}});
  auto dgv = decode_group_value(encode_value(gv));
  ASSERT_TRUE(dgv.ok());
  EXPECT_EQ(*dgv, gv);

  group_value empty;
  empty.protocol_type = "consumer";
  empty.generation = 6;
  auto de = decode_group_value(encode_value(empty));
  ASSERT_TRUE(de.ok());
  EXPECT_EQ(*de, empty);
  EXPECT_FALSE(de->protocol.has_value());
}

TEST(GroupRecords, OlderValueVersionsDecode) {
  // Offset value v1: offset, metadata, commit ts, expire ts.
  std::vector<uint8_t> v1 = {0, 1, 0, 0, 0, 0, 0, 0, 0, 9, 0, 1, 'x', 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 6};
  auto d = decode_offset_value(v1);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->offset, 9);
  EXPECT_EQ(d->metadata, "x");
  EXPECT_EQ(d->commit_timestamp_ms, 5);
  EXPECT_EQ(d->leader_epoch, -1);
}

// Version 4 is Kafka 4.1's OffsetCommitValue v4: flexible, with the topic
// id as tagged field 0 (docs/group_records.md).
TEST(GroupRecords, OffsetValueCarriesTheTopicIdInKafkasVersion4) {
  offset_value ov{42, 3, "m", 7, {}};
  for (uint8_t i = 0; i < 16; ++i) ov.topic_id[i] = static_cast<uint8_t>(0xa0 + i);
  const auto bytes = encode_value(ov);
  std::vector<uint8_t> expected = {0, 4,                       // version
                                   0, 0, 0, 0, 0, 0, 0, 42,    // offset
                                   0, 0, 0, 3,                 // leader epoch
                                   2, 'm',                     // compact string: length + 1
                                   0, 0, 0, 0, 0, 0, 0, 7,     // commit timestamp
                                   1, 0, 16};                  // one tagged field: tag 0, 16 bytes
  expected.insert(expected.end(), ov.topic_id.begin(), ov.topic_id.end());
  EXPECT_EQ(bytes, expected);
  auto d = decode_offset_value(bytes);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, ov);

  // Without an id no tagged field is written, and none is read back.
  offset_value no_id{5, -1, "", 9, {}};
  auto e = encode_value(no_id);
  EXPECT_EQ(e.back(), 0);
  auto dn = decode_offset_value(e);
  ASSERT_TRUE(dn.ok());
  EXPECT_EQ(*dn, no_id);

  // A tag this coordinator does not know (a newer writer's) is skipped.
  std::vector<uint8_t> with_unknown(bytes.begin(), bytes.begin() + 24);
  with_unknown.insert(with_unknown.end(), {2, 0, 16});
  with_unknown.insert(with_unknown.end(), ov.topic_id.begin(), ov.topic_id.end());
  with_unknown.insert(with_unknown.end(), {5, 2, 0xde, 0xad});
  auto du = decode_offset_value(with_unknown);
  ASSERT_TRUE(du.ok());
  EXPECT_EQ(*du, ov);

  // Every truncation fails cleanly; a topic id of the wrong size is corrupt.
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(decode_offset_value(std::span<const uint8_t>(bytes.data(), n)).ok()) << n;
  std::vector<uint8_t> short_id(bytes.begin(), bytes.begin() + 24);
  short_id.insert(short_id.end(), {1, 0, 2, 1, 2});
  EXPECT_EQ(decode_offset_value(short_id).code(), errc::corrupt_data);
  EXPECT_EQ(decode_offset_value(std::vector<uint8_t>{0, 5}).code(), errc::unsupported_format);
}

// Records written before ids were kept (version 3, Kafka's until 4.1)
// still decode, with no topic id.
TEST(GroupRecords, Version3OffsetValueHasNoTopicId) {
  std::vector<uint8_t> v3 = {0, 3, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 2, 0, 1, 'x', 0, 0, 0, 0, 0, 0, 0, 5};
  auto d = decode_offset_value(v3);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->offset, 9);
  EXPECT_EQ(d->leader_epoch, 2);
  EXPECT_EQ(d->metadata, "x");
  EXPECT_EQ(d->commit_timestamp_ms, 5);
  EXPECT_EQ(d->topic_id, sluice::topic_id{});
}

TEST(GroupRecords, BadInputIsAnErrorValue) {
  EXPECT_EQ(decode_key({}).code(), errc::corrupt_data);
  EXPECT_EQ(decode_key(std::vector<uint8_t>{0, 7, 0, 1, 'a'}).code(), errc::unsupported_format);
  EXPECT_EQ(decode_key(std::vector<uint8_t>{0, 1, 0, 5, 'a'}).code(), errc::corrupt_data);
  EXPECT_EQ(decode_key(std::vector<uint8_t>{0, 2, 0xff, 0xfe}).code(), errc::corrupt_data);
  EXPECT_EQ(decode_offset_value(std::vector<uint8_t>{0, 9}).code(), errc::unsupported_format);
  EXPECT_EQ(decode_offset_value(std::vector<uint8_t>{0, 3, 0, 0}).code(), errc::corrupt_data);
  // A member count far beyond the bytes present is refused before any allocation.
  group_value gv;
  gv.protocol_type = "consumer";
  auto bytes = encode_value(gv);
  bytes[bytes.size() - 1] = 0x7f;
  bytes[bytes.size() - 4] = 0x7f;
  EXPECT_EQ(decode_group_value(bytes).code(), errc::corrupt_data);
  // Every truncation of a valid value fails cleanly.
  gv.members.push_back({"m1", "i", "c", "h", 1, 2, {1}, {2}});
  auto full = encode_value(gv);
  for (size_t n = 0; n < full.size(); ++n) {
    EXPECT_FALSE(decode_group_value(std::span<const uint8_t>(full.data(), n)).ok()) << n;
  }
}

}  // namespace
}  // namespace sluice::group
